"""Unadjusted Langevin algorithm (ULA): full-batch Langevin dynamics without a Metropolis step.

::

    x_{t+1} = x_t + (eps / 2) grad log pi(x_t) + sqrt(eps) * xi_t,    xi_t ~ N(0, I)

Its stationary distribution differs from ``pi`` by O(eps); SGLD is this chain with the gradient
replaced by a minibatch estimate, and with a full batch the two coincide step for step.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from ..core.errors import check_positive
from ..core.target import Target
from ..core.types import Batch, Kernel
from ..sgmcmc.updates import sgld_update
from .common import normal


class ULAState(NamedTuple):
    position: Tensor
    step_size: Tensor


class ULAInfo(NamedTuple):
    log_density: Tensor
    step_size: Tensor


@dataclass(frozen=True)
class ULA:
    step_size: float = 1e-3
    name: str = "ula"

    def __post_init__(self) -> None:
        check_positive("step_size", self.step_size)

    def config(self) -> dict:
        return asdict(self)

    def build(self, target: Target) -> Kernel:
        eps = self.step_size

        def init(position: Tensor, batch: Batch) -> ULAState:
            return ULAState(position.detach().clone(), torch.tensor(eps, dtype=position.dtype))

        def step(state: ULAState, batch: Batch, gen: torch.Generator) -> tuple[ULAState, ULAInfo]:
            lp, g = target.value_and_grad(state.position, batch)
            # SGLD's update at temperature 1 on the full-batch gradient (one rule, one place)
            x = sgld_update(state.position, g, eps, math.sqrt(eps), normal(state.position, gen))
            return ULAState(x, state.step_size), ULAInfo(lp, state.step_size)

        return Kernel(init, step)
