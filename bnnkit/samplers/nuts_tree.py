"""The NUTS trajectory shared by the recursive sampler (:class:`~bnnkit.samplers.NUTS`) and the
one with compiled subtrees (:mod:`bnnkit.samplers.fused_nuts`): its points, spans and subtrees,
the no-U-turn criterion (:func:`merge_spans`), the points' log weights, the subtree builder
(:func:`build_subtree`) and one transition's doubling loop (:func:`transition`).  The two
samplers differ only in how a subtree's points and merges are computed: one leapfrog step and one
merge at a time when the builder asks (:func:`recursive_builder`), or the whole subtree in one
compiled call and its merges level by level, vectorised.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import Tensor

from .common import normal
from .hamiltonian import hamiltonian, leapfrog, row_dot
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


class Span(NamedTuple):
    """A stretch of trajectory in the order it was built: its summed momentum ``rho`` and, at its
    first and last point, the momentum ``p`` and ``p# = M^-1 p``.  Fields may be stacked ``[m, D]``
    (the compiled subtree merges ``m`` pairs at once)."""

    rho: Tensor
    p_beg: Tensor
    p_end: Tensor
    ps_beg: Tensor
    ps_end: Tensor


class Subtree(NamedTuple):
    log_w: float  # log of the summed weights exp(H_0 - H) of its points
    proposal: Any  # the point drawn from it (a Point, or the builder's handle for one)
    span: Any  # its Span (or None where the builder keeps the spans itself)


def no_u_turn(ps_minus: Tensor, ps_plus: Tensor, rho: Tensor, dot: Callable = row_dot) -> Any:
    """The generalised no-U-turn criterion ``p#_- . rho > 0`` and ``p#_+ . rho > 0``: a bool
    tensor, or a bool with ``dot=`` :func:`scalar_dot`."""
    return (dot(ps_plus, rho) > 0) & (dot(ps_minus, rho) > 0)


def scalar_dot(a: Tensor, b: Tensor) -> float:
    """``torch.dot`` of two 1-D tensors as a float: the recursive sampler's U-turn tests compare
    floats, cheaper than comparing and combining 0-d tensors before one host sync."""
    return float(torch.dot(a, b))


def merge_spans(first: Span, second: Span, dot: Callable = row_dot) -> tuple[Span, Any]:
    """``first`` followed by ``second``, and whether the merged stretch is free of U-turns: the
    criterion (:func:`no_u_turn`) over the merged ends with ``rho = rho_1 + rho_2``, and, as in
    Stan, across the boundary: over ``first`` extended by the first point of ``second`` and over
    ``second`` extended by the last point of ``first``."""
    rho = first.rho + second.rho
    ok = (
        no_u_turn(first.ps_beg, second.ps_end, rho, dot)
        & no_u_turn(first.ps_beg, second.ps_beg, first.rho + second.p_beg, dot)
        & no_u_turn(first.ps_end, second.ps_end, second.rho + first.p_end, dot)
    )
    return Span(rho, first.p_beg, second.p_end, first.ps_beg, second.ps_end), ok


def reversed_span(s: Span) -> Span:
    """A backward subtree's span in trajectory order (its first-built point is its inner end)."""
    return Span(s.rho, s.p_end, s.p_beg, s.ps_end, s.ps_beg)


def log_weight(h0: float, h: float) -> float:
    """A point's log weight ``H_0 - H``, a NaN energy counted as ``+inf`` (weight 0, divergent)."""
    return h0 - (math.inf if math.isnan(h) else h)


def log_weight_sum(a: float | Tensor, b: float | Tensor) -> Tensor:
    """``log(e^a + e^b)`` of two log weights (floats, or float64 tensors merged elementwise), in
    torch's default dtype (float32 unless changed): the recursive sampler always formed it from
    ``torch.tensor(float)``, and its draws are pinned bit for bit.  The weights only set the
    proposal's odds."""
    dt = torch.get_default_dtype()
    return torch.logaddexp(torch.as_tensor(a, dtype=dt), torch.as_tensor(b, dtype=dt))


def accept_stat(delta: float) -> float:
    """A point's contribution ``min(1, exp(H_0 - H))`` to the accept statistic."""
    return 1.0 if delta > 0 else math.exp(delta)


def build_subtree(
    depth: int,
    leaf: Callable[[int], tuple[float, Any, Any]],
    merge: Callable[[Subtree, Subtree, int, int], tuple[float, Any, bool]],
    uniform: Callable[[], float],
    threshold: float,
    stats: dict,
) -> tuple[Any, Subtree | None]:
    """NUTS's subtree of ``2^depth`` leapfrog steps, built recursively in post-order (the tree
    builder of both samplers; they differ in where a point or a merge is computed).

    ``leaf(i) -> (H_0 - H_i, handle, span)`` is the ``i``-th new point (asked in order); ``merge(
    first, second, d, start) -> (log_w, span, free of U-turns?)`` merges two sibling subtrees of
    depth ``d - 1`` into the one of depth ``d`` whose first leaf is ``start``.  The recursive
    :class:`~bnnkit.samplers.NUTS` computes both when asked (a leapfrog step, a
    :func:`merge_spans`); :mod:`~bnnkit.samplers.fused_nuts` integrates the whole subtree in one
    compiled call and merges level by level, vectorised, before the walk, and its callbacks look
    the results up.  Each leaf adds to ``stats`` (``n``, ``metro``: :func:`accept_stat`); a leaf
    with ``H - H_0 > threshold`` is divergent.  Each merge reached draws one ``uniform()`` and
    takes ``second``'s proposal with probability ``W_2 / (W_1 + W_2)`` (multinomial sampling).

    Returns ``(the last leaf's handle, the subtree)``; the subtree is None when a leaf diverged
    or a merge U-turned, which ends the walk (and the trajectory) there.
    """
    last = None

    def build(d: int, start: int) -> Subtree | None:
        nonlocal last
        if d == 0:
            delta, last, span = leaf(start)
            stats["n"] += 1
            stats["metro"] += accept_stat(delta)
            if -delta > threshold:
                stats["diverging"] = True
                return None
            return Subtree(delta, last, span)
        first = build(d - 1, start)
        if first is None:
            return None
        second = build(d - 1, start + (1 << (d - 1)))
        if second is None:
            return None
        log_w, span, ok = merge(first, second, d, start)
        take_second = math.log(uniform() + 1e-300) < second.log_w - log_w
        if not ok:
            return None
        return Subtree(log_w, second.proposal if take_second else first.proposal, span)

    sub = build(depth, 0)
    return last, sub


