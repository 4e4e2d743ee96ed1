"""The parts of a chain's run that both loops use: the step-at-a-time one
(:func:`bnnkit.core.driver._run_unit`) and the fused-block one
(:func:`bnnkit.core.blocks.run_unit_blocks`).

How a unit (one chain, or a vectorised group) starts afresh or from its checkpoint, saves a
checkpoint and finishes; the run-wide settings; divergence and stuck-chain reports; stacking and
splitting chunks of kept draws; the progress bar.
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from .errors import BnnkitError, DivergenceError, StuckChainWarning
from .posterior import Posterior
from .random import make_generator
from .target import Target
from .types import Batch

MAX_CONSECUTIVE_DIVERGENCES = 200  # a chain whose every transition diverges this long is stuck
VECTOR_SEED_OFFSET = 1 << 32  # seeds of vectorised groups never collide with a chain's own seed
STUCK_WINDOW = 100  # sampling transitions in a row that accept nothing: the chain is reported stuck
STUCK_MIN_TRANSITIONS = 20  # a shorter run that accepted nothing at all is reported at its end
NOTHING_ACCEPTED = 1e-10  # an acceptance probability this small is a rejection, whatever the coin says

InitSpec = str | Mapping[str, Tensor] | Callable[[int, torch.Generator], Mapping[str, Tensor]] | None


class FullBatch:
    """Every step sees the whole data set (classic samplers)."""

    def __init__(self, data: Batch):
        self.data = data

    def next(self, gen: torch.Generator) -> Batch:
        return self.data

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


def _say(message: str) -> None:
    """One line to stderr, through tqdm so that progress bars stay intact."""
    try:
        from tqdm.auto import tqdm

        tqdm.write(message, file=sys.stderr)
    except Exception:  # no tqdm, or a closed stream
        print(message, file=sys.stderr)


def _initial_position(
    target: Target, posterior: Any, init: InitSpec, chain: int, gen: torch.Generator
) -> Tensor:
    if isinstance(init, str):
        if isinstance(posterior, Posterior):
            return posterior.initial_position(init, gen)
        if init == "prior" and target.prior_sample is not None:
            return target.prior_sample(gen)
        raise BnnkitError(f"init={init!r} needs a Posterior; pass a dict of initial parameters.")
    if isinstance(init, Mapping):
        return target.view.ravel(init).detach().clone()
    if callable(init):
        return target.view.ravel(init(chain, gen)).detach().clone()
    raise BnnkitError(f"unsupported init {init!r}.")


@dataclass(frozen=True)
class _Settings:
    """The run-wide settings every chain (or vectorised group of chains) is run with."""

    vectorized: bool
    init: InitSpec
    seed: int
    num_warmup: int
    num_samples: int
    thin: int
    progress: bool
    chunk_size: int
    num_chains: int
    sampling_fraction: float
    validate: bool = True
    stop_when: Any = None
    block: int = 0  # steps per fused block (bnnkit.core.blocks); 0: step at a time
    report: dict = field(default_factory=dict)  # what the run has to say at its end (why it stopped)


@dataclass
class _Start:
    """Where a unit starts: afresh, or from its newest checkpoint."""

    gen: torch.Generator
    state: Any
    astate: Any
    start: int
    num_chunks: int
    n_collectable: int
    n_kept: int
    stop: str | None  # a run killed right after its rule said stop does not run on
    total: int  # steps the progress bar expects


def _start_unit(kernel, target, posterior, batches, fresh_batches, unit, cfg: _Settings, store) -> _Start:
    """The unit's generator, state and counters: from its checkpoint, or drawn afresh."""
    vectorized, seed, init, num_warmup = cfg.vectorized, cfg.seed, cfg.init, cfg.num_warmup
    # Cyclical SG-MCMC keeps draws only in its sampling stages: estimate the steps needed.
    # Steps before the first kept draw: warm-up, or an optimisation algorithm's fit (VI).
    pre = max(num_warmup, getattr(kernel, "fit_steps", 0))
    total = pre + math.ceil(cfg.num_samples * cfg.thin / cfg.sampling_fraction)
    home = unit[0]  # the checkpoint of a vectorised group lives with its first chain
    # A vectorised group draws its noise from one generator of its own; its initial positions
    # still come from each chain's generator, so they equal the sequential run's.
    device = target.view.device  # CUDA parameters need a CUDA generator for their noise
    gen = make_generator(seed, VECTOR_SEED_OFFSET + home if vectorized else home, device)
    ckpt = store.load_checkpoint(home, unit) if store is not None else None
    adapt = getattr(kernel, "adaptation", None) if num_warmup > 0 else None
    stop: str | None = None
    if ckpt is not None:
        state = ckpt["state_type"](**ckpt["state"])
        astate = ckpt["adapt_type"](**ckpt["adapt"]) if ckpt["adapt"] is not None else None
        gen.set_state(ckpt["generator"])
        batches.load_state_dict(ckpt["batches"])
        start, num_chunks = ckpt["iteration"], ckpt["num_chunks"]
        n_collectable, n_kept = ckpt["n_collectable"], ckpt["n_kept"]
        where = (
            f"in warm-up at step {start} of {pre}"
            if start < pre
            else f"at draw {n_kept} of {cfg.num_samples}"
        )
        who = f"chains {unit[0]}-{unit[-1]}" if len(unit) > 1 else f"chain {home}"
        _say(f"bnnkit: resuming {who} of {store.root} {where} (from its checkpoint at step {start}).")
        if cfg.stop_when is not None:
            cfg.stop_when.reset()
            if num_chunks:  # the rule sees every draw kept before the interruption again
                stored = [torch.cat(list(store.iter_positions(c))) for c in unit]
                stop = cfg.stop_when.update(torch.stack(stored))
    else:
        batches.load_state_dict(fresh_batches)
        if vectorized:
            x0 = torch.stack(
                [_initial_position(target, posterior, init, c, make_generator(seed, c, device)) for c in unit]
            )
        else:
            x0 = _initial_position(target, posterior, init, home, gen)
        first = batches.next(gen) if not isinstance(batches, FullBatch) else batches.data
        # A plain autograd target (a user's log density) is checked by one evaluation; targets
        # with their own gradient (posteriors, data-parallel, functional priors) are bnnkit's.
        if cfg.validate and target.grad_fn is None and target.stochastic_grad is None:
            _check_initial(target, x0, first, unit if vectorized else [home])
        state = kernel.init(x0, first)
        astate = adapt.init(state, num_warmup) if adapt is not None else None
        start, num_chunks, n_collectable, n_kept = 0, 0, 0, 0
        if cfg.stop_when is not None:
            cfg.stop_when.reset()
    return _Start(gen, state, astate, start, num_chunks, n_collectable, n_kept, stop, total)


