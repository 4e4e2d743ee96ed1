"""NUTS with compiled subtrees: one compiled call per trajectory doubling, not per leapfrog step.

The step-at-a-time :class:`~bnnkit.samplers.NUTS` builds each subtree recursively from Python:
per leapfrog step a gradient call, a few tensor operations and a host sync for the energy.  Here
a doubling of depth ``d`` runs its ``2^d`` leapfrog steps as one ``torch.compile``-d ``scan``
(:func:`bnnkit.core.pure.compile_scan`; one graph serves every depth) that returns every leaf's
position, momentum, log density and gradient; the subtree's bookkeeping then runs on those
tensors level by level (``d`` vectorised merges, not ``2^d - 1`` recursive calls):

- leaf energies ``H_i = -log pi(x_i) + p_i^T M^-1 p_i / 2``, log weights ``H_0 - H_i``, the
  divergence test of each leaf and the accept statistic;
- per level ``k``: every merge's summed momentum ``rho = rho_left + rho_right`` (the recursive
  order of summation), its three no-U-turn tests (the merged ends, and across the boundary, as in
  Stan) and its log weight ``logaddexp(w_left, w_right)``;
- the recursion stops at the first failing leaf (divergent) or merge (U-turn) in post-order.  The
  recursive sampler draws one uniform per merge it reaches, in post-order, to pick the subtree's
  proposal (the right half with probability ``W_right / (W_left + W_right)``); here the merges
  reached are counted from the first failure, exactly that many uniforms are drawn from the
  generator, and they decide the merges in the same order.

The trajectory's top level (direction, biased progressive sampling between the old tree and the
new subtree, the U-turn test of the whole tree) is the step-at-a-time sampler's, unchanged.  So
the same random numbers are drawn in the same order and the chain equals the step-at-a-time
chain to float rounding (the compiled gradient rounds differently; a rounding difference can flip
a decision only at an exact tie).  What differs is wasted work: a subtree is integrated to its
end even when it U-turns or diverges early (its result is discarded either way); ``num_steps``
counts the leapfrog steps the recursive sampler would have taken, ``compiled_steps`` those run.

Memory: a depth-``d`` doubling holds ``[2^d, D]`` positions, momenta and gradients (depth 10 and
``D = 3,401``: 42 MiB in float32).

``NUTS(...).build_fused(posterior, block)`` builds it; ``bnnkit.sample(NUTS(...), posterior, data,
fused=True)`` runs it (warm-up included: the adaptation reads each transition as usual).  The
posterior must be a plain MLP :class:`~bnnkit.Posterior` or a :class:`~bnnkit.core.target.Target`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import torch
from torch import Tensor

from ..core.errors import BnnkitError
from ..core.loop_parts import _finite, _stack_chunk
from ..core.pure import call_scan, compile_scan, transition_log_prob
from .hmc import HMCState
from .nuts_tree import NUTSInfo, Point, Subtree, transition

DEFAULT_LOOP = "scan"  # tests switch it to "eager" (the same subtree code, uncompiled)


class NUTSBlockOutput(NamedTuple):
    state: HMCState
    positions: Tensor
    stats: dict[str, Tensor]
    num_steps: int
    num_finite: int
    first_bad: tuple[Tensor, Tensor, Tensor] | None = None
    all_diverging: Tensor | None = None


def _dots(a: Tensor, b: Tensor) -> Tensor:
    """Row-wise dot products (summed in another order than ``torch.dot``: a test decided by a
    rounding difference would have to be an exact tie)."""
    return (a * b).sum(-1)


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
        gv = torch.func.grad_and_value(log_prob)

        def leapfrog(carry, xs, batch, half, full, inv_m):
            x, p, g = carry
            p = p + half * g
            x = x + full * inv_m * p
            g, lp = gv(x, batch)
            p = p + half * g
            return (x, p, g), (x.clone(), p.clone(), lp, g.clone())

        self._leapfrog = leapfrog
        self._block, self._code = (None, None)
        if self.loop == "scan":
            self._block, self._code = compile_scan(leapfrog, cpp_wrapper)

    # ------------------------------------------------------------------ one doubling
    def _integrate(self, x, p, g, n: int, sign: int, eps: Tensor, inv_m: Tensor, batch):
        half, full = (0.5 * sign) * eps, sign * eps
        consts = (batch, half, full, inv_m)
        self.compiled_steps += n
        if self.loop == "scan":
            _, ys = call_scan(self._block, self._code, (x, p, g), (torch.zeros(n, dtype=x.dtype),), consts)
            return ys
        rows, carry = [], (x, p, g)
        for _ in range(n):
            carry, y = self._leapfrog(carry, None, *consts)
            rows.append(y)
        return tuple(torch.stack(c) for c in zip(*rows))

    def _subtree(self, z: Point, depth: int, sign: int, state: HMCState, batch, h0: float, gen, acc: dict):
        """The recursive ``build(z, depth, sign)`` of :class:`~bnnkit.samplers.NUTS`, one compiled
        call: returns the last point reached, whether the subtree is valid, and the subtree (or
        None)."""
        eps, inv_m = state.step_size, state.inv_mass
        n = 1 << depth
        xs, ps, lps, gs = self._integrate(z.x, z.p, z.g, n, sign, eps, inv_m, batch)
        h = (-lps + 0.5 * _dots(ps * inv_m, ps)).double()
        h = torch.nan_to_num(h, nan=math.inf)
        delta = h0 - h  # float64, as the recursive sampler's Python floats
        leaf_fail = (-delta > self.nuts.divergence_threshold).tolist()
        psharp = inv_m * ps
        # Merges level by level: children's rho, ends and log weights, and the U-turn tests.
        logw_lvl = [delta]
        rho_lvl = [ps]
        fail_lvl: list[list[bool]] = [leaf_fail]
        for k in range(1, depth + 1):
            rho_c, w_c, size = rho_lvl[-1], logw_lvl[-1], 1 << (k - 1)
            left, right = slice(0, None, 2), slice(1, None, 2)
            rho = rho_c[left] + rho_c[right]
            beg_l = torch.arange(0, n, 2 * size)  # first leaf of each left child
            end_l, beg_r, end_r = beg_l + size - 1, beg_l + size, beg_l + 2 * size - 1
            ok = (
                (_dots(psharp[end_r], rho) > 0)
                & (_dots(psharp[beg_l], rho) > 0)
                & (_dots(psharp[beg_r], rho_c[left] + ps[beg_r]) > 0)
                & (_dots(psharp[beg_l], rho_c[left] + ps[beg_r]) > 0)
                & (_dots(psharp[end_r], rho_c[right] + ps[end_l]) > 0)
                & (_dots(psharp[end_l], rho_c[right] + ps[end_l]) > 0)
            )
            # log weights as the recursive sampler forms them: float32 logaddexp of the halves
            logw_lvl.append(torch.logaddexp(w_c[left].float(), w_c[right].float()).double())
            rho_lvl.append(rho)
            fail_lvl.append((~ok).tolist())
        # Post-order: leaf i, then the merges that end at leaf i (lower levels first).
        n_leaves, n_merges, failed = n, 0, False
        for i in range(n):
            if leaf_fail[i]:
                n_leaves, failed = i + 1, True
                break
            k, stop = 1, False
            while k <= depth and (i + 1) % (1 << k) == 0:
                n_merges += 1
                if fail_lvl[k][(i + 1) // (1 << k) - 1]:
                    n_leaves, failed, stop = i + 1, True, True
                    break
                k += 1
            if stop:
                break
        d_run = delta[:n_leaves]
        acc["n"] += n_leaves
        acc["metro"] += float(torch.where(d_run > 0, torch.ones_like(d_run), d_run.exp()).sum())
        if n_leaves and leaf_fail[n_leaves - 1] and failed:
            acc["diverging"] = True
        last = Point(xs[n_leaves - 1], ps[n_leaves - 1], lps[n_leaves - 1], gs[n_leaves - 1])
        u = torch.rand(n_merges, generator=gen, dtype=torch.float64) if n_merges else None
        if failed:
            return last, False, None
        # Proposals, merge by merge in post-order (the uniforms' order).
        prop = [list(range(n))]
        for k in range(1, depth + 1):
            prop.append([0] * (n >> k))
        j_u = 0
        for i in range(n):
            k = 1
            while k <= depth and (i + 1) % (1 << k) == 0:
                j = (i + 1) // (1 << k) - 1
                w_final, w = float(logw_lvl[k - 1][2 * j + 1]), float(logw_lvl[k][j])
                take_final = math.log(float(u[j_u]) + 1e-300) < w_final - w
                j_u += 1
                prop[k][j] = prop[k - 1][2 * j + 1] if take_final else prop[k - 1][2 * j]
                k += 1
        i = prop[depth][0]
        sub = Subtree(
            float(logw_lvl[depth][0]),
            Point(xs[i], ps[i], lps[i], gs[i]),
            rho_lvl[depth][0],
            ps[0],
            ps[n - 1],
            psharp[0],
            psharp[n - 1],
        )
        return last, True, sub

    # ------------------------------------------------------------------ one transition
    def step(self, state: HMCState, batch: Any, gen: torch.Generator) -> tuple[HMCState, NUTSInfo]:
        """One NUTS transition: :func:`bnnkit.samplers.nuts_tree.transition` with compiled subtrees."""

        def make_build(h0: float, stats: dict, uniform) -> Any:
            del uniform  # the subtree draws its merges' uniforms at once, from the same generator
            return lambda z, depth, sign: self._subtree(z, depth, sign, state, batch, h0, gen, stats)

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
