"""One driver for every algorithm: warm-up, thinning, chains, progress, streaming, resume.

``sample(algorithm, posterior, data, ...)`` builds the algorithm against the posterior's flat
:class:`~bnnkit.core.target.Target`, runs ``num_warmup`` adapted steps and then
``num_samples * thin`` steps per chain, keeping every ``thin``-th state.  Chain ``c`` draws all
its randomness from its own ``torch.Generator`` seeded from ``(seed, c)``, so the same seed gives
the same chains, whatever else the process does.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor

from .errors import BnnkitError, check_int_at_least
from .posterior import Posterior
from .random import make_generator
from .samples import Samples
from .storage import RunStore
from .target import Target, as_target
from .types import Algorithm, Batch, LogDensityFn

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


def _batch_source(data: Any) -> Any:
    if hasattr(data, "next") and hasattr(data, "state_dict"):
        return data  # a minibatch stream (SG-MCMC)
    return FullBatch(data)


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
) -> Samples:
    """Run ``algorithm`` on ``posterior`` and return its draws.

    Args:
        algorithm: hyperparameters of a sampler, e.g. ``bnnkit.samplers.HMC(step_size=0.01)``.
        posterior: a :class:`~bnnkit.Posterior`, or any log density ``f(params: dict, batch)``
            (then ``init`` must be a dict of initial parameters).
        data: the batch passed to the log density: ``(inputs, targets)`` for a posterior.
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
        chunk_size: draws per file (and per checkpoint) when streaming.
        validate: check the data against the model before sampling.
        compile: compile the log-density gradient with ``torch.compile`` (see
            :meth:`~bnnkit.core.target.Target.compiled`): a few seconds up front, then steps
            about twice as fast at BNN-benchmark sizes.  Draws agree with an eager run to float
            rounding, not bit for bit, so a resumed run must use the same setting.
    """
    check_int_at_least("num_samples", num_samples, 1)
    check_int_at_least("num_warmup", num_warmup, 0)
    check_int_at_least("thin", thin, 1)
    check_int_at_least("num_chains", num_chains, 1)
    check_int_at_least("chunk_size", chunk_size, 1)

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

    if compile:
        target = target.compiled()
    kernel = algorithm.build(target)
    batches = _batch_source(data)
    # Every chain starts the stream afresh (its own shuffles come from its own generator), so a
    # chain's draws do not depend on which chains, or earlier runs, used the stream before it.
    initial = getattr(batches, "initial_state", None)
    fresh_batches = initial() if initial is not None else batches.state_dict()
    config = {
        "algorithm": {"name": algorithm.name, **algorithm.config()},
        "model": model_config,
        "num_samples": num_samples,
        "num_warmup": num_warmup,
        "thin": thin,
        "num_chains": num_chains,
        "seed": seed,
        "init": init if isinstance(init, str) else type(init).__name__,
        "chunk_size": chunk_size,
        "compile": bool(compile),
    }
    store = RunStore(output, config) if output is not None else None

    all_pos: list[Tensor] = []
    all_stats: list[dict[str, Tensor]] = []
    for chain in range(num_chains):
        if store is not None and store.is_done(chain):
            continue
        pos, stats = _run_chain(
            kernel,
            target,
            posterior,
            batches,
            fresh_batches,
            chain,
            init,
            seed,
            num_warmup,
            num_samples,
            thin,
            progress,
            store,
            chunk_size,
            num_chains,
            float(getattr(algorithm, "sampling_fraction", 1.0)),
        )
        all_pos.append(pos)
        all_stats.append(stats)

    if store is not None:
        read = [store.read_chain(c) for c in range(num_chains)]
        all_pos = [r[0] for r in read]
        all_stats = [r[1] for r in read]
    positions = torch.stack(all_pos)
    stats = {k: torch.stack([s[k] for s in all_stats]) for k in all_stats[0]}
    samples = Samples(positions, stats, target.view, config)
    if samples.log_weights is not None:
        from ..diagnostics import warn_if_degenerate

        warn_if_degenerate(samples.log_weights)
    return samples


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


def _run_chain(
    kernel,
    target,
    posterior,
    batches,
    fresh_batches,
    chain,
    init,
    seed,
    num_warmup,
    num_samples,
    thin,
    progress,
    store,
    chunk_size,
    num_chains,
    sampling_fraction,
) -> tuple[Tensor, dict[str, Tensor]]:
    # Cyclical SG-MCMC keeps draws only in its sampling stages: estimate the steps needed.
    fraction = sampling_fraction
    total = num_warmup + math.ceil(num_samples * thin / fraction)
    gen = make_generator(seed, chain)
    ckpt = store.load_checkpoint(chain) if store is not None else None
    adapt = kernel.adaptation if num_warmup > 0 else None
    if ckpt is not None:
        state = ckpt["state_type"](**ckpt["state"])
        astate = ckpt["adapt_type"](**ckpt["adapt"]) if ckpt["adapt"] is not None else None
        gen.set_state(ckpt["generator"])
        batches.load_state_dict(ckpt["batches"])
        start, num_chunks = ckpt["iteration"], ckpt["num_chunks"]
        n_collectable, n_kept = ckpt["n_collectable"], ckpt["n_kept"]
    else:
        batches.load_state_dict(fresh_batches)
        x0 = _initial_position(target, posterior, init, chain, gen)
        state = kernel.init(x0, batches.next(gen) if not isinstance(batches, FullBatch) else batches.data)
        astate = adapt.init(state, num_warmup) if adapt is not None else None
        start, num_chunks, n_collectable, n_kept = 0, 0, 0, 0

    keep_pos: list[Tensor] = []
    keep_info: list[Any] = []
    kept_in_memory: list[tuple[Tensor, dict[str, Tensor]]] = []
    bar = _progress_bar(total, chain, num_chains, start) if progress else None
    acc_sum, acc_n, last_refresh = 0.0, 0, 0.0

    def checkpoint(next_iteration: int) -> None:
        store.save_checkpoint(
            chain,
            {
                "state": state._asdict(),
                "state_type": type(state),
                "adapt": astate._asdict() if astate is not None else None,
                "adapt_type": type(astate) if astate is not None else None,
                "generator": gen.get_state(),
                "batches": batches.state_dict(),
                "iteration": next_iteration,
                "num_chunks": num_chunks,
                "n_collectable": n_collectable,
                "n_kept": n_kept,
            },
        )

    try:
        it = start
        while n_kept < num_samples:
            batch = batches.next(gen)
            state, info = kernel.step(state, batch, gen)
            if it < num_warmup and adapt is not None:
                astate, state = adapt.update(astate, state, info)
                if it == num_warmup - 1:
                    state = adapt.finalize(astate, state)
            collect = getattr(info, "collect", None)
            if it >= num_warmup and (collect is None or bool(collect)):
                n_collectable += 1
                if n_collectable % thin == 0:
                    keep_pos.append(state.position.detach().clone())
                    keep_info.append(info)
                    n_kept += 1
            ap = getattr(info, "accept_prob", None)
            if ap is not None:
                acc_sum += float(ap)
                acc_n += 1
            if len(keep_pos) == chunk_size or (n_kept == num_samples and keep_pos):
                chunk = _stack_chunk(keep_pos, keep_info)
                keep_pos, keep_info = [], []
                if store is not None:
                    store.write_chunk(chain, num_chunks, *chunk)
                    num_chunks += 1
                    checkpoint(it + 1)
                else:
                    kept_in_memory.append(chunk)
            elif (
                store is not None and it < num_warmup and ((it + 1) % chunk_size == 0 or it == num_warmup - 1)
            ):
                checkpoint(it + 1)
            if bar is not None:
                if it < total:
                    bar.update(1)
                now = time.monotonic()
                if now - last_refresh > 0.25 or n_kept == num_samples:
                    last_refresh = now
                    post = {"phase": "warmup" if it < num_warmup else "sampling"}
                    if acc_n:
                        post["acc"] = f"{acc_sum / acc_n:.2f}"
                    eps = getattr(state, "step_size", None)
                    if eps is not None:
                        post["step"] = f"{float(eps):.3g}"
                    bar.set_postfix(post, refresh=False)
            it += 1
    finally:
        if bar is not None:
            bar.close()

    if store is not None:
        store.mark_done(chain)
        return torch.empty(0), {}
    positions = torch.cat([c[0] for c in kept_in_memory])
    stats = {k: torch.cat([c[1][k] for c in kept_in_memory]) for k in kept_in_memory[0][1]}
    return positions, stats


def _stack_chunk(positions: list[Tensor], infos: list[Any]) -> tuple[Tensor, dict[str, Tensor]]:
    stats: dict[str, Tensor] = {}
    for name in infos[0]._fields:
        vals = [getattr(i, name) for i in infos]
        if all(isinstance(v, Tensor) and v.numel() == 1 for v in vals):
            stats[name] = torch.stack([v.detach().reshape(()) for v in vals])
    return torch.stack(positions), stats


def _progress_bar(total: int, chain: int, num_chains: int, start: int):
    from tqdm.auto import tqdm

    return tqdm(
        total=total,
        initial=start,
        desc=f"chain {chain + 1}/{num_chains}",
        leave=True,
        mininterval=0.25,
        dynamic_ncols=True,
    )