def recursive_builder(
    value_and_grad: Callable, batch: Any, eps: Tensor, inv_m: Tensor, threshold: float
) -> Callable:
    """The ``make_build`` of :class:`~bnnkit.samplers.NUTS` for :func:`transition`: its
    :func:`build_subtree` takes one leapfrog step when it asks for a point and merges two spans
    when it asks for a merge, so the integration stops at the first divergence or U-turn.  One
    point's energy and the U-turn tests reduce with ``torch.dot`` (1-D momenta)."""

    def make_build(h0: float, stats: dict, uniform: Callable[[], float]) -> Callable:
        def build(z: Point, depth: int, sign: int) -> tuple[Point, Subtree | None]:
            step = sign * eps

            def leaf(i: int) -> tuple[float, Point, Span]:
                nonlocal z  # each point is one leapfrog step on from the last
                x, p, g, lp, _ = leapfrog(value_and_grad, z.x, z.p, z.g, step, inv_m, batch)
                z = Point(x, p, lp, g)
                ps = inv_m * p
                return log_weight(h0, float(hamiltonian(lp, p, inv_m, torch.dot))), z, Span(p, p, p, ps, ps)

            def merge(first: Subtree, second: Subtree, d: int, start: int) -> tuple[float, Span, bool]:
                span, ok = merge_spans(first.span, second.span, scalar_dot)
                return float(log_weight_sum(first.log_w, second.log_w)), span, ok

            return build_subtree(depth, leaf, merge, uniform, threshold, stats)

        return build

    return make_build


def transition(
    state: HMCState, gen: torch.Generator, max_depth: int, make_build: Callable
) -> tuple[HMCState, NUTSInfo]:
    """One NUTS transition: the momentum draw, the doubling loop with its top-level biased
    progressive sampling and U-turn test, and the transition's statistics.  ``make_build(h0,
    stats, uniform)`` returns ``build(z, depth, sign) -> (last point, subtree or None)``: each
    sampler's :func:`build_subtree`, which adds its leapfrog steps to ``stats`` and draws its
    uniforms from ``uniform``.

    The random numbers come from ``gen`` in one fixed order: the momentum's normals, then per
    doubling the direction's uniform, the subtree's merges' uniforms (post-order), and the
    top-level acceptance's uniform (drawn only when the new subtree weighs less than the tree).
    Energies and U-turn tests reduce with ``torch.dot`` (the momentum is 1-D here)."""
    inv_m = state.inv_mass
    p0 = normal(state.position, gen) / inv_m.sqrt()
    h0 = float(hamiltonian(state.log_density, p0, inv_m, torch.dot))
    stats = {"n": 0, "metro": 0.0, "diverging": False}

    def uniform() -> float:
        return float(torch.rand((), generator=gen, dtype=torch.float64))

    build = make_build(h0, stats, uniform)
    z0 = Point(state.position, p0, state.log_density, state.grad)
    z_bck = z_fwd = z0
    ps0 = inv_m * p0
    tree = Span(p0, p0, p0, ps0, ps0)
    log_w = 0.0
    sample = z0
    depth = 0
    while depth < max_depth:
        forward = uniform() > 0.5
        if forward:
            z_fwd, sub = build(z_fwd, depth, 1)
        else:
            z_bck, sub = build(z_bck, depth, -1)
        if sub is None:
            break
        depth += 1
        if sub.log_w > log_w or uniform() < math.exp(sub.log_w - log_w):
            sample = sub.proposal
        log_w = float(log_weight_sum(log_w, sub.log_w))
        if forward:  # the tree, then the new subtree
            tree, ok = merge_spans(tree, sub.span, scalar_dot)
        else:  # the new subtree (built backwards), then the tree
            tree, ok = merge_spans(reversed_span(sub.span), tree, scalar_dot)
        if not ok:
            break

    n = max(stats["n"], 1)
    new = state._replace(position=sample.x, log_density=sample.lp, grad=sample.g)
    dt = state.position.dtype
    info = NUTSInfo(
        log_density=new.log_density,
        accept_prob=torch.tensor(stats["metro"] / n, dtype=dt),
        is_accepted=torch.tensor(sample is not z0),
        diverging=torch.tensor(stats["diverging"]),
        energy=torch.tensor(float(hamiltonian(sample.lp, sample.p, inv_m, torch.dot)), dtype=dt),
        step_size=state.step_size,
        tree_depth=torch.tensor(depth),
        num_steps=torch.tensor(stats["n"]),
    )
    return new, info
