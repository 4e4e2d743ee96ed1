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
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least, check_positive
from ..core.target import Target
from ..core.types import Batch, Kernel
from .adaptation import window_adaptation
from .fused_nuts import build_fused_nuts
from .hmc import HMCState
from .nuts_tree import NUTSInfo, Point, Subtree, no_u_turn, transition


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
        check_positive("step_size", self.step_size, "Try 0.01 and let warm-up adapt it.")
        check_int_at_least("max_tree_depth", self.max_tree_depth, 1)
        if not 0 < self.target_accept < 1:
            raise ValueError(f"target_accept must lie in (0, 1), got {self.target_accept!r}.")

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
            eps, inv_m = state.step_size, state.inv_mass

            def make_build(h0: float, stats: dict, uniform: Callable[[], float]) -> Callable:
                def leaf(z: Point, sign: int) -> tuple[Point, bool, Subtree | None]:
                    p = z.p + (0.5 * sign) * eps * z.g
                    x = z.x + (sign * eps) * inv_m * p
                    lp, g = target.value_and_grad(x, batch)
                    p = p + (0.5 * sign) * eps * g
                    znew = Point(x, p, lp, g)
                    stats["n"] += 1
                    h = float(-lp + 0.5 * torch.dot(p * inv_m, p))
                    if math.isnan(h):
                        h = math.inf
                    delta = h0 - h
                    stats["metro"] += 1.0 if delta > 0 else math.exp(delta)
                    if -delta > threshold:
                        stats["diverging"] = True
                        return znew, False, None
                    ps = inv_m * p
                    return znew, True, Subtree(delta, znew, p, p, p, ps, ps)

                def build(z: Point, depth: int, sign: int) -> tuple[Point, bool, Subtree | None]:
                    if depth == 0:
                        return leaf(z, sign)
                    z, ok, init_t = build(z, depth - 1, sign)
                    if not ok:
                        return z, False, None
                    z, ok, final = build(z, depth - 1, sign)
                    if not ok:
                        return z, False, None
                    log_w = float(torch.logaddexp(torch.tensor(init_t.log_w), torch.tensor(final.log_w)))
                    take_final = math.log(uniform() + 1e-300) < final.log_w - log_w
                    rho = init_t.rho + final.rho
                    ok = (
                        no_u_turn(init_t.ps_beg, final.ps_end, rho)
                        and no_u_turn(init_t.ps_beg, final.ps_beg, init_t.rho + final.p_beg)
                        and no_u_turn(init_t.ps_end, final.ps_end, final.rho + init_t.p_end)
                    )
                    prop = final.proposal if take_final else init_t.proposal
                    return (
                        z,
                        ok,
                        Subtree(log_w, prop, rho, init_t.p_beg, final.p_end, init_t.ps_beg, final.ps_end),
                    )

                return build

            return transition(state, gen, max_depth, make_build)

        adapt = None
        if self.adapt_step_size or self.adapt_mass:
            adapt = window_adaptation(
                self.target_accept, adapt_metric=self.adapt_mass, adapt_step=self.adapt_step_size
            )
        return Kernel(init, step, adapt)
