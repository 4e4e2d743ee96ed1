"""One driver for every algorithm: warm-up, thinning, chains, progress, streaming, resume.

``sample(algorithm, posterior, data, ...)`` builds the algorithm against the posterior's flat
:class:`~bnnkit.core.target.Target`, runs ``num_warmup`` adapted steps and then
``num_samples * thin`` steps per chain, keeping every ``thin``-th state.  Chain ``c`` draws all
its randomness from its own ``torch.Generator`` seeded from ``(seed, c)``, so the same seed gives
the same chains, whatever else the process does.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import Tensor

from .errors import BnnkitError, DivergenceError, check_int_at_least
from .loop_parts import (
    FullBatch,
    InitSpec,
    UnitRun,
    _adapt_step,
    _initial_position,
    _say,
    _Settings,
    _stack_chunk,
)
from .posterior import Posterior
from .random import make_generator
from .samples import Samples
from .storage import RunStore, StoredSamples
from .target import Target, as_target
from .types import Algorithm, Batch, Capabilities, LogDensityFn
from .weights import warn_if_degenerate

FINGERPRINT_SEED = 0x5EEDF1A6  # the fixed direction (and stream generator) of the run fingerprint
FINGERPRINT_VERSION = 1
FINGERPRINT_STREAM_BATCHES = 2  # batches a stream without its own fingerprint() is identified by


def _batch_source(data: Any) -> Any:
    if hasattr(data, "next") and hasattr(data, "state_dict"):
        return data  # a minibatch stream (SG-MCMC)
    if isinstance(data, torch.utils.data.DataLoader):
        from ..data.minibatch import LoaderStream

        return LoaderStream(data)
    return FullBatch(data)


def _coerce_data(data: Any, posterior: Any) -> Any:
    """Data as users hold it, as the driver takes it: a ``DataLoader`` becomes a
    :class:`~bnnkit.data.LoaderStream` (its batches in the loader's order, resumable when the
    loader shuffles with its own ``generator=``); a pair with NumPy arrays (or pandas columns)
    becomes a pair of tensors, floating ones in the posterior's dtype."""
    if isinstance(data, torch.utils.data.DataLoader):
        from ..data.minibatch import LoaderStream

        return LoaderStream(data)
    if (
        isinstance(data, (tuple, list))
        and len(data) == 2
        and any(
            not isinstance(d, Tensor) and (hasattr(d, "__array__") or hasattr(d, "to_numpy")) for d in data
        )
    ):
        from ..data.coerce import as_pair

        pair = as_pair(data)
        view = getattr(posterior, "view", None)
        dtype = getattr(view, "dtype", None)
        if isinstance(posterior, Posterior) and dtype is not None:
            # NumPy's default float64 into a float32 network: converted, as torch.from_numpy users do.
            pair = tuple(
                t.to(dtype) if t.is_floating_point() and not isinstance(d, Tensor) else t
                for t, d in zip(pair, data)
            )
        return tuple(pair)
    return data


