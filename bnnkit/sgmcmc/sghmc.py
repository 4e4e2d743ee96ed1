"""Stochastic-gradient Hamiltonian Monte Carlo (Chen, Fox & Guestrin 2014).

Position/momentum form, with ``g_t`` the minibatch estimate of the log-posterior gradient at
``w_t``, diagonal mass ``m``, friction ``C``, gradient-noise estimate ``B`` and temperature ``T``::

    r_{t+1} = r_t + eps g_t - eps C r_t / m + N(0, 2 eps (C - B) T)
    w_{t+1} = w_t + eps r_{t+1} / m

Learning-rate form (Chen et al. eq. 15), for ``m = 1``: with ``v = eps r``, ``lr = eps^2``,
``momentum_decay = eps C`` and ``beta = eps B``::

    v_{t+1} = (1 - momentum_decay) v_t + lr g_t + N(0, 2 (momentum_decay - beta) lr T)
    w_{t+1} = w_t + v_{t+1}

so ``eps = sqrt(lr)`` and ``C = momentum_decay / sqrt(lr)`` (:meth:`SGHMC.from_learning_rate`).

``B`` is 0 (the usual choice), a constant, or ``"online"``: ``B = eps V / 2`` with ``V`` the
per-coordinate variance of ``g_t`` estimated each step from the difference of the gradients of
the two halves of the minibatch (same position, independent rows, so the difference is pure
gradient noise), smoothed by an exponential moving average.  Where ``B`` would exceed ``C`` the
injected noise is clipped at zero and ``info.noise_clipped`` reports the fraction of coordinates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least, check_positive
from ..core.target import Target
from ..core.types import Batch, Kernel
from .common import COLLECT, StepSizeTensors, check_temperature, normal, split_batch
from .fused import FusedAlgorithm, FusedUpdate
from .hyper import GIBBS_NOT_VECTORIZABLE, check_gibbs_every, gibbs_hyper, hyper_gibbs, zero_blocks
from .schedules import CosineCycle, Schedule, as_schedule
from .updates import sghmc_noise_scale, sghmc_update


class SGHMCState(NamedTuple):
    position: Tensor
    momentum: Tensor
    noise_var: Tensor  # EMA of the per-coordinate gradient-noise variance V ("online" only)
    iteration: Tensor
    step_size: Tensor


class SGHMCInfo(NamedTuple):
    log_density: Tensor
    step_size: Tensor
    collect: Tensor
    noise_estimate: Tensor  # mean of B over coordinates
    noise_clipped: Tensor  # fraction of coordinates where B >= C


@dataclass(frozen=True)
class SGHMC(FusedAlgorithm):
    """SGHMC hyperparameters.

    Args:
        step_size: ``eps`` (a number or a schedule).
        friction: ``C > B``; larger values damp the momentum faster.
        mass: diagonal mass ``m`` (a number or a tensor over the flat parameters).
        noise_estimate: ``B``: ``0``, a constant ``< friction``, or ``"online"``.
        noise_ema: smoothing of the online variance estimate.
        temperature: ``T``; ``T < 1`` samples a cold posterior.
        resample_momentum_every: draw ``r ~ N(0, m T)`` every this many steps (Chen et al.'s
            outer loop); ``None`` keeps one persistent momentum.
        gibbs_every: every this many steps first draw the conjugate hyperparameters (a learnt
            noise or prior precision) from their Gibbs conditional given the weights and the
            step's minibatch, and set their momentum to 0 (:mod:`bnnkit.sgmcmc.hyper`); ``None``
            moves them with the gradient only.
    """

    step_size: float | Schedule = 1e-3
    friction: float = 10.0
    mass: float | Tensor = 1.0
    noise_estimate: float | str = 0.0
    noise_ema: float = 0.95
    temperature: float = 1.0
    resample_momentum_every: int | None = None
    name: str = "sghmc"
    gibbs_every: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "step_size", as_schedule(self.step_size))
        check_positive(
            "friction", self.friction, "Try 10 (or momentum_decay 0.05-0.1 in learning-rate form)."
        )
        check_positive("mass", self.mass)
        check_temperature(self.temperature)
        if isinstance(self.noise_estimate, str):
            if self.noise_estimate != "online":
                raise BnnkitError(
                    f"noise_estimate must be a number >= 0 or 'online', got {self.noise_estimate!r}."
                )
        else:
            b = float(self.noise_estimate)
            if not math.isfinite(b) or b < 0:
                raise BnnkitError(f"noise_estimate must be >= 0, got {self.noise_estimate!r}.")
            if self.friction - b <= 0:
                raise BnnkitError(
                    f"friction C={self.friction} must exceed the noise estimate B={b}: the injected noise has "
                    "variance 2 eps (C - B). Raise the friction or lower the noise estimate."
                )
        if not 0.0 <= self.noise_ema < 1.0:
            raise BnnkitError(f"noise_ema must lie in [0, 1), got {self.noise_ema!r}.")
        if self.resample_momentum_every is not None:
            check_int_at_least("resample_momentum_every", self.resample_momentum_every, 1)
        check_gibbs_every(self.gibbs_every, self.temperature)

    @classmethod
    def from_learning_rate(
        cls, lr: float, momentum_decay: float = 0.05, beta: float = 0.0, **kwargs
    ) -> SGHMC:
        """Build from Chen et al.'s ``(lr, momentum_decay, beta)``: ``eps = sqrt(lr)``,
        ``C = momentum_decay / eps``, ``B = beta / eps`` (unit mass)."""
        check_positive("lr", lr)
        check_positive("momentum_decay", momentum_decay)
        if not 0 < momentum_decay <= 1:
            raise BnnkitError(f"momentum_decay must lie in (0, 1], got {momentum_decay!r}.")
        eps = math.sqrt(lr)
        return cls(step_size=eps, friction=momentum_decay / eps, noise_estimate=beta / eps, **kwargs)

    @property
    def vectorizable(self) -> bool:
        return self.noise_estimate != "online" and self.gibbs_every is None

    @property
    def not_vectorizable_because(self) -> str:
        if self.noise_estimate == "online":
            return "noise_estimate='online' splits each minibatch into halves, per chain"
        return GIBBS_NOT_VECTORIZABLE

    @property
    def sampling_fraction(self) -> float:
        return self.step_size.sampling_fraction

    def config(self) -> dict:
        mass = self.mass if not isinstance(self.mass, Tensor) else "tensor"
        cfg = {
            **self.step_size.config(),
            "friction": self.friction,
            "mass": mass,
            "noise_estimate": self.noise_estimate,
            "noise_ema": self.noise_ema,
            "temperature": self.temperature,
            "resample_momentum_every": self.resample_momentum_every,
        }
        if self.gibbs_every is not None:
            cfg["gibbs_every"] = self.gibbs_every
        return cfg

    def fused_update(self) -> FusedUpdate:
        why = None
        if self.gibbs_every is not None:
            why = "gibbs_every (Gibbs hyperparameter draws)"
        elif self.noise_estimate == "online":
            why = "noise_estimate='online'"
        elif self.resample_momentum_every is not None:
            why = "resample_momentum_every"
        elif isinstance(self.mass, Tensor):
            why = "a tensor mass"
        if why is not None:
            raise BnnkitError(
                f"the fused loop does not yet run SGHMC with {why}; run it step at a time "
                "(bnnkit.sample without fused=)."
            )
        return FusedUpdate(
            "sghmc",
            float(self.temperature),
            float(self.friction),
            float(self.mass),
            float(self.noise_estimate),
        )

    def build(self, target: Target) -> Kernel:
        schedule, C, temp = self.step_size, float(self.friction), self.temperature
        online = self.noise_estimate == "online"
        b_const = 0.0 if online else float(self.noise_estimate)
        ema, every = self.noise_ema, self.resample_momentum_every
        gibbs = hyper_gibbs(target, self.gibbs_every, type(self).__name__)

        def mass_like(x: Tensor) -> Tensor:
            m = self.mass
            return m.to(x) if isinstance(m, Tensor) else torch.full_like(x, float(m))

        def init(position: Tensor, batch: Batch) -> SGHMCState:
            x = position.detach().clone()
            return SGHMCState(
                x,
                torch.zeros_like(x),
                torch.zeros_like(x) if online else torch.zeros(0, dtype=x.dtype),
                torch.zeros((), dtype=torch.int64),
                torch.tensor(schedule(0), dtype=x.dtype),
            )

        def gradient(x: Tensor, batch: Batch, gen: torch.Generator, var: Tensor, t: int):
            if not online:
                lp, g = target.estimate_grad(x, batch, gen)
                return lp, g, var
            a, b, ma, mb = split_batch(batch)
            if ma == 0:
                raise BnnkitError("noise_estimate='online' needs minibatches of at least 2 rows.")
            lpa, ga = target.estimate_grad(x, a, gen)
            lpb, gb = target.estimate_grad(x, b, gen)
            m = ma + mb
            g = (ma * ga + mb * gb) / m
            lp = (ma * lpa + mb * lpb) / m
            # Var(g) from the two independent half-batch estimates at the same position.
            v_now = (ga - gb).square_().mul_(ma * mb / m**2)
            var = v_now if t == 0 else var * ema + (1 - ema) * v_now
            return lp, g, var

        fast = not isinstance(self.mass, Tensor) and not online
        step_size_tensor = StepSizeTensors(schedule)
        zero = torch.zeros(())
        b_info = torch.tensor(b_const)

        def step(state: SGHMCState, batch: Batch, gen: torch.Generator) -> tuple[SGHMCState, SGHMCInfo]:
            t = int(state.iteration)
            eps = schedule(t)
            noisy = schedule.sampling(t)
            x, r = state.position, state.momentum
            if gibbs is not None and gibbs.due(t):
                x = gibbs_hyper(x, batch, gen, gibbs.blocks)
                r = zero_blocks(r, gibbs.blocks)
            # A scalar mass and a constant B keep every coefficient a Python number: few tensor ops.
            m = float(self.mass) if fast else mass_like(x)
            if every is not None and t % every == 0:
                r = normal(x, gen).mul_(math.sqrt(m * temp)) if fast else normal(x, gen) * (m * temp).sqrt()
            lp, g, var = gradient(x, batch, gen, state.noise_var, t)
            if fast:
                slack, b_mean, clipped = C - b_const, b_info, zero
            else:
                b = 0.5 * eps * var if online else torch.full_like(x, b_const)
                slack, b_mean = C - b, b.mean()
                clipped = (slack <= 0).to(x.dtype).mean()
            xi = normal(x, gen) if noisy else None
            noise_sd = sghmc_noise_scale(eps, temp, slack) if noisy else 0.0
            x_new, r_new = sghmc_update(x, r, g, eps, C, m, noise_sd, xi)
            eps_t = step_size_tensor(eps, x.dtype)
            new = SGHMCState(x_new, r_new, var, state.iteration + 1, eps_t)
            return new, SGHMCInfo(lp, eps_t, COLLECT[noisy], b_mean, clipped)

        return Kernel(init, step)


def CyclicalSGHMC(
    step_size: float, cycle_length: int, exploration: float = 0.8, friction: float = 10.0, **kwargs
) -> SGHMC:
    """cSGHMC (Zhang et al. 2020): SGHMC on a cosine-cycle step size; exploration stage without noise."""
    return SGHMC(CosineCycle(step_size, cycle_length, exploration), friction, name="csghmc", **kwargs)
