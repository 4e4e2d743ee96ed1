"""The NUTS trajectory shared by the recursive sampler (:class:`~bnnkit.samplers.NUTS`) and the
one with compiled subtrees (:mod:`bnnkit.samplers.fused_nuts`): its points and subtrees, the
no-U-turn test, and one transition's doubling loop (:func:`transition`), which each sampler runs
with its own subtree builder.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor

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


class Point(NamedTuple):
    x: Tensor
    p: Tensor
    lp: Tensor
    g: Tensor


class Subtree(NamedTuple):
    log_w: float
    proposal: Point
    rho: Tensor
    p_beg: Tensor
    p_end: Tensor
    ps_beg: Tensor
    ps_end: Tensor


def no_u_turn(ps_minus: Tensor, ps_plus: Tensor, rho: Tensor) -> bool:
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
    z0 = Point(state.position, p0, state.log_density, state.grad)
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
            no_u_turn(ps_bb, ps_ff, rho)
            and no_u_turn(ps_bb, ps_fb, rho_bck + p_fb)
            and no_u_turn(ps_bf, ps_ff, rho_fwd + p_bf)
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
