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

Blocks are cut so that a resumed run makes the same compiled calls as an uninterrupted one
(:func:`run_unit_blocks`); their length is :func:`fused_block`'s.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch
from torch import Tensor

from .errors import BnnkitError
from .loop_parts import MAX_CONSECUTIVE_DIVERGENCES, NOTHING_ACCEPTED, UnitRun, _adapt_step, _Settings
from .posterior import Posterior

AUTO_BLOCK = 128  # steps per call with fused=True: amortises the ~300 us per-call cost (docs/scaling.md)
AUTO_BLOCK_ELEMENTS = 1 << 24  # and at most this many numbers in a block's [T, D] positions


def fused_block(fused: Any, algorithm: Any, compile: bool, dim: int) -> int:
    """The steps per block that ``fused=`` asks for (0: step at a time), after checking that the
    run can be fused; a :class:`BnnkitError` names what cannot.

    ``fused=T`` allows at most ``T`` steps per call; ``fused=True`` allows ``min(AUTO_BLOCK,
    AUTO_BLOCK_ELEMENTS // dim)`` for ``dim`` numbers per position (``K * D`` for ``K`` vectorised
    chains: a block holds its ``[T, D]`` positions and normals).  Each block is as long as allowed
    or ends at the next cut (:func:`run_unit_blocks`).
    """
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
            "length would compile an unrolled loop of its own. Use compile=True (the gradient compiled, "
            "steps in Python) or run step at a time."
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


class _Pending:
    """The draws kept since the last chunk, as the blocks returned them."""

    def __init__(self) -> None:
        self.parts: list[tuple[Tensor, dict[str, Tensor]]] = []
        self.n = 0

    def add(self, positions: Tensor, stats: dict[str, Tensor], n: int) -> None:
        self.parts.append((positions, stats))
        self.n += n

    def take(self) -> tuple[Tensor, dict[str, Tensor]] | None:
        """The pending draws as one chunk (None: none), and none pending after."""
        if not self.parts:
            return None
        parts = self.parts
        stats = {k: torch.cat([p[1][k] for p in parts]) for k in parts[0][1]}
        self.parts, self.n = [], 0
        return torch.cat([p[0] for p in parts]), stats


def run_unit_blocks(
    kernel, target, posterior, batches, fresh_batches, unit: list[int], cfg: _Settings, store
) -> dict[int, tuple[Tensor, dict[str, Tensor]]]:
    """:func:`bnnkit.core.driver._run_unit`, ``cfg.block`` steps per call: one chain, or
    (``cfg.vectorized``) the chains of ``unit`` as one stacked state.

    Where blocks are cut: a block never crosses the end of warm-up, a warm-up checkpoint (every
    ``chunk_size`` steps) or the step that completes a chunk of ``chunk_size`` kept draws (or the
    last draw), whether or not the run streams to disk.  So every checkpoint lies between two
    blocks, and a run resumed from one cuts the rest of the chain into the same blocks as an
    uninterrupted run: the same compiled calls on the same inputs, hence the same draws bit for bit.
    """
    # An adapted sampler (HMC) warms up step at a time (its adaptation reads every transition's
    # statistics in Python), then samples in blocks with the adapted settings frozen.
    adapt = getattr(kernel, "adaptation", None) if cfg.num_warmup > 0 else None
    pending = _Pending()
    with UnitRun(kernel, target, posterior, batches, fresh_batches, unit, cfg, store) as run:
        it = run.start
        while run.running:
            if it < cfg.num_warmup and adapt is not None:
                _warmup_step(run, kernel, adapt, it)
                it += 1
            else:
                it += _block(run, kernel, it, pending)
    return run.finish()


