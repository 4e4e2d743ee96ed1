"""The No-U-Turn Sampler, multinomial variant (Hoffman & Gelman 2014; Betancourt 2017; as in Stan).

One transition draws ``p ~ N(0, M)`` and builds a trajectory by repeated doubling in a random
direction with leapfrog steps of size ``e`` (diagonal inverse metric ``M^-1``)::

    p <- p + (e/2) grad log pi(x);  x <- x + e M^-1 p;  p <- p + (e/2) grad log pi(x)

Every point ``z`` carries the weight ``w(z) = exp(-H(z))``, ``H = -log pi(x) + p^T M^-1 p / 2``.
Within a subtree the proposal is drawn multinomially (the second half replaces the first with
probability ``W_new / (W_old + W_new)``); at the top level the new subtree's proposal replaces the
current sample with probability ``min(1, W_new / W_old)`` (biased progressive sampling).  Doubling
stops at ``max_tree_depth`` or when the generalised no-U-turn criterion fails:
``p#_- . rho <= 0`` or ``p#_+ . rho <= 0`` with ``p# = M^-1 p`` at the two ends and ``rho`` the
sum of momenta, checked over every merged subtree and, as in Stan, also across the boundary of
each merge.  An energy error above ``divergence_threshold`` (or a non-finite one) marks the
transition divergent and stops building; positions stay finite.

The accept statistic for step-size adaptation is the mean over new points of
``min(1, exp(H_0 - H))``.

The leapfrog step (:func:`~bnnkit.samplers.hamiltonian.leapfrog`), the weights, the no-U-turn
criterion and the subtree builder (:func:`~bnnkit.samplers.nuts_tree.build_subtree`) are the ones
the fused NUTS runs (:mod:`~bnnkit.samplers.fused_nuts`); here the builder takes a leapfrog step
when it asks for a point, so a subtree's integration stops at its first divergence or U-turn.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least
from ..core.target import Target
from ..core.types import Batch, Kernel
from .fused_nuts import build_fused_nuts
from .hmc import HMCState, check_hamiltonian_options, warmup_adaptation
from .nuts_tree import NUTSInfo, recursive_builder, transition


@dataclass(frozen=True)
class NUTS:
    step_size: float = 0.1
    max_tree_depth: int = 10
    target_accept: float = 0.8
    adapt_step_size: bool = True
    adapt_mass: bool = True
    divergence_threshold: float = 1000.0
    name: str = "nuts"
    not_vectorizable_because = (
        "each chain doubles its trajectory until its own U-turn, a different length per chain"
    )

    def __post_init__(self) -> None:
        check_hamiltonian_options(self)
        check_int_at_least("max_tree_depth", self.max_tree_depth, 1)

    def config(self) -> dict:
        return asdict(self)

    def build_fused(self, model, block: int, chains: int | None = None, chain_batched: bool = False):
        """This NUTS with each trajectory doubling one compiled call (full batch): what
        ``bnnkit.sample(..., fused=...)`` uses, see :mod:`bnnkit.samplers.fused_nuts`."""
        if chain_batched:
            raise BnnkitError(
                "NUTS runs on the full data set (its trajectories need the exact log density); pass the "
                "data as a tuple of tensors, not minibatches."
            )
        return build_fused_nuts(self, model, block, chains)

    def build(self, target: Target) -> Kernel:
        step0, max_depth, threshold = self.step_size, self.max_tree_depth, self.divergence_threshold

        def init(position: Tensor, batch: Batch) -> HMCState:
            lp, g = target.value_and_grad(position, batch)
            return HMCState(
                position.detach().clone(),
                lp,
                g,
                torch.tensor(step0, dtype=position.dtype),
                torch.ones_like(position),
            )

        def step(state: HMCState, batch: Batch, gen: torch.Generator) -> tuple[HMCState, NUTSInfo]:
            build = recursive_builder(
                target.value_and_grad, batch, state.step_size, state.inv_mass, threshold
            )
            return transition(state, gen, max_depth, build)

        return Kernel(init, step, warmup_adaptation(self))
