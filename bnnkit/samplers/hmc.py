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
:func:`~bnnkit.samplers.adaptation.window_adaptation`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least, check_positive
from ..core.target import Target
from ..core.types import Batch, Kernel
from .adaptation import window_adaptation
from .common import metropolis_accept, normal
from .fused_hmc import build_fused_hmc


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


def leapfrog(
    target: Target, x: Tensor, p: Tensor, g: Tensor, step: Tensor, inv_mass: Tensor, n: int, batch: Batch
):
    """``n`` leapfrog steps; stops early (returning ``lp = nan``) if the density becomes non-finite.

    ``x, p, g`` may be stacked chains ``[K, D]`` with ``step`` ``[K, 1]``; the trajectory then
    stops early only when every chain has become non-finite (the others are rejected later).
    """
    p = p + 0.5 * step * g
    lp = torch.tensor(math.nan)
    for i in range(n):
        x = x + step * inv_mass * p
        lp, g = target.value_and_grad(x, batch)
        finite = torch.isfinite(lp)
        if not bool(finite.any()):  # a NaN gradient shows up as a NaN density one step later
            return x, p, g, torch.full_like(lp, math.nan), i + 1
        if lp.ndim:
            lp = torch.where(finite, lp, math.nan)
        p = p + (step if i < n - 1 else 0.5 * step) * g
    return x, p, g, lp, n


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
        check_positive("step_size", self.step_size, "Try 0.01 and let warm-up adapt it.")
        check_int_at_least("num_steps", self.num_steps, 1)
        if not 0 < self.target_accept < 1:
            raise ValueError(f"target_accept must lie in (0, 1), got {self.target_accept!r}.")
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
            p0 = normal(x0, gen) / inv_m.sqrt()
            if jitter > 0:  # a random step size per transition breaks periodic (non-ergodic) orbits
                u = torch.rand(eps.shape, generator=gen, dtype=eps.dtype)
                eps = eps * (1 + jitter * (2 * u - 1))
            h0 = -lp0 + 0.5 * (p0 * inv_m * p0).sum(-1)
            x1, p1, g1, lp1, n = leapfrog(target, x0, p0, g0, eps.unsqueeze(-1), inv_m, n_steps, batch)
            h1 = -lp1 + 0.5 * (p1 * inv_m * p1).sum(-1)
            delta = h1 - h0
            diverging = ~torch.isfinite(delta) | (delta > threshold)
            accept_prob, accepted = metropolis_accept(-delta, gen)
            proposal = HMCState(x1, lp1, g1, state.step_size, inv_m)
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
                diverging=diverging,
                energy=torch.where(accepted, h1, h0),
                step_size=state.step_size,
                num_steps=torch.tensor(n),
            )
            return new, info

        adapt = None
        if self.adapt_step_size or self.adapt_mass:
            adapt = window_adaptation(
                self.target_accept, adapt_metric=self.adapt_mass, adapt_step=self.adapt_step_size
            )
        return Kernel(init, step, adapt)