def _save_checkpoint(store, home, state, astate, gen, batches, iteration, num_chunks, n_collectable, n_kept):
    store.save_checkpoint(
        home,
        {
            "state": state,
            "adapt": astate,
            "generator": gen.get_state(),
            "batches": batches.state_dict(),
            "iteration": iteration,
            "num_chunks": num_chunks,
            "n_collectable": n_collectable,
            "n_kept": n_kept,
        },
    )


def _finish_unit(state, unit, cfg: _Settings, store, stop, n_kept, kept_in_memory):
    """Record why the unit stopped and its final state; return its in-memory draws."""
    home, vectorized = unit[0], cfg.vectorized
    if cfg.stop_when is not None:
        report = {"reason": stop or cfg.stop_when.budget_message(), **cfg.stop_when.last}
        report["draws_per_chain"] = n_kept
        cfg.report["stopped"] = report
        if store is not None:
            store.write_stop(home, report)
    cfg.report.setdefault("final_states", {})[home] = state
    if store is not None:
        for c in unit:
            store.mark_done(c)
        return {}
    positions = torch.cat([c[0] for c in kept_in_memory])
    stats = {k: torch.cat([c[1][k] for c in kept_in_memory]) for k in kept_in_memory[0][1]}
    return dict(zip(unit, _split_chunk((positions, stats), vectorized, len(unit))))


def _unit_label(unit: list[int], vectorized: bool) -> str:
    return f"chains {unit[0] + 1}-{unit[-1] + 1}" if vectorized and len(unit) > 1 else f"chain {unit[0] + 1}"


Chunk = tuple[Tensor, dict[str, Tensor]]  # kept positions [n, D] (or [n, K, D]) and their stats


