"""NUTS with compiled subtrees: one compiled call per trajectory doubling, not per leapfrog step.

The step-at-a-time :class:`~bnnkit.samplers.NUTS` builds each subtree with
:func:`~bnnkit.samplers.nuts_tree.build_subtree`, which asks for one leapfrog step per point: per
step a gradient call, a few tensor operations and host syncs for the energy and the U-turn tests.
Here a doubling of depth ``d`` runs its ``2^d`` leapfrog steps (the same
:func:`~bnnkit.samplers.hamiltonian.leapfrog`) as one ``torch.compile``-d ``scan``
(:func:`bnnkit.core.pure.compile_scan`; one graph serves every depth) that returns every leaf's
position, momentum, log density and gradient; the subtree's bookkeeping then runs on those
tensors level by level (``d`` vectorised merges, not ``2^d - 1`` merges with host syncs):

- every leaf's log weight ``H_0 - H_i`` (:func:`~bnnkit.samplers.nuts_tree.log_weight`,
  ``H_i = -log pi(x_i) + p_i^T M^-1 p_i / 2``);
- per level ``k``: every merge's span (:func:`~bnnkit.samplers.nuts_tree.merge_spans`: the
  summed momentum ``rho = rho_left + rho_right`` in the recursive order of summation and the
  three no-U-turn tests, over the merged ends and across the boundary, as in Stan) and its log
  weight ``logaddexp(w_left, w_right)``;
- then the same builder, :func:`~bnnkit.samplers.nuts_tree.build_subtree`, walks the subtree in
  post-order on those results: it stops at the first divergent leaf or U-turning merge, adds the
  accept statistic of the leaves reached, draws one uniform per merge reached and picks the
  proposals (the right half with probability ``W_right / (W_left + W_right)``).

The trajectory's top level (direction, biased progressive sampling between the old tree and the
new subtree, the U-turn test of the whole tree) is the step-at-a-time sampler's
(:func:`~bnnkit.samplers.nuts_tree.transition`).  So the same random numbers are drawn in the same
order and the chain equals the step-at-a-time chain to float rounding (the compiled gradient, and
the row-wise sums that replace ``torch.dot`` in the vectorised energies and U-turn tests, round
differently; a rounding difference can flip a decision only at an exact tie).  What differs is wasted work: a subtree is integrated to its
end even when it U-turns or diverges early (its result is discarded either way); ``num_steps``
counts the leapfrog steps the recursive sampler would have taken, ``compiled_steps`` those run.

Memory: a depth-``d`` doubling holds ``[2^d, D]`` positions, momenta and gradients (depth 10 and
``D = 3,401``: 42 MiB in float32).

``NUTS(...).build_fused(posterior, block)`` builds it; ``bnnkit.sample(NUTS(...), posterior, data,
fused=True)`` runs it (warm-up included: the adaptation reads each transition as usual).  The
posterior must be a plain MLP :class:`~bnnkit.Posterior` or a :class:`~bnnkit.core.target.Target`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import torch
from torch import Tensor

from ..core.errors import BnnkitError
from ..core.loop_parts import _finite, _stack_chunk
from ..core.pure import call_scan, compile_scan, transition_log_prob
from .hamiltonian import hamiltonian, leapfrog, pure_value_and_grad
from .hmc import HMCState
from .nuts_tree import (
    NUTSInfo,
    Point,
    Span,
    Subtree,
    build_subtree,
    log_weight,
    log_weight_sum,
    merge_spans,
    transition,
)

DEFAULT_LOOP = "scan"  # tests switch it to "eager" (the same subtree code, uncompiled)


class NUTSBlockOutput(NamedTuple):
    state: HMCState
    positions: Tensor
    stats: dict[str, Tensor]
    num_steps: int
    num_finite: int
    first_bad: tuple[Tensor, Tensor, Tensor] | None = None
    all_diverging: Tensor | None = None


class FusedNUTSKernel:
    """:class:`~bnnkit.samplers.NUTS` with compiled subtrees; the driver-facing protocol of
    :mod:`bnnkit.core.blocks` (``init``, ``step``, ``adaptation``, ``run_block``, ``kept_stats``,
    ``collects``, ``loop``).  ``step`` is the compiled-subtree transition, so warm-up uses it too."""

    def __init__(self, nuts: Any, model: Any, loop: str = "scan", cpp_wrapper: bool = True):
        target, log_prob, self.loop = transition_log_prob(model, "NUTS", loop)
        self.nuts = nuts
        self.chains = None
        reference = nuts.build(target)
        self.init, self.adaptation = reference.init, reference.adaptation
        self.compiled_steps = 0  # leapfrog steps run (>= the recursive sampler's num_steps)
        value_and_grad = pure_value_and_grad(log_prob)

        def leaf(carry, xs, batch, step, inv_m):
            """One leapfrog step; the scan stacks every step's point."""
            x, p, g = carry
            x, p, g, lp, _ = leapfrog(value_and_grad, x, p, g, step, inv_m, batch)
            return (x, p, g), (x.clone(), p.clone(), lp, g.clone())

        self._leaf = leaf
        self._block, self._code = (None, None)
        if self.loop == "scan":
            self._block, self._code = compile_scan(leaf, cpp_wrapper)

    # ------------------------------------------------------------------ one doubling
    def _integrate(self, z: Point, n: int, step: Tensor, inv_m: Tensor, batch) -> tuple[Tensor, ...]:
        """The ``n`` points of ``n`` leapfrog steps of size ``step`` from ``z``: ``xs, ps, lps,
        gs`` stacked ``[n, ...]``."""
        consts = (batch, step, inv_m)
        self.compiled_steps += n
        if self.loop == "scan":
            empty = (torch.zeros(n, dtype=z.x.dtype),)
            return call_scan(self._block, self._code, (z.x, z.p, z.g), empty, consts)[1]
        rows, carry = [], (z.x, z.p, z.g)
        for _ in range(n):
            carry, y = self._leaf(carry, None, *consts)
            rows.append(y)
        return tuple(torch.stack(c) for c in zip(*rows))

    def _subtree(
        self, z: Point, depth: int, sign: int, state: HMCState, batch, h0: float, uniform, stats: dict
    ) -> tuple[Point, Subtree | None]:
        """The recursive sampler's subtree from one compiled call: the same
        :func:`~bnnkit.samplers.nuts_tree.build_subtree`, its points and merges computed ahead."""
        inv_m = state.inv_mass
        n = 1 << depth
        xs, ps, lps, gs = self._integrate(z, n, sign * state.step_size, inv_m, batch)
        delta = [log_weight(h0, h) for h in hamiltonian(lps, ps, inv_m).tolist()]
        psharp = inv_m * ps
        # Every merge at once, level by level: level d merges the pairs of level d - 1's subtrees.
        # The walk below then reads floats, with no host sync per merge.
        spans, log_w, ok = [Span(ps, ps, ps, psharp, psharp)], [delta], [[]]
        w = torch.tensor(delta, dtype=torch.float64)
        for _ in range(depth):
            first, second = (Span(*(t[i::2] for t in spans[-1])) for i in (0, 1))
            span, free = merge_spans(first, second)
            w = log_weight_sum(w[0::2], w[1::2])
            spans.append(span)
            log_w.append(w.tolist())
            ok.append(free.tolist())
        last, sub = build_subtree(
            depth,
            lambda i: (log_w[0][i], i, None),
            lambda first, second, d, start: (log_w[d][start >> d], None, ok[d][start >> d]),
            uniform,
            self.nuts.divergence_threshold,
            stats,
        )
        end = Point(xs[last], ps[last], lps[last], gs[last])
        if sub is None:
            return end, None
        i = sub.proposal
        return end, Subtree(sub.log_w, Point(xs[i], ps[i], lps[i], gs[i]), Span(*(t[0] for t in spans[-1])))

    # ------------------------------------------------------------------ one transition
    def step(self, state: HMCState, batch: Any, gen: torch.Generator) -> tuple[HMCState, NUTSInfo]:
        """One NUTS transition: :func:`bnnkit.samplers.nuts_tree.transition` with compiled subtrees."""

        def make_build(h0: float, stats: dict, uniform) -> Any:
            return lambda z, depth, sign: self._subtree(z, depth, sign, state, batch, h0, uniform, stats)

        return transition(state, gen, self.nuts.max_tree_depth, make_build)

    # ------------------------------------------------------------------ the block protocol
    def collects(self, start: int, num_steps: int) -> list[bool]:
        return [True] * num_steps

    def run_block(
        self, state: HMCState, batches: Any, gen: torch.Generator, num_steps: int, keep: Sequence[int] = ()
    ) -> NUTSBlockOutput:
        """``num_steps`` transitions (each a few compiled calls); ``keep``: the transitions whose
        positions and stats to return."""
        keep_set = set(keep)
        pos, infos, divs = [], [], []
        for j in range(num_steps):
            batch = batches.next(gen) if hasattr(batches, "next") else batches
            state, info = self.step(state, batch, gen)
            divs.append(bool(info.diverging))
            if not _finite(state, info):
                bad = (state.position, info.log_density, state.step_size)
                return NUTSBlockOutput(state, *_kept(pos, infos), num_steps, j, bad, torch.tensor(divs))
            if j in keep_set:
                pos.append(state.position.clone())
                infos.append(info)
        return NUTSBlockOutput(state, *_kept(pos, infos), num_steps, num_steps, None, torch.tensor(divs))

    def kept_stats(self, out: NUTSBlockOutput, n: int | None = None) -> dict[str, Tensor]:
        n = len(out.positions) if n is None else n
        return {k: v[:n] for k, v in out.stats.items()}


def _kept(pos: list[Tensor], infos: list[NUTSInfo]) -> tuple[Tensor, dict[str, Tensor]]:
    """The kept transitions' positions and stats, stacked as the step-at-a-time driver stacks
    them (:func:`bnnkit.core.loop_parts._stack_chunk`)."""
    return _stack_chunk(pos, infos, None) if pos else (torch.empty(0), {})


def build_fused_nuts(
    nuts: Any, model: Any, block: int, chains: int | None = None, **_: Any
) -> FusedNUTSKernel:
    if chains is not None:
        raise BnnkitError(
            "NUTS chains build trajectories of different lengths, so they do not run vectorised; use "
            "chain_method='sequential'."
        )
    return FusedNUTSKernel(nuts, model, loop=DEFAULT_LOOP)