# Over 80 lines for its public signature and its 19 documented arguments; the work is in _plan and below.
def sample(
    algorithm: Algorithm,
    posterior: Posterior | LogDensityFn,
    data: Batch = None,
    *,
    num_samples: int = 1000,
    num_warmup: int = 0,
    thin: int = 1,
    num_chains: int = 1,
    seed: int = 0,
    init: InitSpec = None,
    progress: bool = True,
    output: str | None = None,
    chunk_size: int = 100,
    validate: bool = True,
    compile: bool = False,
    chain_method: str = "sequential",
    chains: Sequence[int] | None = None,
    on_divergence: str = "raise",
    stop_when: Any = None,
    fused: bool | int = False,
) -> Samples:
    """Run ``algorithm`` on ``posterior`` and return its draws.

    Args:
        algorithm: hyperparameters of a sampler, e.g. ``bnnkit.samplers.HMC(step_size=0.01)``.
        posterior: a :class:`~bnnkit.Posterior`, or any log density ``f(params: dict, batch)``
            (then ``init`` must be a dict of initial parameters).
        data: the batch passed to the log density: ``(inputs, targets)`` for a posterior (tensors,
            or NumPy arrays, converted), a minibatch stream (:class:`bnnkit.data.Minibatches`), or
            a ``torch.utils.data.DataLoader`` (wrapped in :class:`bnnkit.data.LoaderStream`: every
            step sees the loader's next batch).
        num_samples: draws kept per chain (after thinning).
        num_warmup: adapted steps discarded before sampling (burn-in).
        thin: keep every ``thin``-th state.
        num_chains: independent chains, each with its own generator.
        seed: base seed; chain ``c`` uses a seed derived from ``(seed, c)``.
        init: ``"prior"`` (default for posteriors: a prior draw per chain), ``"module"`` (the
            module's current weights), a dict of parameters, or ``f(chain, generator) -> dict``.
        progress: show a progress bar with live acceptance rate and step size.
        output: a directory to stream draws to; an interrupted run with the same configuration
            resumes from its last checkpoint and gives the same draws as an uninterrupted run.
            The directory holds a fingerprint of the data and of the log density (its value and
            gradient at each chain's initial position on a fixed batch): a resume with other
            data, another model or log density, or other initial values is refused with what
            differs.  A failed write (a full disk) stops the run with a
            :class:`~bnnkit.core.storage.RunWriteError`; rerunning the same call resumes.
        chunk_size: draws per file (and per checkpoint) when streaming.
        validate: check the data against the model before sampling.
        compile: compile the log-density gradient with ``torch.compile`` (see
            :meth:`~bnnkit.core.target.Target.compiled`): a few seconds up front, then steps
            about twice as fast at BNN-benchmark sizes.  Draws agree with an eager run to float
            rounding, not bit for bit, so a resumed run must use the same setting.
        chain_method: ``"sequential"`` runs the chains one after another; ``"vectorized"`` runs
            them as one computation over stacked positions ``[K, D]`` (``torch.func.vmap`` over
            the network), which at BNN-benchmark sizes costs little more than one chain.  Each
            chain still starts from its own initial draw and sees its own minibatches; the noise
            of all chains comes from one generator of the group, so vectorised chains are
            reproducible but not equal to sequential ones.  Algorithms with a per-chain amount of
            work (NUTS, rejection sampling, Gibbs) refuse it with a clear message.
        chains: run only these chain indices (e.g. one rank's share in chain-parallel sampling);
            each keeps the seed it has in a full run, so the union of the parts equals the run.
        on_divergence: what to do when a chain reaches a non-finite position or log density
            (a step size too large, a log density that overflows): ``"raise"`` (default) stops at
            that step with a :class:`DivergenceError` naming the chain, the step and the step
            size, keeping every draw before it (on disk with ``output``, in the error's
            ``partial`` otherwise); ``"warn"`` warns, marks the chain diverged and returns the
            other chains (vectorised chains stop as a group: the group's healthy chains are left
            out too, listed in ``config["dropped_chains"]``).  A non-finite value never enters the
            returned or stored draws.
        stop_when: a stopping rule checked every ``chunk_size`` kept draws, e.g.
            :class:`bnnkit.diagnostics.FunctionSpaceConvergence` (R-hat and ESS of the network's
            outputs at held-out inputs); ``num_samples`` is then the budget.  It needs all chains
            in one unit (``chain_method="vectorized"``, or one chain).  The returned
            ``samples.config["stopped"]`` says whether the rule or the budget ended the run.
        fused: run SG-MCMC (SGLD, SGHMC and their cyclical variants, pSGLD, adaptive SGHMC) or
            full-batch HMC in compiled blocks of steps, Python once per block instead of once per
            step (:mod:`bnnkit.core.blocks`; HMC and adaptive SGHMC warm up step at a time, then
            sample in blocks), or NUTS with one compiled call per trajectory doubling:
            ``True`` picks the block length (at most 128 steps), a number caps it.  Same draws as
            step at a time to float rounding; a resumed run must use the same setting.
            ``docs/scaling.md`` lists what is not fused.

    The returned draws carry ``samples.final_states``: each chain's last state (its NamedTuple of
    tensors), keyed by chain, or by the first chain of a vectorised group; for a variational
    algorithm (``Kernel.fit_steps > 0``: fit, then draw) that is the fitted variational parameters.
    """
    # over 80 lines only for the documented arguments above: the body plans, then runs one loop
    plan = _plan(
        algorithm,
        num_samples=num_samples,
        num_warmup=num_warmup,
        thin=thin,
        num_chains=num_chains,
        seed=seed,
        output=output,
        chunk_size=chunk_size,
        progress=progress,
        chain_method=chain_method,
        chains=chains,
        on_divergence=on_divergence,
        stop_when=stop_when,
    )
    if init is None:  # e.g. variational inference starts its mean at the module's own weights
        init = plan.capabilities.default_init
    data = _coerce_data(data, posterior)
    target, model_config, init = _build_target(posterior, data, init, validate)
    block = 0
    if fused is not False and fused is not None:
        from .blocks import fused_block

        width = len(plan.chains.ids) if plan.chains.vectorized else 1  # positions [K, D]
        block = fused_block(fused, algorithm, compile, target.view.size * width)
    flat_target = target  # one chain's (the fused block vectorises the chains itself)
    target, batches, units = _plan_units(target, data, plan.chains, compile)
    kernel = _build_kernel(algorithm, plan, posterior, flat_target, target, block, batches)
    # Every chain starts the stream afresh (its own shuffles come from its own generator), so a
    # chain's draws do not depend on which chains, or earlier runs, used the stream before it.
    initial = getattr(batches, "initial_state", None)
    fresh_batches = initial() if initial is not None else batches.state_dict()
    config = _run_config(algorithm, model_config, plan, init, compile, fused, block, kernel)
    store = None
    if output is not None:
        # the fingerprint and the run's start draw each chain's initial position: an init function
        # (a MAP phase, say) runs once per chain, and its second call replays the first
        init = _once_per_chain(init)
        fingerprint = run_fingerprint(flat_target, posterior, init, data, seed, num_chains)
        store = RunStore(output, config, fingerprint)
    settings = _settings(plan, init, validate, block)
    try:
        results, diverged, dropped = _run_units(
            kernel, target, posterior, batches, fresh_batches, units, settings, store, plan
        )
    except KeyboardInterrupt:
        _say_interrupted(store, chunk_size)
        raise
    return _samples(results, diverged, dropped, plan, config, settings, store, units, target.view)


