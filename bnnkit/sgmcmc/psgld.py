"""Preconditioned SGLD with an RMSprop preconditioner (Li, Chen, Carlson & Carin 2016).

With ``g_t`` the minibatch log-posterior gradient and ``gbar_t = g_t / N`` its per-datum scale::

    V_t     = alpha V_{t-1} + (1 - alpha) gbar_t * gbar_t
    G_t     = 1 / (delta + sqrt(V_t))                     (diagonal)
    w_{t+1} = w_t + (eps_t / 2) (G_t g_t + Gamma_t) + sqrt(eps_t T G_t) * xi_t

``Gamma_i = dG_ii / dw_i`` is the correction for the position-dependent preconditioner.  It is
small when ``alpha`` is close to 1 and usually dropped (``correction=False``).  With
``correction=True`` it is computed through ``V_t``'s dependence on the current gradient::

    Gamma_i = -G_ii^2 (1 - alpha) gbar_i h_i / sqrt(V_i),    h_i = d gbar_i / d w_i

where the Hessian diagonal ``h`` is estimated without bias by Hutchinson's ``z * (H z)`` with a
Rademacher ``z`` (one extra Hessian-vector product per step).
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_positive
from ..core.target import Target
from ..core.types import Batch, Kernel
from .common import SGInfo, check_temperature, normal
from .fused import FusedAlgorithm, FusedUpdate
from .hyper import GIBBS_NOT_VECTORIZABLE, check_gibbs_every, hyper_gibbs, start_step
from .schedules import Schedule, as_schedule
from .updates import psgld_noise_variance, psgld_update


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
class PreconditionedSGLD(FusedAlgorithm):
    """pSGLD hyperparameters: ``step_size`` (number or schedule), RMSprop decay ``alpha``, the
    preconditioner's floor ``delta`` (``G = 1 / (delta + sqrt(V))``), ``correction`` (add the
    Gamma term), ``num_data`` (N; defaults to the posterior's), ``temperature``;
    ``gibbs_every=k``: every ``k`` steps first draw the conjugate hyperparameters from their Gibbs
    conditional given the weights and the step's minibatch, leaving the preconditioner as it is
    (:mod:`bnnkit.sgmcmc.hyper`).

    ``eps=`` is the deprecated name of ``delta`` (``eps`` is the step size everywhere else): it
    still works, with a :class:`DeprecationWarning`.
    """

    step_size: float | Schedule = 1e-4
    alpha: float = 0.99
    delta: float = 1e-5  # keeps G bounded where V is tiny
    correction: bool = False
    num_data: int | None = None  # N for the per-datum gradient scale; taken from the posterior if None
    temperature: float = 1.0
    name: str = "psgld"
    gibbs_every: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "step_size", as_schedule(self.step_size))
        if not 0.0 <= self.alpha < 1.0:
            raise BnnkitError(f"alpha (RMSprop decay) must lie in [0, 1), got {self.alpha!r}.")
        check_positive("delta (the preconditioner's floor; formerly eps)", self.delta)
        check_temperature(self.temperature)
        check_gibbs_every(self.gibbs_every, self.temperature)

    @property
    def eps(self) -> float:
        """Deprecated name of :attr:`delta`."""
        warnings.warn(
            "PreconditionedSGLD.eps is deprecated: the preconditioner's floor is now called delta (eps is the "
            "step size elsewhere); read .delta instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.delta

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
            "eps": self.delta,  # the old key: runs written before the rename to delta still resume
            "correction": self.correction,
            "temperature": self.temperature,
        }
        if self.gibbs_every is not None:
            cfg["gibbs_every"] = self.gibbs_every
        return cfg

    def fused_update(self) -> FusedUpdate:
        why = "gibbs_every" if self.gibbs_every is not None else None
        why = why or ("correction=True (a Hessian-vector product per step)" if self.correction else None)
        if why is not None:
            raise BnnkitError(
                f"the fused loop does not run PreconditionedSGLD with {why}; run it step at a time "
                "(bnnkit.sample without fused=)."
            )
        return FusedUpdate(
            "psgld",
            float(self.temperature),
            alpha=float(self.alpha),
            delta=float(self.delta),
            num_data=float(self.num_data or 0),  # 0: the posterior's N, set when built
        )

    def build(self, target: Target) -> Kernel:
        schedule, alpha, delta, temp = self.step_size, self.alpha, self.delta, self.temperature
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
            _, eps, noisy, x = start_step(state, schedule, gibbs, batch, gen)
            lp, g = target.estimate_grad(x, batch, gen)
            hess = hutchinson_hessian_diag(target, x, batch, gen) if correction else None
            xi = normal(x, gen) if noisy else None
            var = psgld_noise_variance(eps, temp)
            x_new, v = psgld_update(x, state.square_avg, g, eps, var, xi, alpha, delta, n, hess)
            eps_t = torch.tensor(eps, dtype=x.dtype)
            return PSGLDState(x_new, v, state.iteration + 1, eps_t), SGInfo(lp, eps_t, torch.tensor(noisy))

        return Kernel(init, step)


def _with_eps_keyword(init):
    """The dataclass ``__init__``, also taking ``eps=`` (deprecated) for ``delta``."""

    @functools.wraps(init)
    def __init__(self, *args, eps: float | None = None, **kwargs) -> None:
        if eps is not None:
            warnings.warn(
                "PreconditionedSGLD(eps=...) is deprecated: the preconditioner's floor is now called delta "
                "(eps is the step size elsewhere); pass delta=... instead.",
                DeprecationWarning,
                stacklevel=2,
            )
            if "delta" in kwargs or len(args) > 2:
                raise BnnkitError("got both delta and eps (its deprecated name); pass delta only.")
            kwargs["delta"] = eps
        init(self, *args, **kwargs)

    return __init__


PreconditionedSGLD.__init__ = _with_eps_keyword(PreconditionedSGLD.__init__)  # type: ignore[method-assign]