def _warmup_step(run: UnitRun, kernel: Any, adapt: Any, it: int) -> None:
    """One adapted warm-up step, checkpointed every ``chunk_size`` steps and at the last."""
    cfg = run.cfg
    run.state, info = kernel.step(run.state, run.batches.next(run.gen), run.gen)
    run.check_step(info, it)
    run.astate, run.state = _adapt_step(adapt, run.astate, run.state, info, it, cfg.num_warmup)
    if run.store is not None and ((it + 1) % cfg.chunk_size == 0 or it + 1 == cfg.num_warmup):
        run.checkpoint(it + 1)
    if run.bar is not None:
        run.bar.update(1)


def _block(run: UnitRun, kernel: Any, it: int, pending: _Pending) -> int:
    """One block from step ``it`` (cut as the module doc says); returns its length."""
    cfg = run.cfg
    if it < cfg.num_warmup:
        t, keep, nc = (
            min(cfg.block, cfg.num_warmup - it, cfg.chunk_size - it % cfg.chunk_size),
            [],
            run.n_collectable,
        )
    else:
        remaining = cfg.num_samples - run.n_kept
        t, keep, nc = _plan(
            kernel, it, cfg.block, cfg.thin, run.n_collectable, pending.n, cfg.chunk_size, remaining
        )
    out = kernel.run_block(run.state, run.batches, run.gen, t, keep)
    _check_block(run, kernel, out, it, t, keep, pending)
    run.state, run.n_collectable = out.state, nc
    if keep:
        kept_stats = kernel.kept_stats(out)
        pending.add(out.positions, kept_stats, len(keep))
        ap = kept_stats.get("accept_prob")
        if isinstance(ap, Tensor) and ap.numel():
            nothing = ~(ap > NOTHING_ACCEPTED)
            acc = kept_stats.get("is_accepted")
            if isinstance(acc, Tensor) and acc.shape == ap.shape:
                nothing = nothing & ~acc.bool()
            run.watch.add(nothing.reshape(ap.shape[0], -1), run.state.step_size)
        run.n_kept += len(keep)
    if pending.n == cfg.chunk_size or (run.n_kept == cfg.num_samples and pending.parts):
        run.chunk_done(pending.take(), it + t)
    elif (
        run.store is not None
        and it < cfg.num_warmup
        and ((it + t) % cfg.chunk_size == 0 or it + t == cfg.num_warmup)
    ):
        run.checkpoint(it + t)
    if run.bar is not None:
        run.bar.update(max(0, min(it + t, run.total) - min(it, run.total)))
        phase = "warmup" if it < cfg.num_warmup else "sampling"
        run.bar.set_postfix(
            {"phase": phase, "step": f"{float(run.state.step_size.mean()):.3g}"}, refresh=False
        )
    return t


def _check_block(
    run: UnitRun, kernel: Any, out: Any, it: int, t: int, keep: list[int], pending: _Pending
) -> None:
    """Stop at a block's first non-finite step, keeping the finite draws before it, or where its
    transitions end ``MAX_CONSECUTIVE_DIVERGENCES`` in a row in which every chain diverged."""
    if out.num_finite < t:
        n_ok = sum(1 for j in keep if j < out.num_finite)
        if n_ok:
            pending.add(out.positions[:n_ok], kernel.kept_stats(out, n_ok), n_ok)
        chunk = pending.take()
        if chunk is not None:
            run.write(chunk)
        x, lp, eps = out.first_bad
        raise run.divergence(_at(x, eps), SimpleNamespace(log_density=lp), it + out.num_finite, n_ok=n_ok)
    all_div = getattr(out, "all_diverging", None)
    if all_div is None:
        return
    for j, d in enumerate(all_div.tolist()):
        run.stuck = run.stuck + 1 if d else 0
        if run.stuck >= MAX_CONSECUTIVE_DIVERGENCES:
            info = SimpleNamespace(log_density=out.state.log_density)
            raise run.divergence(_at(out.state.position, run.state.step_size), info, it + j, run.stuck)


def _at(position: Tensor, step_size: Any) -> SimpleNamespace:
    return SimpleNamespace(position=position, step_size=step_size)