# ----------------------------------------------------------------------------- the run's plan
class ChainPlan(NamedTuple):
    """Which chains run, and how: ``ids`` of the run's ``num_chains`` (``subset``: only these were
    asked for, each with the seed it has in the whole run), one after another or ``vectorized``
    as one computation; chain ``c`` draws from a generator seeded from ``(seed, c)``."""

    ids: list[int]
    num_chains: int
    vectorized: bool
    subset: bool
    seed: int


class OutputPlan(NamedTuple):
    """Where the kept draws go: memory (``directory`` None) or a run directory, in files of
    ``chunk_size`` draws per chain with a checkpoint after each; ``progress``: a bar per unit."""

    directory: str | None
    chunk_size: int
    progress: bool


class DivergencePlan(NamedTuple):
    """What a diverged chain does: ``warn`` (the run returns the other chains) or raise."""

    warn: bool


class StopPlan(NamedTuple):
    """How long a unit runs: ``num_warmup`` steps, then until ``num_samples`` draws (every
    ``thin``-th state) are kept per chain, or until ``rule`` (``stop_when``) says stop."""

    num_warmup: int
    num_samples: int
    thin: int
    rule: Any


@dataclass(frozen=True)
class RunPlan:
    """The options of a :func:`sample` call, checked and grouped, and what the algorithm can do."""

    capabilities: Capabilities
    chains: ChainPlan
    output: OutputPlan
    divergence: DivergencePlan
    stopping: StopPlan


def _plan(
    algorithm: Algorithm,
    *,
    num_samples: int,
    num_warmup: int,
    thin: int,
    num_chains: int,
    seed: int,
    output: str | None,
    chunk_size: int,
    progress: bool,
    chain_method: str,
    chains: Sequence[int] | None,
    on_divergence: str,
    stop_when: Any,
) -> RunPlan:
    """Check the options that need no data or model and group them; a :class:`BnnkitError` names
    the first that is wrong."""
    check_int_at_least("num_samples", num_samples, 1)
    check_int_at_least("num_warmup", num_warmup, 0)
    check_int_at_least("thin", thin, 1)
    check_int_at_least("num_chains", num_chains, 1)
    check_int_at_least("chunk_size", chunk_size, 1)
    if on_divergence not in ("raise", "warn"):
        raise BnnkitError(f"on_divergence must be 'raise' or 'warn', got {on_divergence!r}.")
    capabilities = Capabilities.of(algorithm)
    chain_ids = _chain_ids(chains, num_chains)
    if chain_method not in ("sequential", "vectorized"):
        raise BnnkitError(f"chain_method must be 'sequential' or 'vectorized', got {chain_method!r}.")
    vectorized = chain_method == "vectorized"
    if vectorized and not capabilities.vectorizable:
        why = capabilities.not_vectorizable_because or (
            "its transitions take a different amount of work per chain or are not written for "
            "stacked positions"
        )
        raise BnnkitError(
            f"{type(algorithm).__name__} cannot run its chains vectorised: {why}. Use "
            "chain_method='sequential'."
        )
    if stop_when is not None and not vectorized and len(chain_ids) > 1:
        raise BnnkitError(
            "stop_when compares chains as they run, so they must run together: pass "
            "chain_method='vectorized' (or num_chains=1)."
        )
    return RunPlan(
        capabilities,
        ChainPlan(chain_ids, num_chains, vectorized, chains is not None, seed),
        OutputPlan(output, chunk_size, progress),
        DivergencePlan(on_divergence == "warn"),
        StopPlan(num_warmup, num_samples, thin, stop_when),
    )


