"""Preconditioned SGLD with an RMSprop preconditioner (Li, Chen, Carlson & Carin 2016).

With ``g_t`` the minibatch log-posterior gradient and ``gbar_t = g_t / N`` its per-datum scale::

    V_t     = alpha V_{t-1} + (1 - alpha) gbar_t * gbar_t
    G_t     = 1 / (lam + sqrt(V_t))                       (diagonal)
    w_{t+1} = w_t + (eps_t / 2) (G_t g_t + Gamma_t) + sqrt(eps_t T G_t) * xi_t

``Gamma_i = dG_ii / dw_i`` is the correction for the position-dependent preconditioner.  It is
small when ``alpha`` is close to 1 and usually dropped (``correction=False``).  With
``correction=True`` it is computed through ``V_t``'s dependence on the current gradient::

    Gamma_i = -G_ii^2 (1 - alpha) gbar_i h_i / sqrt(V_i),    h_i = d gbar_i / d w_i

where the Hessian diagonal ``h`` is estimated without bias by Hutchinson's ``z * (H z)`` with a
Rademacher ``z`` (one extra Hessian-vector product per step).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_positive
from ..core.target import Target
from ..core.types import Batch, Kernel
from .common import SGInfo, check_temperature, normal
from .hyper import GIBBS_NOT_VECTORIZABLE, check_gibbs_every, gibbs_hyper, hyper_gibbs
from .schedules import Schedule, as_schedule


def hutchinson_hessian_diag(target: Target, x: Tensor, batch: Batch, gen: torch.Generator) -> Tensor:
    """Unbiased estimate ``z * (H z)`` of the diagonal of the log-density Hessian at ``x``
    (``z`` Rademacher; one Hessian-vector product)."""
    z = torch.randint(0, 2, x.shape, generator=gen, device=x.device).to(x.dtype).mul_(2).sub_(1)
    with torch.enable_grad():
        xg = x.detach().requires_grad_(True)
        (g,) = torch.autograd.grad(target.log_prob(xg, batch), xg, create_graph=True)
        (hz,) = torch.autograd.grad(g, xg, grad_outputs=z)
    return z * hz


class PSGLDState(NamedTuple):
    position: Tensor
    square_avg: Tensor  # V
    iteration: Tensor
    step_size: Tensor


@dataclass(frozen=True)
class PreconditionedSGLD:
    """pSGLD hyperparameters: ``step_size`` (number or schedule), RMSprop decay ``alpha``, floor
    ``eps`` (lambda), ``correction`` (add the Gamma term), ``num_data`` (N; defaults to the
    posterior's), ``temperature``; ``gibbs_every=k``: every ``k`` steps first draw the conjugate
    hyperparameters from their Gibbs conditional given the weights and the step's minibatch,
    leaving the preconditioner as it is (:mod:`bnnkit.sgmcmc.hyper`)."""

    step_size: float | Schedule = 1e-4
    alpha: float = 0.99
    eps: float = 1e-5  # lambda, keeps G bounded where V is tiny
    correction: bool = False
    num_data: int | None = None  # N for the per-datum gradient scale; taken from the posterior if None
    temperature: float = 1.0
    name: str = "psgld"
    gibbs_every: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "step_size", as_schedule(self.step_size))
        if not 0.0 <= self.alpha < 1.0:
            raise BnnkitError(f"alpha (RMSprop decay) must lie in [0, 1), got {self.alpha!r}.")
        check_positive("eps (preconditioner floor lambda)", self.eps)
        check_temperature(self.temperature)
        check_gibbs_every(self.gibbs_every, self.temperature)

    @property
    def vectorizable(self) -> bool:
        return self.gibbs_every is None and not self.correction

    @property
    def not_vectorizable_because(self) -> str:
        if self.correction:
            return "correction=True estimates the Hessian diagonal with one chain's Hessian-vector product"
        return GIBBS_NOT_VECTORIZABLE

    @property
    def sampling_fraction(self) -> float:
        return self.step_size.sampling_fraction

    def config(self) -> dict:
        cfg = {
            **self.step_size.config(),
            "alpha": self.alpha,
            "eps": self.eps,
            "correction": self.correction,
            "temperature": self.temperature,
        }
        if self.gibbs_every is not None:
            cfg["gibbs_every"] = self.gibbs_every
        return cfg

    def build_fused(
        self, model: Any, block: int, chains: int | None = None, chain_batched: bool = True
    ) -> Any:
        """A :class:`~bnnkit.sgmcmc.fused.FusedKernel` running ``block`` steps per compiled call
        (``bnnkit.sample(..., fused=...)``; ``chains``: vectorised chains)."""
        from .fused import build_fused

        return build_fused(self, model, block, chains, chain_batched)

    def build(self, target: Target) -> Kernel:
        schedule, alpha, lam, temp = self.step_size, self.alpha, self.eps, self.temperature
        n = float(self.num_data or getattr(target, "num_data", None) or 1)
        correction = self.correction
        gibbs = hyper_gibbs(target, self.gibbs_every, type(self).__name__)

        def init(position: Tensor, batch: Batch) -> PSGLDState:
            x = position.detach().clone()
            return PSGLDState(
                x,
                torch.zeros_like(x),
                torch.zeros((), dtype=torch.int64),
                torch.tensor(schedule(0), dtype=x.dtype),
            )

        def step(state: PSGLDState, batch: Batch, gen: torch.Generator) -> tuple[PSGLDState, SGInfo]:
            t = int(state.iteration)
            eps = schedule(t)
            noisy = schedule.sampling(t)
            x = state.position
            if gibbs is not None and gibbs.due(t):
                x = gibbs_hyper(x, batch, gen, gibbs.blocks)
            lp, g = target.estimate_grad(x, batch, gen)
            gbar = g / n
            v = state.square_avg * alpha + (1 - alpha) * gbar * gbar
            sv = v.sqrt()
            G = 1.0 / (lam + sv)
            drift = G * g
            if correction:
                h = hutchinson_hessian_diag(target, x, batch, gen) / n
                drift = drift - G.square() * (1 - alpha) * gbar * h / sv.clamp_min(1e-30)
            x_new = x + (0.5 * eps) * drift
            if noisy:
                x_new = x_new + normal(x, gen) * (G * (eps * temp)).sqrt()
            eps_t = torch.tensor(eps, dtype=x.dtype)
            return PSGLDState(x_new, v, state.iteration + 1, eps_t), SGInfo(lp, eps_t, torch.tensor(noisy))

        return Kernel(init, step)