class UnitRun:
    """A unit's run in progress (one chain, or a vectorised group): what both loops share.

    Holds the unit's generator, state, adaptation state and counters (started afresh or from its
    checkpoint by :func:`_start_unit`), its divergence and stuck-chain checks, its progress bar
    (closed when the ``with`` block ends) and where its chunks of kept draws go: the run
    directory (a checkpoint after each) or memory, each seen by the stopping rule.
    """

    def __init__(self, kernel, target, posterior, batches, fresh_batches, unit, cfg: _Settings, store):
        s = _start_unit(kernel, target, posterior, batches, fresh_batches, unit, cfg, store)
        self.batches, self.unit, self.cfg, self.store, self.home = batches, unit, cfg, store, unit[0]
        self.gen, self.state, self.astate = s.gen, s.state, s.astate
        self.start, self.total, self.stop = s.start, s.total, s.stop
        self.num_chunks, self.n_collectable, self.n_kept = s.num_chunks, s.n_collectable, s.n_kept
        self.kept_in_memory: list[Chunk] = []
        self.stuck = 0  # consecutive transitions that all diverged (an HMC/NUTS chain that cannot move)
        self.watch = StuckWatch(unit if cfg.vectorized else [self.home])
        label = _unit_label(unit, cfg.vectorized)
        self.bar = _progress_bar(s.total, label, cfg.num_chains, s.start) if cfg.progress else None

    def __enter__(self) -> UnitRun:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.close()

    @property
    def running(self) -> bool:
        return self.n_kept < self.cfg.num_samples and self.stop is None

    def checkpoint(self, next_iteration: int) -> None:
        _save_checkpoint(
            self.store,
            self.home,
            self.state,
            self.astate,
            self.gen,
            self.batches,
            next_iteration,
            self.num_chunks,
            self.n_collectable,
            self.n_kept,
        )

    def write(self, chunk: Chunk) -> None:
        """Keep ``chunk``: in the run directory as chunk ``num_chunks`` of each chain, or in memory."""
        if self.store is None:
            self.kept_in_memory.append(chunk)
            return
        for c, part in zip(self.unit, _split_chunk(chunk, self.cfg.vectorized, len(self.unit))):
            self.store.write_chunk(c, self.num_chunks, *part)

    def chunk_done(self, chunk: Chunk, next_iteration: int) -> None:
        """A complete chunk: kept (on disk, then a checkpoint at ``next_iteration``), then shown to
        the stopping rule."""
        self.write(chunk)
        if self.store is not None:
            self.num_chunks += 1
            self.checkpoint(next_iteration)
        if self.cfg.stop_when is not None:
            positions = chunk[0]
            self.stop = self.cfg.stop_when.update(
                positions.transpose(0, 1) if self.cfg.vectorized else positions[None]
            )

    def check_step(self, info: Any, it: int, pending: Callable[[], Chunk | None] | None = None) -> None:
        """Raise the divergence of step ``it`` (its new state is ``self.state``) when the position
        or log density is not finite, or when it ends ``MAX_CONSECUTIVE_DIVERGENCES`` transitions in
        a row in which every chain diverged; ``pending()``: the draws kept since the last chunk, kept
        before stopping."""
        stuck = 0
        if _finite(self.state, info):
            self.stuck = _stuck_after(self.stuck, info)
            if self.stuck < MAX_CONSECUTIVE_DIVERGENCES:
                return
            stuck = self.stuck
        chunk = pending() if pending is not None else None
        if chunk is not None:
            self.write(chunk)
        raise self.divergence(self.state, info, it, stuck)

    def divergence(self, state: Any, info: Any, it: int, stuck: int = 0, n_ok: int = 0) -> DivergenceError:
        """The error of a chain that diverged at step ``it`` (``n_ok`` draws kept since ``n_kept``)."""
        cfg = self.cfg
        return _divergence(
            state,
            info,
            self.unit,
            cfg.vectorized,
            it,
            cfg.num_warmup,
            self.n_kept + n_ok,
            self.store,
            self.kept_in_memory,
            stuck,
        )

    def finish(self) -> dict[int, Chunk]:
        """Report a chain that never accepted; record the unit's end; its in-memory draws per chain."""
        self.watch.finish(getattr(self.state, "step_size", None))
        return _finish_unit(
            self.state, self.unit, self.cfg, self.store, self.stop, self.n_kept, self.kept_in_memory
        )