def _build_kernel(
    algorithm: Algorithm,
    plan: RunPlan,
    posterior: Any,
    flat_target: Target,
    target: Target,
    block: int,
    batches: Any,
) -> Any:
    """The algorithm built against the target: its fused block kernel (``block`` steps per call),
    or its step kernel, given the model too when it needs it (VI: forward, likelihood, prior)."""
    if block:
        from .blocks import build_block_kernel

        chains_k = len(plan.chains.ids) if plan.chains.vectorized else None
        return build_block_kernel(
            algorithm, posterior, flat_target, block, chains_k, not isinstance(batches, FullBatch)
        )
    if plan.capabilities.needs_model:
        return algorithm.build(target, model=posterior)
    return algorithm.build(target)


def _run_config(
    algorithm: Algorithm,
    model_config: dict,
    plan: RunPlan,
    init: InitSpec,
    compile: bool,
    fused: Any,
    block: int,
    kernel: Any,
) -> dict[str, Any]:
    """What the run directory records, and a resume must match."""
    stopping = plan.stopping
    config = {
        "algorithm": {"name": algorithm.name, **algorithm.config()},
        "model": model_config,
        "num_samples": stopping.num_samples,
        "num_warmup": stopping.num_warmup,
        "thin": stopping.thin,
        "num_chains": plan.chains.num_chains,
        "seed": plan.chains.seed,
        "init": init if isinstance(init, str) else type(init).__name__,
        "chunk_size": plan.output.chunk_size,
        "compile": bool(compile),
    }
    if plan.chains.vectorized:
        config["chain_method"] = "vectorized"
    if block:  # fused draws agree with step-at-a-time ones to float rounding: a resume must match
        config["fused"] = {"block": "auto" if fused is True else block, "loop": getattr(kernel, "loop", None)}
    if stopping.rule is not None:
        config["stop_when"] = stopping.rule.config()
    return config


def _settings(plan: RunPlan, init: InitSpec, validate: bool, block: int) -> _Settings:
    """The settings every unit runs with."""
    return _Settings(
        vectorized=plan.chains.vectorized,
        init=init,
        seed=plan.chains.seed,
        num_warmup=plan.stopping.num_warmup,
        num_samples=plan.stopping.num_samples,
        thin=plan.stopping.thin,
        progress=plan.output.progress,
        chunk_size=plan.output.chunk_size,
        num_chains=plan.chains.num_chains,
        sampling_fraction=float(plan.capabilities.sampling_fraction),
        validate=validate,
        stop_when=plan.stopping.rule,
        block=block,
    )


