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
from typing import NamedTuple

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least, check_positive
from ..core.target import Target
from ..core.types import Batch, Kernel
from .adaptation import window_adaptation
from .common import normal
from .hmc import HMCState


class NUTSInfo(NamedTuple):
    log_density: Tensor
    accept_prob: Tensor
    is_accepted: Tensor
    diverging: Tensor
    energy: Tensor
    step_size: Tensor
    tree_depth: Tensor
    num_steps: Tensor


class _Point(NamedTuple):
    x: Tensor
    p: Tensor
    lp: Tensor
    g: Tensor


class _Subtree(NamedTuple):
    log_w: float
    proposal: _Point
    rho: Tensor
    p_beg: Tensor
    p_end: Tensor
    ps_beg: Tensor
    ps_end: Tensor


def _no_u_turn(ps_minus: Tensor, ps_plus: Tensor, rho: Tensor) -> bool:
    return bool(torch.dot(ps_plus, rho) > 0) and bool(torch.dot(ps_minus, rho) > 0)


def transition(
    state: HMCState, gen: torch.Generator, max_depth: int, make_build: Callable
) -> tuple[HMCState, NUTSInfo]:
    """One NUTS transition: the momentum draw, the doubling loop with its top-level biased
    progressive sampling and U-turn test, and the transition's statistics.  ``make_build(h0,
    stats, uniform)`` returns ``build(z, depth, sign) -> (last point, valid?, subtree)`` for the
    subtrees (recursive in :class:`NUTS`, compiled in :mod:`bnnkit.samplers.fused_nuts`), which
    adds its leapfrog steps to ``stats`` and draws its uniforms from ``uniform``."""
    inv_m = state.inv_mass
    p0 = normal(state.position, gen) / inv_m.sqrt()
    h0 = float(-state.log_density + 0.5 * torch.dot(p0 * inv_m, p0))
    stats = {"n": 0, "metro": 0.0, "diverging": False}

    def uniform() -> float:
        return float(torch.rand((), generator=gen, dtype=torch.float64))

    build = make_build(h0, stats, uniform)
    z0 = _Point(state.position, p0, state.log_density, state.grad)
    z_bck = z_fwd = z0
    ps0 = inv_m * p0
    end_bck = (p0, ps0)  # momentum and p# at the backward end of the whole tree
    end_fwd = (p0, ps0)
    rho = p0
    log_w = 0.0
    sample = z0
    depth = 0
    while depth < max_depth:
        forward = uniform() > 0.5
        if forward:
            z_fwd, ok, sub = build(z_fwd, depth, 1)
        else:
            z_bck, ok, sub = build(z_bck, depth, -1)
        if not ok:
            break
        depth += 1
        if sub.log_w > log_w or uniform() < math.exp(sub.log_w - log_w):
            sample = sub.proposal
        log_w = float(torch.logaddexp(torch.tensor(log_w), torch.tensor(sub.log_w)))
        if forward:  # old tree = backward part, new subtree = forward part
            rho_bck, rho_fwd = rho, sub.rho
            (p_bb, ps_bb), (p_bf, ps_bf) = end_bck, end_fwd
            p_fb, ps_fb, p_ff, ps_ff = sub.p_beg, sub.ps_beg, sub.p_end, sub.ps_end
        else:  # new subtree = backward part (its beg is the inner end)
            rho_bck, rho_fwd = sub.rho, rho
            (p_fb, ps_fb), (p_ff, ps_ff) = end_bck, end_fwd
            p_bf, ps_bf, p_bb, ps_bb = sub.p_beg, sub.ps_beg, sub.p_end, sub.ps_end
        rho = rho_bck + rho_fwd
        end_bck, end_fwd = (p_bb, ps_bb), (p_ff, ps_ff)
        persist = (
            _no_u_turn(ps_bb, ps_ff, rho)
            and _no_u_turn(ps_bb, ps_fb, rho_bck + p_fb)
            and _no_u_turn(ps_bf, ps_ff, rho_fwd + p_bf)
        )
        if not persist:
            break

    n = max(stats["n"], 1)
    new = state._replace(position=sample.x, log_density=sample.lp, grad=sample.g)
    dt = state.position.dtype
    info = NUTSInfo(
        log_density=new.log_density,
        accept_prob=torch.tensor(stats["metro"] / n, dtype=dt),
        is_accepted=torch.tensor(sample is not z0),
        diverging=torch.tensor(stats["diverging"]),
        energy=torch.tensor(float(-sample.lp + 0.5 * torch.dot(sample.p * inv_m, sample.p)), dtype=dt),
        step_size=state.step_size,
        tree_depth=torch.tensor(depth),
        num_steps=torch.tensor(stats["n"]),
    )
    return new, info


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
        from .fused_nuts import build_fused_nuts

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
                def leaf(z: _Point, sign: int) -> tuple[_Point, bool, _Subtree | None]:
                    p = z.p + (0.5 * sign) * eps * z.g
                    x = z.x + (sign * eps) * inv_m * p
                    lp, g = target.value_and_grad(x, batch)
                    p = p + (0.5 * sign) * eps * g
                    znew = _Point(x, p, lp, g)
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
                    return znew, True, _Subtree(delta, znew, p, p, p, ps, ps)

                def build(z: _Point, depth: int, sign: int) -> tuple[_Point, bool, _Subtree | None]:
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
                        _no_u_turn(init_t.ps_beg, final.ps_end, rho)
                        and _no_u_turn(init_t.ps_beg, final.ps_beg, init_t.rho + final.p_beg)
                        and _no_u_turn(init_t.ps_end, final.ps_end, final.rho + init_t.p_end)
                    )
                    prop = final.proposal if take_final else init_t.proposal
                    return (
                        z,
                        ok,
                        _Subtree(log_w, prop, rho, init_t.p_beg, final.p_end, init_t.ps_beg, final.ps_end),
                    )

                return build

            return transition(state, gen, max_depth, make_build)

        adapt = None
        if self.adapt_step_size or self.adapt_mass:
            adapt = window_adaptation(
                self.target_accept, adapt_metric=self.adapt_mass, adapt_step=self.adapt_step_size
            )
        return Kernel(init, step, adapt)
