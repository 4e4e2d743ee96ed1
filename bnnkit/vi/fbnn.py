"""Functional variational BNN (FBNN, Sun, Zhang, Shi & Grosse 2019), the functional-VI baseline.

``q`` is a mean-field Gaussian over the network weights (``w = mu + softplus(rho) * eps``) seen
through the functions it induces.  On a measurement set ``X = X_B u X_M`` (minibatch inputs plus
the functional posterior's measurement points) FBNN maximises the functional ELBO::

    L = (N/n) sum_{i in B} E_q[log p(y_i | f(x_i))] - lam * KL[q(f^X) || p(f^X)]

with ``p(f^X) = N(m, K)`` the GP prior of a :class:`~bnnkit.functional.FunctionalPosterior`.
Its gradient with respect to the variational parameters ``phi``, through the reparameterised
function draws ``f_s = f(X; w_s(phi))``, is::

    grad_phi KL = E_s[ (grad_f log q(f_s) - grad_f log p(f_s))^T d f_s / d phi ]

``grad log p`` is ``-K^-1 (f - m)`` in closed form; the implicit ``q(f^X)`` has no density, so its
score comes from the spectral Stein gradient estimator (:func:`~bnnkit.vi.ssge.ssge_score`) over
the ``S`` draws (``docs/fsgmcmc_design.md`` section 10).  A small Gaussian noise ``injected_noise``
is added to the function draws for the estimator (as in the FBNN code) so ``q(f^X)`` has a density
even when ``|X|`` exceeds the number of weights.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least, check_positive
from ..core.types import Kernel
from .bbb import VIResult
from .kernel import VIState, draws_from_state, elbo_kernel
from .meanfield import MeanFieldGaussian
from .optim import batches_per_epoch, check_fit_options
from .run import HISTORY_FBNN, _check_weights_only, _require_posterior, run_fit
from .ssge import ssge_score


@dataclass(frozen=True)
class FBNN:
    """FBNN hyperparameters.

    Args:
        lr, num_epochs, batch_size: Adam on ``(mu, rho)``; ``batch_size=None`` is full batch.
        num_function_samples: ``S`` reparameterised draws per step (the SSGE sample size).
        kl_weight: ``lam`` on the functional KL.
        injected_noise: standard deviation of the noise added to the function draws for SSGE.
        include_batch: put the minibatch inputs into the measurement set ``X``.
        init_sigma: initial ``softplus(rho)``.
        num_eigen: eigenfunctions kept by the score estimator (default: by spectrum threshold).
        lr_decay: ``"cosine"`` anneals the learning rate to 0, so the last iterate does not jitter
            with the Monte-Carlo noise of the gradient.
    """

    lr: float = 1e-2
    num_epochs: int = 100
    batch_size: int | None = None
    num_function_samples: int = 100
    kl_weight: float = 1.0
    injected_noise: float = 1e-3
    include_batch: bool = True
    init_sigma: float = 1e-2
    num_eigen: int | None = None
    lr_decay: str | None = None
    name: str = "fbnn"

    def __post_init__(self) -> None:
        check_fit_options(self.lr, self.num_epochs, self.batch_size, self.lr_decay)
        check_int_at_least("num_function_samples", self.num_function_samples, 3)
        check_positive("kl_weight", self.kl_weight)
        check_positive("init_sigma", self.init_sigma)
        if self.injected_noise < 0:
            raise BnnkitError(f"injected_noise must be >= 0, got {self.injected_noise!r}.")

    def config(self) -> dict:
        return asdict(self)

    def terms(
        self, posterior, q: MeanFieldGaussian, batch: tuple[Tensor, Tensor], n: int, gen: torch.Generator
    ) -> tuple[Tensor, Tensor]:
        """One minibatch's ``(N/n) sum_B E_q[log p(y|f)]`` and KL surrogate (its gradient is the
        functional KL's), both differentiable in ``q``; ``n`` is the data size N.

        The loss of a step is ``-(ll - kl_weight * kl)``; :meth:`fit` runs it over epochs, an
        online learner (the bandit) on its own minibatches.
        """
        xb, yb = batch
        S = self.num_function_samples
        # The GP and the measurement sampler see flat rows; the network its own input shape
        # (e.g. images), as in FunctionalPosterior.
        xb_flat = xb.reshape(xb.shape[0], -1)
        xm = posterior.measurement.sample(xb_flat, gen).to(xb.dtype)
        x_meas = torch.cat([xb_flat, xm]) if self.include_batch else xm
        eps = torch.randn((S, q.mu.numel()), generator=gen, dtype=q.mu.dtype)
        w = q.mu + q.sigma * eps  # reparameterised draws
        x_all = torch.cat([xb, x_meas.reshape(-1, *xb.shape[1:])])
        out = torch.func.vmap(lambda wi: posterior.forward(posterior.split(wi)[0], x_all))(w)
        out = out.reshape(S, x_all.shape[0], -1)  # [S, n + P, C]
        f_b, f_x = out[:, : xb.shape[0]], out[:, xb.shape[0] :]  # [S, n, C], [S, P, C]
        ll = torch.stack([posterior.likelihood.log_prob(f_b[s], yb, {}) for s in range(S)]).mean()
        ll = ll * (n / xb.shape[0])
        # scores of q (SSGE, on noisy draws) and of the GP prior (closed form), no gradient
        with torch.no_grad():
            flat = f_x.reshape(S, -1)
            noisy = flat + self.injected_noise * torch.randn(flat.shape, generator=gen, dtype=flat.dtype)
            score_q = ssge_score(noisy, num_eigen=self.num_eigen).reshape(f_x.shape)
            chol, _ = posterior.gp.cholesky(x_meas)
            m = posterior.gp.mean(x_meas).double()
            m = m[:, None] if m.ndim == 1 else m  # [P, 1] or [P, C]
            resid = f_x.double() - m  # [S, P, C]
            rhs = resid.permute(1, 0, 2).reshape(resid.shape[1], -1)  # [P, S*C]: one solve
            alpha = torch.cholesky_solve(rhs, chol).reshape(resid.shape[1], S, -1).permute(1, 0, 2)
            score_p = -alpha.to(f_x.dtype)
        return ll, ((score_q - score_p) * f_x).sum() / S

    # What the driver reads (see bnnkit.core.types.Algorithm), as for BayesByBackprop.
    needs_model: ClassVar[bool] = True
    default_init: ClassVar[str] = "module"
    vectorizable: ClassVar[bool] = False
    not_vectorizable_because: ClassVar[str] = (
        "a VI fit is one chain of optimisation (run fits one after another)"
    )

    def build(self, target: Any, model: Any = None) -> Kernel:
        """The fit-then-draw kernel (:mod:`bnnkit.vi.kernel`) of the functional ELBO on ``model``,
        a :class:`~bnnkit.functional.FunctionalPosterior`: step ``t`` takes the gradient of
        ``-(ll - kl_weight * kl)`` (:meth:`terms`, ``N`` the posterior's ``num_data``) and one Adam
        step; after ``num_epochs * ceil(N / batch_size)`` steps every step is a draw from ``q``."""
        posterior = _require_functional(_require_posterior(model, type(self).__name__))
        _check_weights_only(posterior, "FBNN")
        num_data = posterior.num_data
        if self.batch_size is not None and num_data is None:
            raise BnnkitError(
                "minibatched FBNN needs the training-set size: build the posterior with num_data=N."
            )
        num_batches = batches_per_epoch(self.batch_size, num_data)
        lam = self.kl_weight

        def objective(mu: Tensor, rho: Tensor, batch: Any, gen: torch.Generator, t: int):
            n = num_data if num_data is not None else int(batch[0].shape[0])
            with torch.enable_grad():
                ll, kl_sur = self.terms(posterior, MeanFieldGaussian.from_params(mu, rho), batch, n, gen)
                minus = -torch.ones_like(ll)
                g_mu, g_rho = torch.autograd.grad((ll, kl_sur), (mu, rho), (minus, minus.neg() * lam))
            ll, kl_sur = ll.detach(), kl_sur.detach()
            rows = ll.new_tensor(float(n))
            return g_mu, g_rho, torch.stack([ll, kl_sur, rows]), ll - lam * kl_sur

        def summarise(sums: Tensor) -> Tensor:  # epoch averages of the full-data estimates
            ll, kl, n = sums[0] / num_batches, sums[1] / num_batches, sums[2] / num_batches
            return torch.stack([ll - lam * kl, -ll / n, kl])

        return elbo_kernel(self, objective, summarise, num_batches, num_data)

    @staticmethod
    def draws(state: VIState, num: int, generator: torch.Generator) -> Tensor:
        """``num`` draws ``[num, D]`` from the ``q`` of a kernel state (see
        :meth:`BayesByBackprop.draws`)."""
        return draws_from_state(state, num, generator)

    def fit(
        self,
        posterior,
        data: tuple[Tensor, Tensor],
        *,
        seed: int = 0,
        progress: bool = True,
        output: str | None = None,
    ) -> VIResult:
        """Fit ``q`` to a :class:`~bnnkit.functional.FunctionalPosterior` on ``data``, through
        :func:`bnnkit.sample` with the kernel of :meth:`build` (see :meth:`BayesByBackprop.fit`)."""
        data = _require_functional(posterior).as_data(data)
        state, history = run_fit(
            self, posterior, data, seed, progress, output, None, HISTORY_FBNN, "the functional ELBO"
        )
        return VIResult.from_state(posterior, state, history, self.config())


def _require_functional(posterior: Any) -> Any:
    """``posterior``, refused unless it is functional (has a GP prior and measurement points)."""
    if not hasattr(posterior, "gp") or not hasattr(posterior, "measurement"):
        raise BnnkitError(
            "FBNN needs a functional posterior (its GP prior and measurement points): build "
            "bnnkit.functional.FunctionalPosterior(module, likelihood, gp, measurement, train_inputs)."
        )
    return posterior