def _samples(results, diverged, dropped, plan: RunPlan, config, settings, store, units, view) -> Samples:
    """The draws of the chains that did not diverge (on disk with ``output``, else from memory),
    the run's configuration with what happened to the others, and each unit's final state."""
    kept = [c for c in plan.chains.ids if c not in diverged and c not in dropped]
    if not kept:
        raise DivergenceError(
            f"no chain is left: {sorted(diverged)} diverged"
            + (f", {sorted(dropped)} stopped with their vectorised group" if dropped else "")
            + "; see the warnings above for where and what to try.",
            chains=diverged,
            step=-1,
        )
    if plan.chains.subset:
        config = {**config, "chains": list(plan.chains.ids)}
    if diverged:
        config = {**config, "diverged_chains": sorted(diverged)}
    if dropped:
        config = {**config, "dropped_chains": sorted(dropped)}
    if plan.stopping.rule is not None:
        config = {**config, "stopped": settings.report.get("stopped") or _read_stop(store, units[0][0])}
    if store is not None:  # draws stay on disk: memory does not grow with the number of draws
        samples: Samples = StoredSamples(plan.output.directory, kept, view, config)
    else:
        positions = torch.stack([results[c][0] for c in kept])
        first = results[kept[0]][1]
        stats = {k: torch.stack([results[c][1][k] for c in kept]) for k in first}
        samples = Samples(positions, stats, view, config)
    if samples.log_weights is not None:
        warn_if_degenerate(samples.log_weights)
    # The last state of every unit (keyed by its first chain): a VI run's fitted parameters.
    finals = settings.report.get("final_states", {})
    for unit in units:
        if unit[0] not in finals and store is not None and unit[0] in kept:
            finals[unit[0]] = _stored_final_state(store, unit)
    samples.final_states = {c: s for c, s in finals.items() if c in kept}
    return samples


# ----------------------------------------------------------------------------- run fingerprint
def once_per_chain(init: InitSpec) -> InitSpec:
    """``init`` unchanged unless it is a function ``f(chain, generator)``; then a function that
    calls it once per chain and, called again for that chain, returns the same position and puts
    the generator where the first call left it (so the chain is the one the first call began)."""
    if isinstance(init, (str, Mapping)) or not callable(init):
        return init
    done: dict[int, tuple[Any, Tensor]] = {}

    def again(chain: int, gen: torch.Generator) -> Any:
        if chain not in done:
            done[chain] = (init(chain, gen), gen.get_state())
        else:
            gen.set_state(done[chain][1])
        return done[chain][0]

    again.__name__ = getattr(init, "__name__", type(init).__name__)
    return again


_once_per_chain = once_per_chain  # the name the driver's run uses


def run_fingerprint(
    target: Target, posterior: Any, init: InitSpec, data: Any, seed: int, num_chains: int
) -> dict[str, Any]:
    """What a run directory stores so that a resume on other data or another posterior is refused.

    - ``data``: a SHA-256 of the full-batch tensors (bytes, shapes, dtypes), or of a minibatch
      stream's rows and batching (:meth:`bnnkit.data.Minibatches.fingerprint`; a stream without
      that method: of its first two batches from a fixed generator, its state restored
      afterwards);
    - ``init``: a SHA-256 of each chain's initial position (drawn from a generator of its own,
      equal to the chain's, so nothing the run draws changes);
    - ``function``: per chain, the log density, the gradient's norm and its cosine with a fixed
      random direction, at that initial position on a fixed batch (the full batch, or the stream's
      first rows): another activation with the same parameter shapes, another likelihood or another
      log-density callable changes them.  Compared with a tolerance
      (:func:`bnnkit.core.storage.fingerprint_differences`), so float rounding (another number of
      threads) does not refuse a resume; the same call reproduces them bit for bit anyway.

    Costs one log density and gradient per chain, plus hashing the data once.  A data-parallel
    log density (a collective over ranks) is not evaluated: its ``function`` entries are None.
    """
    device = target.view.device
    desc, batch = _data_fingerprint(_batch_source(data), device)
    # A data-parallel log density is a collective over all ranks, and ranks may differ in whether
    # they pass output= (docs/distributed.md: rank 0 only): evaluating it here could pair with
    # another rank's sampling step.  Its data (this rank's shard) and initial values are still kept.
    collective = _uses_collectives(target)
    inits, values = [], []
    for c in range(num_chains):
        x0 = _initial_position(target, posterior, init, c, make_generator(seed, c, device))
        inits.append(_digest(x0))
        values.append(None if collective else _function_values(target, x0, batch))
    return {
        "version": FINGERPRINT_VERSION,
        "dtype": str(target.view.dtype),
        "data": _digest(desc),
        "init": inits,
        "function": values,
    }


def _uses_collectives(target: Target) -> bool:
    dp = sys.modules.get("bnnkit.distributed.data_parallel")  # loaded by anyone who built one
    return dp is not None and isinstance(target, getattr(dp, "DataParallelTarget", ()))


