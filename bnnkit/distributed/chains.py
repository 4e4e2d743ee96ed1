"""Chain-parallel sampling: the chains of one run spread over the ranks of a job."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from ..core.errors import BnnkitError, check_int_at_least, check_positive
from ..core.samples import Samples
from .launch import DistributedError, collective, coordination_group, group_timeout_s, require_initialized


def chains_of_rank(num_chains: int, rank: int, world_size: int) -> list[int]:
    """The chain indices rank ``rank`` runs: ``rank, rank + world_size, ...``."""
    return list(range(rank, num_chains, world_size))


def chain_parallel_sample(
    algorithm: Any,
    posterior: Any,
    data: Any = None,
    *,
    num_chains: int,
    output: str | None = None,
    gather: str = "auto",
    all_ranks: bool = False,
    group: Any = None,
    wait_timeout_s: float | None = None,
    **sample_kwargs: Any,
) -> Samples | None:
    """Run the ``num_chains`` chains of one ``bnnkit.sample`` call spread over the ranks.

    Rank ``r`` of ``W`` runs chains ``r, r + W, ...`` with ``bnnkit.sample(..., chains=...)``, so
    each chain keeps the seed it has in a single-process run and the draws equal the
    single-process ``bnnkit.sample(algorithm, posterior, data, num_chains=num_chains, ...)``.
    Every rank calls this with the same arguments (the data can be all of it: chains do not
    split the data).

    Args:
        algorithm, posterior, data: as for :func:`bnnkit.sample`.
        num_chains: chains in all (at least the number of ranks).
        output: a directory all ranks stream their chains to (a shared file system when the
            ranks are on several machines); an interrupted job resumes there as usual.
        gather: how rank 0 gets the other ranks' draws: ``"memory"`` (sent over the process
            group), ``"files"`` (read from ``output`` after all ranks finished, lazily with
            ``bnnkit.load_samples``: needs ``output`` on a file system every rank writes to) or
            ``"auto"`` (``"files"`` when ``output`` is given, else ``"memory"``).
        all_ranks: return the merged draws on every rank, not only on rank 0.
        group: the process group (default: the whole job).
        wait_timeout_s: how long a rank that has finished its chains waits for the others
            before the job fails; default: the group's timeout plus twice this rank's own
            sampling time (ranks differ by at most one chain).
        **sample_kwargs: the other arguments of :func:`bnnkit.sample` (``num_samples``,
            ``num_warmup``, ``thin``, ``seed``, ``init``, ``progress``, ``chain_method``, ...).

    Returns:
        The :class:`~bnnkit.Samples` of all chains, in chain order, on rank 0 (on every rank with
        ``all_ranks=True``); ``None`` on the other ranks.
    """
    from ..core.driver import sample

    require_initialized("chain_parallel_sample")
    check_int_at_least("num_chains", num_chains, 1)
    if "chains" in sample_kwargs:
        raise BnnkitError("chain_parallel_sample chooses each rank's chains itself; do not pass chains=.")
    gather = _gather_mode(gather, output)
    if wait_timeout_s is not None:
        check_positive("wait_timeout_s", wait_timeout_s)
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    if num_chains < world:
        raise BnnkitError(
            f"num_chains={num_chains} is less than the {world} ranks: some ranks would have no chain. Use at "
            f"least {world} chains, or fewer ranks (torchrun --nproc_per_node)."
        )
    coord = coordination_group(group)
    mine = chains_of_rank(num_chains, rank, world)
    if output is not None and rank != 0:
        # Rank 0 creates the run directory (its config.json) before any rank adds chains to it.
        _wait_for(Path(output) / "config.json", group_timeout_s(group), rank, world)

    t0 = time.monotonic()
    local = sample(
        algorithm, posterior, data, num_chains=num_chains, chains=mine, output=output, **sample_kwargs
    )
    elapsed = time.monotonic() - t0

    if world > 1:
        _wait_for_ranks(coord, group, wait_timeout_s, elapsed)
    if gather == "memory":
        return _gather_memory(local, mine, num_chains, rank, world, all_ranks, coord)
    if not (rank == 0 or all_ranks):
        return None
    from .. import load_samples

    return load_samples(output)


def _gather_mode(gather: str, output: str | None) -> str:
    """``"memory"`` or ``"files"``: ``gather`` checked, ``"auto"`` resolved."""
    if gather == "auto":
        gather = "files" if output is not None else "memory"
    if gather not in ("memory", "files"):
        raise BnnkitError(f"gather must be 'auto', 'memory' or 'files', got {gather!r}.")
    if gather == "files" and output is None:
        raise BnnkitError("gather='files' reads the draws from output=; pass an output directory.")
    return gather


def _wait_for_ranks(coord: Any, group: Any, wait_timeout_s: float | None, elapsed: float) -> None:
    """Wait for every rank to finish its chains: ``wait_timeout_s``, or by default the group's
    timeout plus twice this rank's own sampling time ``elapsed``."""
    timeout = wait_timeout_s
    if timeout is None:
        base = group_timeout_s(group)
        timeout = (base if base == base else 1800.0) + 2.0 * elapsed
    collective(
        lambda: dist.monitored_barrier(coord, timeout=timedelta(seconds=timeout), wait_all_ranks=True),
        f"waiting for the other ranks' chains (wait_timeout_s={timeout:g})",
        coord,
    )


def _gather_memory(
    local: Samples, mine: list[int], num_chains: int, rank: int, world: int, all_ranks: bool, coord: Any
) -> Samples | None:
    payload = (mine, local.positions, dict(local.stats))
    if world == 1:
        parts = [payload]
    elif all_ranks:
        parts = [None] * world
        collective(lambda: dist.all_gather_object(parts, payload, group=coord), "gathering the draws", coord)
    else:
        parts = [None] * world if rank == 0 else None
        dst = dist.get_global_rank(coord, 0) if coord is not None else 0
        collective(
            lambda: dist.gather_object(payload, parts, dst=dst, group=coord), "gathering the draws", coord
        )
        if rank != 0:
            return None
    by_chain: dict[int, tuple[torch.Tensor, dict[str, torch.Tensor]]] = {}
    for ids, pos, stats in parts:
        for i, c in enumerate(ids):
            by_chain[c] = (pos[i], {k: v[i] for k, v in stats.items()})
    order = range(num_chains)
    positions = torch.stack([by_chain[c][0] for c in order])
    stats = {k: torch.stack([by_chain[c][1][k] for c in order]) for k in by_chain[0][1]}
    config = {k: v for k, v in local.config.items() if k != "chains"}
    return Samples(positions, stats, local.view, config)


def _wait_for(path: Path, timeout_s: float, rank: int, world: int) -> None:
    limit = timeout_s if timeout_s == timeout_s else 1800.0
    deadline = time.monotonic() + limit
    while not path.exists():
        if time.monotonic() > deadline:
            raise DistributedError(
                f"rank {rank} of {world}: rank 0 did not create {str(path)!r} within {limit:g} s; it has most "
                "likely failed (look for its error in the job's output)."
            )
        time.sleep(0.05)
