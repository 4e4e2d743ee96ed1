"""Metropolis-Hastings with a user proposal.

From ``x`` propose ``x' ~ q(. | x)`` and accept with probability::

    min(1, pi(x') q(x | x') / (pi(x) q(x' | x)))

A proposal object returns ``(x', log q(x | x') - log q(x' | x))`` (zero when symmetric).  This is
the general machinery; :class:`~bnnkit.samplers.rwmh.RandomWalkMH` is the adaptive Gaussian case,
and :class:`DiscreteUniformProposal` makes it work on a finite state space (the position holds the
state index), as in the 3-state chain of ``examples/markov_chain_3state.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import torch
from torch import Tensor

from ..core.errors import check_int_at_least, check_positive
from ..core.target import Target
from ..core.types import Batch, Kernel
from .common import metropolis_accept, normal


class MHProposal(Protocol):
    def propose(self, x: Tensor, gen: torch.Generator) -> tuple[Tensor, Tensor | float]: ...


@dataclass(frozen=True)
class GaussianRandomWalk:
    """Symmetric ``x' = x + scale * z``, ``z ~ N(0, I)``."""

    scale: float = 0.1

    def __post_init__(self) -> None:
        check_positive("random-walk scale", self.scale)

    def propose(self, x: Tensor, gen: torch.Generator) -> tuple[Tensor, float]:
        return x + self.scale * normal(x, gen), 0.0


@dataclass(frozen=True)
class DiscreteUniformProposal:
    """On states ``{0, ..., K-1}`` (a position of size 1): move to one of the other ``K-1`` states
    uniformly at random. Symmetric."""

    num_states: int

    def __post_init__(self) -> None:
        check_int_at_least("num_states", self.num_states, 2)

    def propose(self, x: Tensor, gen: torch.Generator) -> tuple[Tensor, float]:
        shift = 1 + int(torch.randint(self.num_states - 1, (), generator=gen))
        return torch.remainder(x + shift, self.num_states), 0.0


class MHState(NamedTuple):
    position: Tensor
    log_density: Tensor


class MHInfo(NamedTuple):
    log_density: Tensor
    accept_prob: Tensor
    is_accepted: Tensor


@dataclass(frozen=True)
class MetropolisHastings:
    proposal: Any
    name: str = "mh"

    def config(self) -> dict:
        return {"proposal": repr(self.proposal)}

    def build(self, target: Target) -> Kernel:
        proposal: MHProposal = self.proposal

        def init(position: Tensor, batch: Batch) -> MHState:
            with torch.no_grad():
                return MHState(position.detach().clone(), target.log_prob(position, batch))

        def step(state: MHState, batch: Batch, gen: torch.Generator) -> tuple[MHState, MHInfo]:
            with torch.no_grad():
                prop, log_q_ratio = proposal.propose(state.position, gen)
                lp = target.log_prob(prop, batch)
            accept_prob, accepted = metropolis_accept(lp - state.log_density + log_q_ratio, gen)
            new = MHState(prop, lp) if bool(accepted) else state
            return new, MHInfo(new.log_density, accept_prob, accepted)

        return Kernel(init, step, None)