class StuckWatch:
    """Warns (:class:`~bnnkit.core.errors.StuckChainWarning`) about a chain that accepts nothing.

    Fed each sampling transition's acceptance probability (``[K]`` for K vectorised chains): a
    chain whose proposals are all rejected for ``STUCK_WINDOW`` transitions in a row, or over a
    whole shorter run of at least ``STUCK_MIN_TRANSITIONS``, repeats one point, so its draws
    say nothing about the posterior.  Algorithms without an acceptance step (SG-MCMC) report no
    ``accept_prob`` and are never fed.  Each chain is reported once.
    """

    def __init__(self, chains: list[int]):
        self.chains = list(chains)
        self.run = [0] * len(self.chains)  # transitions in a row that accepted nothing
        self.seen = 0
        self.warned: set[int] = set()

    def update(self, accept_prob: Tensor, is_accepted: Any = None, step_size: Any = None) -> None:
        ap = accept_prob.detach().reshape(-1)
        nothing = ~(ap > NOTHING_ACCEPTED)  # NaN counts as nothing accepted
        if isinstance(is_accepted, Tensor) and is_accepted.numel() == ap.numel():
            nothing = nothing & ~is_accepted.detach().reshape(-1).bool()
        if nothing.numel() != len(self.chains):  # not one value per chain: stuck only if nothing moved
            nothing = nothing.all().reshape(1).expand(len(self.chains))
        self.add(nothing[None], step_size)

    def add(self, nothing: Tensor, step_size: Any = None) -> None:
        """``nothing``: ``[n, K]`` booleans, transitions in order (e.g. a fused block's kept ones)."""
        rows = nothing.reshape(nothing.shape[0], -1).cpu().tolist()
        for row in rows:
            self.seen += 1
            for i, none in enumerate(row[: len(self.chains)]):
                self.run[i] = self.run[i] + 1 if none else 0
                if self.run[i] >= STUCK_WINDOW and self.chains[i] not in self.warned:
                    self._warn(i, step_size)

    def finish(self, step_size: Any = None) -> None:
        """At the end of a run shorter than the window: report chains that never accepted."""
        if self.seen < STUCK_MIN_TRANSITIONS:
            return
        for i, n in enumerate(self.run):
            if n == self.seen and self.chains[i] not in self.warned:
                self._warn(i, step_size)

    def _warn(self, i: int, step_size: Any) -> None:
        chain = self.chains[i]
        self.warned.add(chain)
        eps = ""
        if isinstance(step_size, Tensor) and step_size.numel():
            flat = step_size.detach().reshape(-1)
            eps = f" at step size {float(flat[i] if flat.numel() == len(self.chains) else flat.max()):.3g}"
        elif isinstance(step_size, (int, float)):
            eps = f" at step size {step_size:.3g}"
        warnings.warn(
            f"chain {chain} is stuck: it accepted no proposal in {self.run[i]} sampling transitions in a row{eps} "
            "(acceptance probability 0), so its draws repeat one point and say nothing about the posterior. "
            "Try a step size several times smaller, a longer warm-up (num_warmup) so that the step size adapts, "
            "or an initial point (init=) where the log density is reasonable.",
            StuckChainWarning,
            stacklevel=2,
        )


def _check_initial(target: Target, x0: Tensor, batch: Batch, chains: list[int]) -> None:
    """One evaluation of the log density at the initial position(s), with bnnkit errors for what
    would otherwise fail deep inside autograd or run silently on NaN."""
    with torch.enable_grad():
        xg = x0.detach().requires_grad_(True)
        lp = target.log_prob(xg, batch)
    if not isinstance(lp, Tensor):
        raise BnnkitError(
            f"the log density returned {type(lp).__name__}, not a tensor; return a scalar torch tensor computed "
            "from the parameters."
        )
    expected = (len(chains),) if x0.ndim == 2 else ()
    if lp.shape != expected and not (x0.ndim == 1 and lp.numel() == 1):
        raise BnnkitError(
            f"the log density returned a tensor of shape {tuple(lp.shape)}; it must return one number (a 0-d "
            "tensor). If it returns one term per data point or per parameter, sum them."
        )
    lp = lp.detach().reshape(-1)
    bad = [chains[i] for i in torch.nonzero(~torch.isfinite(lp)).flatten().tolist()]
    if bad:
        raise BnnkitError(
            f"the log density is {float(lp[chains.index(bad[0])])} at the initial position of chain(s) {bad}: no "
            "sampler can start there. Check the data and the log density for NaN/inf, or pass an init= where it "
            "is finite."
        )


def _stuck_after(stuck: int, info: Any) -> int:
    """Consecutive transitions in which every chain diverged, counting this one's ``info``
    (unchanged for an algorithm that reports no divergences)."""
    div = getattr(info, "diverging", None)
    if not isinstance(div, Tensor):
        return stuck
    return stuck + 1 if bool(div.all()) else 0