def _data_fingerprint(source: Any, device: torch.device) -> tuple[Any, Batch]:
    """What identifies the data, and a fixed batch to evaluate the log density on."""
    if isinstance(source, FullBatch):
        return source.data, source.data
    own = getattr(source, "fingerprint", None)
    if callable(own):
        return own()
    # Any other stream: its first batches from a fixed generator, from where every chain starts,
    # and only their values (a wrapper around the same stream gives the same fingerprint).
    saved = copy.deepcopy(source.state_dict())
    initial = getattr(source, "initial_state", None)
    try:
        source.load_state_dict(initial() if initial is not None else copy.deepcopy(saved))
        gen = make_generator(FINGERPRINT_SEED, 0, device)
        batches = [source.next(gen) for _ in range(FINGERPRINT_STREAM_BATCHES)]
    finally:
        source.load_state_dict(saved)
    return {"first_batches": batches}, batches[0]


def _digest(obj: Any) -> str:
    h = hashlib.sha256()
    _hash_into(h, obj)
    return h.hexdigest()


def _hash_into(h: Any, obj: Any) -> None:
    if isinstance(obj, Tensor):
        t = obj.detach()
        h.update(f"T{t.dtype}{tuple(t.shape)};".encode())
        try:
            flat = t.resolve_conj().resolve_neg().cpu().contiguous().reshape(-1)
            if flat.numel():
                h.update(memoryview(flat.view(torch.uint8).numpy()))
        except (RuntimeError, TypeError):  # a layout with no plain bytes (sparse, quantised)
            h.update(repr(t.tolist()).encode())
    elif isinstance(obj, Mapping):
        h.update(b"{")
        for k in sorted(obj, key=str):
            h.update(repr(str(k)).encode())
            _hash_into(h, obj[k])
        h.update(b"}")
    elif isinstance(obj, (tuple, list)):
        h.update(f"({type(obj).__name__}:{len(obj)}".encode())
        for item in obj:
            _hash_into(h, item)
        h.update(b")")
    elif obj is None or isinstance(obj, (bool, int, float, str, bytes)):
        h.update(repr(obj).encode())
    elif hasattr(obj, "__array__"):
        _hash_into(h, torch.as_tensor(obj))
    else:  # an object with no data of its own to hash: its type
        h.update(f"<{type(obj).__module__}.{type(obj).__qualname__}>".encode())


def _function_values(target: Target, x0: Tensor, batch: Batch) -> list[float | None] | None:
    """``[log density, |gradient|, cos(gradient, fixed direction)]`` at ``x0`` (the gradient
    entries None for a log density without one; None where the log density fails: the run's own
    checks then say why)."""
    x = x0.detach()
    try:
        with torch.enable_grad():
            lp, g = target.value_and_grad(x, batch)
    except Exception:
        try:
            with torch.no_grad():
                lp = target.log_prob(x, batch)
            return [_number(lp), None, None]
        except Exception:
            return None
    g = g.detach().reshape(-1).to(torch.float64)
    direction = torch.randn(
        g.numel(), generator=torch.Generator().manual_seed(FINGERPRINT_SEED), dtype=torch.float64
    ).to(g.device)
    norm = float(g.norm())
    cos = float(g @ direction) / (norm * float(direction.norm())) if 0 < norm < math.inf else 0.0
    return [_number(lp), norm, cos]


def _number(lp: Any) -> float | None:
    if not isinstance(lp, Tensor) or lp.numel() != 1:
        return None
    return float(lp.detach().reshape(()))


# ----------------------------------------------------------------------------- what a run says


def _say_interrupted(store: RunStore | None, chunk_size: int) -> None:
    if store is not None:
        _say(
            f"bnnkit: interrupted. The draws so far are safe in {store.root} (a checkpoint every {chunk_size} "
            "draws); rerun the same bnnkit.sample call to resume where it stopped."
        )
    else:
        _say(
            "bnnkit: interrupted; this run's draws are lost. Pass output=DIR to bnnkit.sample to make runs "
            "resumable: rerunning the same call then continues from the last checkpoint."
        )


def _stored_final_state(store: RunStore, unit: list[int]) -> Any:
    """The state in the last checkpoint of a unit that finished in an earlier call."""
    ckpt = store.load_checkpoint(unit[0], unit)
    return None if ckpt is None else ckpt["state_type"](**ckpt["state"])


