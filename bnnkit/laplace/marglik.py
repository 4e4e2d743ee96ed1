"""The Laplace approximation of the log marginal likelihood, and its optimisation.

MacKay (1992); Immer et al. (2021).  Around the MAP ``theta*`` of the Laplace subset (``P``
weights), with prior ``N(0, (m D)^{-1})`` and posterior precision ``Lambda = s H + m D``:

.. math::

    \\log p(D \\mid h) \\approx \\log p(D \\mid \\theta^*) + \\log p(\\theta^* \\mid h)
        + \\tfrac{P}{2}\\log 2\\pi - \\tfrac12 \\log\\det\\Lambda

    = \\log p(D \\mid \\theta^*) - \\tfrac{m}{2} \\sum_i b_i \\theta_i^{*2}
        + \\tfrac12 \\sum_i \\log(m b_i) - \\tfrac12 \\log\\det\\Lambda(s, m),

maximised over ``h = (log m, log tau)`` with ``theta*`` and ``H`` held fixed.  For a Gaussian
likelihood ``log p(D | theta*) = n/2 log(tau / 2 pi) - tau/2 SSR``.  Holding ``theta*`` fixed is
the standard scheme; refitting the MAP under the new hyperparameters and repeating (``rounds``)
converges to a stationary point of the evidence itself (exactly so for a linear-Gaussian model).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

LOG_2PI = math.log(2 * math.pi)


def log_likelihood(stats: dict, log_tau: Tensor | None) -> Tensor:
    """``log p(D | theta*)``: from the stored sufficient statistics at the MAP."""
    if log_tau is None:
        return stats["ll"]
    n, ssr, scale = stats["n"], stats["ssr"], stats["scale"]
    return scale * (0.5 * n * (log_tau - LOG_2PI) - 0.5 * log_tau.exp() * ssr)


def log_marginal_likelihood(la, log_m: Tensor, log_tau: Tensor | None) -> Tensor:
    """The Laplace evidence of a fitted :class:`~bnnkit.laplace.Laplace` at ``(log m, log tau)``."""
    m = log_m.exp()
    s = la._lik_scale(log_tau)
    theta, b = la._theta, la._b
    log_prior = -0.5 * m * (b * theta * theta).sum() + 0.5 * (torch.log(b).sum() + b.numel() * log_m)
    return log_likelihood(la._stats, log_tau) + log_prior - 0.5 * la._structure.logdet(s, m)


def optimize(la, prior: bool, noise: bool, max_iter: int = 200) -> tuple[Tensor, Tensor | None]:
    """Maximise the Laplace evidence over the chosen log-hyperparameters by L-BFGS.

    Two scalars and a cheap objective (every structure is pre-factorised): L-BFGS with a
    strong-Wolfe line search reaches the optimum to rounding in a few dozen evaluations, where
    Adam would need a learning rate and a step count.
    """
    dtype = la._theta.dtype
    log_m = la._log_m.detach().clone().to(dtype).requires_grad_(prior)
    log_tau = None if la._log_tau is None else la._log_tau.detach().clone().to(dtype).requires_grad_(noise)
    free = [t for t in (log_m, log_tau) if t is not None and t.requires_grad]
    if not free:
        return log_m.detach(), None if log_tau is None else log_tau.detach()
    opt = torch.optim.LBFGS(
        free,
        lr=1.0,
        max_iter=max_iter,
        line_search_fn="strong_wolfe",
        tolerance_grad=1e-10,
        tolerance_change=1e-14,
    )

    def closure() -> Tensor:
        opt.zero_grad()
        loss = -log_marginal_likelihood(la, log_m, log_tau)
        loss.backward()
        return loss

    opt.step(closure)
    return log_m.detach(), None if log_tau is None else log_tau.detach()
