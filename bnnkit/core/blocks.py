"""Fused blocks in the driver: ``bnnkit.sample(..., fused=...)`` runs a chain ``T`` steps per call.

The algorithm builds the block kernel (``algorithm.build_fused(model, block)``; SGLD and SGHMC
have one, :mod:`bnnkit.sgmcmc.fused`, as do HMC, :mod:`bnnkit.samplers.fused_hmc`, and NUTS,
:mod:`bnnkit.samplers.fused_nuts`), so
``bnnkit.core`` needs no import of the algorithms.  A kernel with an ``adaptation`` (HMC) warms up
step at a time through its ``step``, the adaptation state checkpointed as the step-at-a-time
driver does, and samples in blocks with the adapted settings frozen.  Its
protocol, as the driver uses it:

- ``init(position, batch) -> state``, the algorithm's own;
- ``run_block(state, batches, generator, num_steps, keep) -> out``: ``num_steps`` steps drawing
  every minibatch and normal from ``generator`` in the step-at-a-time order; ``out.state`` is the
  state after the block, ``out.positions`` the positions after the steps listed in ``keep``
  (indices within the block), ``out.num_finite`` the leading steps whose position and log density
  are finite, ``out.first_bad`` (position, log density, step size) at the first one that is not;
- ``collects(start, num_steps) -> list[bool]``: whether each step keeps a draw (False in a
  cyclical schedule's exploration stage);
- ``kept_stats(out, n) -> dict``: the first ``n`` kept draws' stats, named as the step-at-a-time
  path names them;
- ``loop``: ``"unroll"`` is refused (a compiled loop per block length).

Vectorised chains (``chain_method="vectorized"``) are one unit whose state holds positions
``[K, D]``; the kernel is built with ``chains=K`` and a block's kept positions are ``[n, K, D]``.

Where blocks are cut.  A block never crosses the end of warm-up, a warm-up checkpoint (every
``chunk_size`` steps) or the step that completes a chunk of ``chunk_size`` kept draws (or the
last draw), whether or not the run streams to disk.  So every checkpoint lies between two blocks,
and a run resumed from one cuts the rest of the chain into the same blocks as an uninterrupted
run: the same compiled calls on the same inputs, hence the same draws bit for bit.

Block length: ``fused=T`` allows at most ``T`` steps per call; ``fused=True`` allows
``min(64, 2**24 // D)`` for ``D`` numbers per position (``K * D`` for ``K`` vectorised chains; a
block holds its ``[T, D]`` positions and normals: at most 64 MiB each in float32).  Each block is
as long as allowed or ends at the next cut.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch
from torch import Tensor

from .errors import BnnkitError
from .loop_parts import (
    MAX_CONSECUTIVE_DIVERGENCES,
    NOTHING_ACCEPTED,
    StuckWatch,
    _adapt_step,
    _divergence,
    _finish_unit,
    _finite,
    _progress_bar,
    _save_checkpoint,
    _Settings,
    _split_chunk,
    _start_unit,
    _stuck_after,
    _unit_label,
)
from .posterior import Posterior

AUTO_BLOCK = 128  # steps per call with fused=True: amortises the ~300 us per-call cost (docs/scaling.md)
AUTO_BLOCK_ELEMENTS = 1 << 24  # and at most this many numbers in a block's [T, D] positions


def fused_block(fused: Any, algorithm: Any, compile: bool, dim: int) -> int:
    """The steps per block that ``fused=`` asks for (0: step at a time), after checking that the
    run can be fused; a :class:`BnnkitError` names what cannot."""
    if fused is None or fused is False:
        return 0
    if fused is not True and (not isinstance(fused, int) or fused < 1):
        raise BnnkitError(
            f"fused must be True (automatic block size), False, or a number of steps per block >= 1, got "
            f"{fused!r}."
        )
    if not hasattr(algorithm, "build_fused"):
        raise BnnkitError(
            f"fused= runs SGLD, SGHMC (incl. their cyclical variants), pSGLD, adaptive SGHMC, HMC and NUTS; "
            f"{type(algorithm).__name__} has no "
            "fused path. Drop fused= to run it step at a time."
        )
    if compile:
        raise BnnkitError("fused= compiles the whole block (gradient and update) itself; drop compile=True.")
    if fused is True:
        return max(1, min(AUTO_BLOCK, AUTO_BLOCK_ELEMENTS // max(dim, 1)))
    return int(fused)


def build_block_kernel(
    algorithm: Any, posterior: Any, target: Any, block: int, chains: int | None, chain_batched: bool
) -> Any:
    """The algorithm's own block kernel, built against the posterior (whose network it can write
    as a side-effect-free function of the flat weights) or, for a log density, the one-chain
    target; ``chains=K``: a vectorised group, positions ``[K, D]``, each chain with its own
    minibatches (``chain_batched``) or all with the same full batch."""
    model = posterior if isinstance(posterior, Posterior) else target
    if chains is None:
        kernel = algorithm.build_fused(model, block)
    else:
        kernel = algorithm.build_fused(model, block, chains=chains, chain_batched=chain_batched)
    if getattr(kernel, "loop", None) == "unroll":
        raise BnnkitError(
            "fused= compiles the block as one scan over its steps, which needs a plain bnnkit.Posterior (no "
            "learnt noise or prior scale, not data-parallel) whose network has no buffers (e.g. batch-norm "
            "statistics) and no dropout in training mode, or a log density; for this posterior each block "
            "length would compile an unrolled loop of its own. Use compile=True, or "
            "bnnkit.sgmcmc.Fused(..., loop='unroll') with a short fixed block."
        )
    return kernel


def _plan(kernel, it, block, thin, n_collectable, n_pending, chunk_size, remaining):
    """A sampling block from step ``it``: its length, the steps it keeps, the collectable count
    after it.  It ends at ``block`` steps or where a chunk (or the run) completes."""
    keep: list[int] = []
    for j, collect in enumerate(kernel.collects(it, block)):
        if collect:
            n_collectable += 1
            if n_collectable % thin == 0:
                keep.append(j)
                if n_pending + len(keep) == chunk_size or len(keep) == remaining:
                    return j + 1, keep, n_collectable
    return block, keep, n_collectable


def run_unit_blocks(
    kernel, target, posterior, batches, fresh_batches, unit: list[int], cfg: _Settings, store
) -> dict[int, tuple[Tensor, dict[str, Tensor]]]:
    """:func:`bnnkit.core.driver._run_unit`, ``cfg.block`` steps per call: one chain, or
    (``cfg.vectorized``) the chains of ``unit`` as one stacked state."""
    num_warmup, num_samples, thin, chunk_size = cfg.num_warmup, cfg.num_samples, cfg.thin, cfg.chunk_size
    block, home, vectorized = cfg.block, unit[0], cfg.vectorized
    s = _start_unit(kernel, target, posterior, batches, fresh_batches, unit, cfg, store)
    gen, state, astate, start, total, stop = s.gen, s.state, s.astate, s.start, s.total, s.stop
    num_chunks, n_collectable, n_kept = s.num_chunks, s.n_collectable, s.n_kept
    # An adapted sampler (HMC) warms up step at a time (its adaptation reads every transition's
    # statistics in Python), then samples in blocks with the adapted settings frozen.
    adapt = getattr(kernel, "adaptation", None) if num_warmup > 0 else None
    stuck = 0  # consecutive transitions in which every chain diverged
    watch = StuckWatch(unit if vectorized else [home])  # read from the kept draws' statistics

    pending: list[tuple[Tensor, dict[str, Tensor]]] = []  # kept since the last chunk
    n_pending = 0
    kept_in_memory: list[tuple[Tensor, dict[str, Tensor]]] = []
    bar = _progress_bar(total, _unit_label(unit, vectorized), cfg.num_chains, start) if cfg.progress else None

    def chunk() -> tuple[Tensor, dict[str, Tensor]]:
        stats = {k: torch.cat([p[1][k] for p in pending]) for k in pending[0][1]}
        return torch.cat([p[0] for p in pending]), stats

    def write(positions_stats: tuple[Tensor, dict[str, Tensor]]) -> None:
        for c, part in zip(unit, _split_chunk(positions_stats, vectorized, len(unit))):
            store.write_chunk(c, num_chunks, *part)

    def divergence(x, lp, eps, at, n_ok=0, stuck=0):
        return _divergence(
            SimpleNamespace(position=x, step_size=eps),
            SimpleNamespace(log_density=lp),
            unit,
            vectorized,
            at,
            num_warmup,
            n_kept + n_ok,
            store,
            kept_in_memory,
            stuck,
        )

    try:
        it = start
        while n_kept < num_samples and stop is None:
            if it < num_warmup and adapt is not None:
                state, info = kernel.step(state, batches.next(gen), gen)
                if not _finite(state, info):
                    raise divergence(state.position, info.log_density, state.step_size, it)
                stuck = _stuck_after(stuck, info)
                if stuck >= MAX_CONSECUTIVE_DIVERGENCES:
                    raise divergence(state.position, info.log_density, state.step_size, it, stuck=stuck)
                astate, state = _adapt_step(adapt, astate, state, info, it, num_warmup)
                if store is not None and ((it + 1) % chunk_size == 0 or it + 1 == num_warmup):
                    _save_checkpoint(
                        store, home, state, astate, gen, batches, it + 1, num_chunks, n_collectable, n_kept
                    )
                if bar is not None:
                    bar.update(1)
                it += 1
                continue
            if it < num_warmup:
                t, keep, nc = min(block, num_warmup - it, chunk_size - it % chunk_size), [], n_collectable
            else:
                t, keep, nc = _plan(
                    kernel, it, block, thin, n_collectable, n_pending, chunk_size, num_samples - n_kept
                )
            out = kernel.run_block(state, batches, gen, t, keep)
            if out.num_finite < t:  # keep the finite draws before the first non-finite step, then stop
                n_ok = sum(1 for j in keep if j < out.num_finite)
                if n_ok:
                    pending.append((out.positions[:n_ok], kernel.kept_stats(out, n_ok)))
                if pending:
                    if store is None:
                        kept_in_memory.append(chunk())
                    else:
                        write(chunk())
                x, lp, eps = out.first_bad
                raise divergence(x, lp, eps, it + out.num_finite, n_ok)
            all_div = getattr(out, "all_diverging", None)
            if all_div is not None:  # a chain whose every transition diverges this long is stuck
                for j, d in enumerate(all_div.tolist()):
                    stuck = stuck + 1 if d else 0
                    if stuck >= MAX_CONSECUTIVE_DIVERGENCES:
                        raise divergence(
                            out.state.position, out.state.log_density, state.step_size, it + j, 0, stuck
                        )
            state, n_collectable = out.state, nc
            if keep:
                kept_stats = kernel.kept_stats(out)
                pending.append((out.positions, kept_stats))
                ap = kept_stats.get("accept_prob")
                if isinstance(ap, Tensor) and ap.numel():
                    nothing = ~(ap > NOTHING_ACCEPTED)
                    acc = kept_stats.get("is_accepted")
                    if isinstance(acc, Tensor) and acc.shape == ap.shape:
                        nothing = nothing & ~acc.bool()
                    watch.add(nothing.reshape(ap.shape[0], -1), state.step_size)
                n_pending += len(keep)
                n_kept += len(keep)
            if n_pending == chunk_size or (n_kept == num_samples and pending):
                positions, stats = chunk()
                pending, n_pending = [], 0
                if store is not None:
                    write((positions, stats))
                    num_chunks += 1
                    _save_checkpoint(
                        store, home, state, astate, gen, batches, it + t, num_chunks, n_collectable, n_kept
                    )
                else:
                    kept_in_memory.append((positions, stats))
                if cfg.stop_when is not None:
                    stop = cfg.stop_when.update(positions.transpose(0, 1) if vectorized else positions[None])
            elif (
                store is not None and it < num_warmup and ((it + t) % chunk_size == 0 or it + t == num_warmup)
            ):
                _save_checkpoint(
                    store, home, state, astate, gen, batches, it + t, num_chunks, n_collectable, n_kept
                )
            if bar is not None:
                bar.update(max(0, min(it + t, total) - min(it, total)))
                phase = "warmup" if it < num_warmup else "sampling"
                bar.set_postfix(
                    {"phase": phase, "step": f"{float(state.step_size.mean()):.3g}"}, refresh=False
                )
            it += t
    finally:
        if bar is not None:
            bar.close()
    watch.finish(state.step_size)
    return _finish_unit(state, unit, cfg, store, stop, n_kept, kept_in_memory)