def _build_target(posterior: Any, data: Any, init: InitSpec, validate: bool) -> tuple[Target, dict, InitSpec]:
    """The flat target to sample, the model's part of the run configuration, and the init."""
    if isinstance(posterior, Posterior):
        if validate and data is not None and not hasattr(data, "next"):
            posterior.check_data(data)
        if validate and hasattr(data, "check"):
            data.check(posterior)
        target = posterior.target()
        model_config: dict[str, Any] = posterior.config()
        init = "prior" if init is None else init
    elif isinstance(posterior, Target):
        target, model_config = posterior, {"target": "custom", "parameters": posterior.view.describe()}
    elif callable(posterior):
        if not isinstance(init, Mapping):
            raise BnnkitError(
                "sampling a plain log-density function needs init=<dict of initial parameter tensors>."
            )
        target = as_target(posterior, init)
        model_config = {
            "log_density": getattr(posterior, "__name__", "custom"),
            "parameters": target.view.describe(),
        }
    else:
        raise BnnkitError(
            f"posterior must be a bnnkit.Posterior or a callable log density, got {type(posterior).__name__}."
        )

    return target, model_config, init


def _plan_units(
    target: Target, data: Any, chains: ChainPlan, compile: bool
) -> tuple[Target, Any, list[list[int]]]:
    """The target and batch stream as the chains will use them, and the chains' grouping into units
    (one chain each, or all chains as one vectorised computation)."""
    batches = _batch_source(data)
    if not chains.vectorized:
        return (target.compiled() if compile else target), batches, [[c] for c in chains.ids]
    if not (isinstance(batches, FullBatch) or hasattr(batches, "per_chain")):
        raise BnnkitError(
            f"vectorised chains need each chain's minibatches from one tensor stream "
            f"(bnnkit.Minibatches); got {type(batches).__name__}. Use chain_method='sequential' for a "
            "DataLoader stream."
        )
    if not isinstance(batches, FullBatch):
        batches = batches.per_chain(len(chains.ids))
    target = target.vectorized(chain_batched=not isinstance(batches, FullBatch), compile=compile)
    return target, batches, [chains.ids]


def _run_units(
    kernel, target, posterior, batches, fresh_batches, units, settings, store, plan: RunPlan
) -> tuple[dict[int, tuple[Tensor, dict[str, Tensor]]], list[int], list[int]]:
    """Run (or resume) every unit; return the in-memory draws, the chains that diverged, and the
    healthy chains of a vectorised group that stopped with a diverged one."""
    results: dict[int, tuple[Tensor, dict[str, Tensor]]] = {}
    diverged: list[int] = []
    dropped: list[int] = []
    run_unit = _run_unit
    if settings.block:
        from .blocks import run_unit_blocks as run_unit
    finished: list[int] = []
    try:
        for unit in units:
            if store is not None:
                for c in unit:  # a finished chain with a damaged chunk runs again from its checkpoint
                    if store.is_done(c) and store.verify(c):
                        store.reopen(c)
                if all(store.is_done(c) or store.is_diverged(c) for c in unit):
                    diverged += [c for c in unit if store.is_diverged(c)]
                    finished += unit
                    continue
                store.lock(unit)
            try:
                results.update(
                    run_unit(kernel, target, posterior, batches, fresh_batches, unit, settings, store)
                )
            except DivergenceError as err:
                err.partial = {**results, **err.partial}
                if store is not None:  # the record says why the chain's draws end where they do
                    for c in err.chains:
                        store.mark_diverged(c, {"step": err.step, "message": str(err)})
                if not plan.divergence.warn:
                    raise
                warnings.warn(str(err), stacklevel=3)
                diverged += err.chains
                dropped += [c for c in unit if c not in err.chains]  # stopped with their group
            finally:
                if store is not None:
                    store.unlock()
    except DivergenceError as err:
        err.partial = {c: v for c, v in err.partial.items() if c in plan.chains.ids}
        raise
    if finished:
        which = "every chain" if len(finished) == len(plan.chains.ids) else f"chain(s) {finished}"
        _say(
            f"bnnkit: {which} of {store.root} had already finished; their stored draws are used as they are."
        )
    return results, diverged, dropped


def _chain_ids(chains: Sequence[int] | None, num_chains: int) -> list[int]:
    if chains is None:
        return list(range(num_chains))
    ids = [int(c) for c in chains]
    if not ids or len(set(ids)) != len(ids) or any(not 0 <= c < num_chains for c in ids):
        raise BnnkitError(
            f"chains must be distinct chain indices in [0, num_chains={num_chains}), got {list(chains)!r}."
        )
    return ids