def _adapt_step(adapt: Any, astate: Any, state: Any, info: Any, it: int, num_warmup: int) -> tuple[Any, Any]:
    """One warm-up step's adaptation; the last warm-up step also fixes the adapted settings."""
    astate, state = adapt.update(astate, state, info)
    if it == num_warmup - 1:
        state = adapt.finalize(astate, state)
    return astate, state


def _finite(state: Any, info: Any) -> bool:
    """Whether the new position and the step's log density (or ELBO) are finite (one host sync)."""
    total = state.position.sum()
    for name in ("log_density", "elbo"):
        lp = getattr(info, name, None)
        if isinstance(lp, Tensor):
            total = total + lp.sum()
    return math.isfinite(float(total))


def _divergence(
    state, info, unit, vectorized, it, num_warmup, n_kept, store, kept, stuck: int = 0
) -> DivergenceError:
    x = state.position.detach()
    lp = getattr(info, "log_density", None)
    rows = x.reshape(len(unit), -1) if vectorized else x.reshape(1, -1)
    bad_x = ~torch.isfinite(rows).all(dim=1)
    bad_lp = ~torch.isfinite(lp.detach().reshape(-1)) if isinstance(lp, Tensor) else torch.zeros_like(bad_x)
    bad = bad_x | bad_lp.reshape(bad_x.shape) if bad_lp.numel() == bad_x.numel() else bad_x | bad_lp.any()
    chains = [c for c, b in zip(unit, bad.tolist()) if b] or list(unit)
    if stuck:
        what = (
            f"{stuck} transitions in a row diverged (every proposal reached a non-finite or exploding energy), "
            "so the chain cannot move"
        )
    else:
        what = ("the position" if bool(bad_x.any()) else "the log density") + " became NaN or infinite"
    eps = getattr(state, "step_size", None)
    eps_text = f" at step size {float(eps.max()):.3g}" if isinstance(eps, Tensor) and eps.numel() else ""
    phase = "warm-up" if it < num_warmup else "sampling"
    if store is not None:
        where = f"they are in {store.root} (bnnkit.load_samples(..., chains={list(unit)}))"
    else:
        where = "they are in this error's .partial"
    message = (
        f"chain(s) {chains} diverged at step {it} ({phase}){eps_text}: {what}. "
        f"The {n_kept} draws kept before it are finite and kept; {where}. Try a step size several times "
        "smaller (SG-MCMC: shrink it until the log density stops climbing towards a blow-up), a longer warm-up "
        "for adapted samplers, or check the log density for overflow (e.g. exp of a large number)."
    )
    partial = {}
    if kept:
        positions = torch.cat([c[0] for c in kept])
        stats = {k: torch.cat([c[1][k] for c in kept]) for k in kept[0][1]}
        partial = dict(zip(unit, _split_chunk((positions, stats), vectorized, len(unit))))
    return DivergenceError(message, chains=chains, step=it, partial=partial)


def _stack_chunk(
    positions: list[Tensor], infos: list[Any], num_chains: int | None
) -> tuple[Tensor, dict[str, Tensor]]:
    """Stack kept draws ``[n, D]`` (or ``[n, K, D]`` for K vectorised chains) and their scalar stats."""
    stats: dict[str, Tensor] = {}
    for name in infos[0]._fields:
        vals = [getattr(i, name) for i in infos]
        if not all(isinstance(v, Tensor) for v in vals):
            continue
        if all(v.numel() == 1 for v in vals):
            row = torch.stack([v.detach().reshape(()) for v in vals])
            stats[name] = row if num_chains is None else row[:, None].expand(-1, num_chains)
        elif num_chains is not None and all(v.shape == (num_chains,) for v in vals):
            stats[name] = torch.stack([v.detach() for v in vals])
    return torch.stack(positions), stats


def _split_chunk(
    chunk: tuple[Tensor, dict[str, Tensor]], vectorized: bool, k: int
) -> list[tuple[Tensor, dict[str, Tensor]]]:
    """One ``(positions [n, D], stats [n])`` per chain of a chunk."""
    if not vectorized:
        return [chunk]
    pos, stats = chunk
    return [(pos[:, i].contiguous(), {n: v[:, i].contiguous() for n, v in stats.items()}) for i in range(k)]


def _progress_bar(total: int, label: str, num_chains: int, start: int):
    from tqdm.auto import tqdm

    return tqdm(
        total=total,
        initial=start,
        desc=f"{label}/{num_chains}",
        leave=True,
        mininterval=0.25,
        dynamic_ncols=True,
    )
