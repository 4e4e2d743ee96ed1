"""Hamiltonian Monte Carlo with leapfrog integration and a Metropolis correction.

With inverse mass (diagonal) ``M^-1``, momentum ``p ~ N(0, M)`` and potential
``U(x) = -log pi(x)``, one transition runs ``L`` leapfrog steps of size ``e``::

    p <- p + (e/2) grad log pi(x)
    x <- x + e M^-1 p                      (L times, with full momentum steps in between)
    p <- p + (e/2) grad log pi(x)

and accepts ``(x', p')`` with probability ``min(1, exp(H(x, p) - H(x', p')))``, where
``H(x, p) = U(x) + p^T M^-1 p / 2``.  An energy error above ``divergence_threshold`` (or a
non-finite one) marks the transition divergent: it is rejected and recorded, never a crash.
With ``jitter = j > 0`` each transition uses ``e * U(1 - j, 1 + j)``: a fixed trajectory length can
resonate with the target's scales (nearly periodic, antithetic chains whose second moments mix
badly); randomising the step size breaks this (Neal 2011, section 5.4.2.2).
Step size and diagonal metric are tuned in warm-up by
:func:`~bnnkit.samplers.adaptation.window_adaptation`.  The trajectory is
:func:`~bnnkit.samplers.hamiltonian.hmc_proposal`, the same code the fused HMC compiles
(:mod:`~bnnkit.samplers.fused_hmc`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least, check_positive
from ..core.target import Target
from ..core.types import Adaptation, Batch, Kernel
from .adaptation import window_adaptation
from .common import metropolis_accept, normal
from .fused_hmc import build_fused_hmc
from .hamiltonian import hmc_proposal


class HMCState(NamedTuple):
    position: Tensor
    log_density: Tensor
    grad: Tensor
    step_size: Tensor
    inv_mass: Tensor


class HMCInfo(NamedTuple):
    log_density: Tensor
    accept_prob: Tensor
    is_accepted: Tensor
    diverging: Tensor
    energy: Tensor
    step_size: Tensor
    num_steps: Tensor


def check_hamiltonian_options(alg: Any) -> None:
    """The options HMC and NUTS share: a positive initial step size, ``target_accept`` in (0, 1)."""
    check_positive("step_size", alg.step_size, "Try 0.01 and let warm-up adapt it.")
    if not 0 < alg.target_accept < 1:
        raise ValueError(f"target_accept must lie in (0, 1), got {alg.target_accept!r}.")


def warmup_adaptation(alg: Any) -> Adaptation | None:
    """HMC's or NUTS's warm-up: step size and diagonal metric, as ``alg`` asks (None: neither)."""
    if not (alg.adapt_step_size or alg.adapt_mass):
        return None
    return window_adaptation(alg.target_accept, adapt_metric=alg.adapt_mass, adapt_step=alg.adapt_step_size)


def _all_nonfinite(log_density: Tensor) -> bool:
    """Whether every chain's density has become non-finite: the eager trajectory stops there (a
    NaN gradient shows up as a NaN density one step later), rejected and marked divergent."""
    return not bool(torch.isfinite(log_density).any())


def _where(accepted: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """Per-chain choice between stacked tensors ``[K, ...]`` (or shared ones, returned as is)."""
    if a is b:
        return a
    mask = accepted.reshape(accepted.shape + (1,) * (a.ndim - accepted.ndim))
    return torch.where(mask, a, b)


@dataclass(frozen=True)
class HMC:
    """HMC hyperparameters. ``step_size`` and ``inv_mass`` are initial values when adapted."""

    step_size: float = 0.1
    num_steps: int = 10
    target_accept: float = 0.8
    adapt_step_size: bool = True
    adapt_mass: bool = True
    divergence_threshold: float = 1000.0
    jitter: float = 0.2
    name: str = "hmc"
    vectorizable = True  # a fixed number of leapfrog steps: the same work for every chain

    def __post_init__(self) -> None:
        check_hamiltonian_options(self)
        check_int_at_least("num_steps", self.num_steps, 1)
        if not 0 <= self.jitter < 1:
            raise ValueError(f"jitter must lie in [0, 1), got {self.jitter!r}.")

    def config(self) -> dict:
        return asdict(self)

    def build_fused(self, model, block: int, chains: int | None = None, chain_batched: bool = False):
        """This HMC run ``block`` transitions per compiled call (full batch; warm-up step at a
        time): what ``bnnkit.sample(..., fused=...)`` uses, see :mod:`bnnkit.samplers.fused_hmc`."""
        if chain_batched:
            raise BnnkitError(
                "fused HMC runs on the full data set (its Metropolis test needs the exact log density); "
                "pass the data as a tuple of tensors, not minibatches."
            )
        return build_fused_hmc(self, model, block, chains)

    def build(self, target: Target) -> Kernel:
        step_size0, n_steps, threshold = self.step_size, self.num_steps, self.divergence_threshold
        jitter = self.jitter

        def init(position: Tensor, batch: Batch) -> HMCState:
            lp, g = target.value_and_grad(position, batch)
            return HMCState(
                position=position.detach().clone(),
                log_density=lp,
                grad=g,
                step_size=torch.full(position.shape[:-1], step_size0, dtype=position.dtype),
                inv_mass=torch.ones_like(position),
            )

        def step(state: HMCState, batch: Batch, gen: torch.Generator) -> tuple[HMCState, HMCInfo]:
            x0, lp0, g0, eps, inv_m = state
            xi = normal(x0, gen)
            # A random step size per transition breaks periodic (non-ergodic) orbits.
            u = torch.rand(eps.shape, generator=gen, dtype=eps.dtype) if jitter > 0 else None
            prop = hmc_proposal(
                target.value_and_grad,
                batch,
                x0,
                lp0,
                g0,
                xi,
                u,
                eps,
                inv_m,
                n_steps,
                jitter,
                threshold,
                _all_nonfinite,
            )
            accept_prob, accepted = metropolis_accept(-prop.delta, gen)
            proposal = HMCState(prop.position, prop.log_density, prop.grad, eps, inv_m)
            if accepted.ndim:  # stacked chains: accept or reject each one
                new = HMCState(*(_where(accepted, a, b) for a, b in zip(proposal, state)))
            elif bool(accepted):
                new = proposal
            else:
                new = state
            info = HMCInfo(
                log_density=new.log_density,
                accept_prob=accept_prob,
                is_accepted=accepted,
                diverging=prop.diverging,
                energy=torch.where(accepted, prop.energy, prop.energy0),
                step_size=eps,
                num_steps=torch.tensor(prop.num_steps),
            )
            return new, info

        return Kernel(init, step, warmup_adaptation(self))