def _read_stop(store, home: int) -> dict | None:
    if store is None:
        return None
    p = store.chain_dir(home) / "stop.json"
    return json.loads(p.read_text()) if p.exists() else None


def _run_unit(
    kernel, target, posterior, batches, fresh_batches, unit: list[int], cfg: _Settings, store
) -> dict[int, tuple[Tensor, dict[str, Tensor]]]:
    """Run one chain, or (``cfg.vectorized``) the chains of ``unit`` as one stacked state."""
    fit_steps = getattr(kernel, "fit_steps", 0)
    pre = max(cfg.num_warmup, fit_steps)  # steps before the first kept draw: warm-up, or a VI fit
    adapt = kernel.adaptation if cfg.num_warmup > 0 else None
    width = len(unit) if cfg.vectorized else None
    keep_pos: list[Tensor] = []  # kept since the last chunk
    keep_info: list[Any] = []

    def pending() -> tuple[Tensor, dict[str, Tensor]] | None:
        return _stack_chunk(keep_pos, keep_info, width) if keep_pos else None

    with UnitRun(kernel, target, posterior, batches, fresh_batches, unit, cfg, store) as run:
        bar = _StepBar(run.bar, cfg.num_warmup, fit_steps)
        it = run.start
        while run.running:
            run.state, info = kernel.step(run.state, batches.next(run.gen), run.gen)
            run.check_step(info, it, pending)
            if it < cfg.num_warmup and adapt is not None:
                run.astate, run.state = _adapt_step(adapt, run.astate, run.state, info, it, cfg.num_warmup)
            collect = getattr(info, "collect", None)
            if it >= cfg.num_warmup and (collect is None or bool(collect)):
                run.n_collectable += 1
                if run.n_collectable % cfg.thin == 0:
                    keep_pos.append(run.state.position.detach().clone())
                    keep_info.append(info)
                    run.n_kept += 1
            ap = getattr(info, "accept_prob", None)
            if ap is not None:
                bar.accepted(ap)
                if it >= pre:  # warm-up may reject while it adapts; sampling that accepts nothing is stuck
                    step_size = getattr(run.state, "step_size", None)
                    run.watch.update(ap, getattr(info, "is_accepted", None), step_size)
            if len(keep_pos) == cfg.chunk_size or (run.n_kept == cfg.num_samples and keep_pos):
                chunk = pending()
                keep_pos, keep_info = [], []
                run.chunk_done(chunk, it + 1)
            elif store is not None and it < pre and ((it + 1) % cfg.chunk_size == 0 or it == pre - 1):
                run.checkpoint(it + 1)
            bar.step(it, run.total, run.state, info, run.n_kept == cfg.num_samples)
            it += 1
    return run.finish()


class _StepBar:
    """The step-at-a-time loop's progress bar (None: no bar): the phase, the mean acceptance
    rate, the step size and a variational fit's objective, refreshed at most every 0.25 s."""

    def __init__(self, bar: Any, num_warmup: int, fit_steps: int):
        self.bar, self.num_warmup, self.fit_steps = bar, num_warmup, fit_steps
        self.acc_sum, self.acc_n, self.last_refresh = 0.0, 0, 0.0

    def accepted(self, ap: Tensor) -> None:
        self.acc_sum += float(ap.mean()) if ap.ndim else float(ap)
        self.acc_n += 1

    def step(self, it: int, total: int, state: Any, info: Any, finished: bool) -> None:
        if self.bar is None:
            return
        if it < total:
            self.bar.update(1)
        now = time.monotonic()
        if now - self.last_refresh <= 0.25 and not finished:
            return
        self.last_refresh = now
        phase = "warmup" if it < self.num_warmup else "fit" if it < self.fit_steps else "sampling"
        post = {"phase": phase}
        elbo = getattr(info, "elbo", None)
        if isinstance(elbo, Tensor):
            post["elbo"] = f"{float(elbo.mean()):.4g}"
        if self.acc_n:
            post["acc"] = f"{self.acc_sum / self.acc_n:.2f}"
        eps = getattr(state, "step_size", None)
        if eps is not None:
            post["step"] = f"{float(eps.mean()) if eps.ndim else float(eps):.3g}"
        self.bar.set_postfix(post, refresh=False)
