"""Process-group set-up from ``torchrun``'s environment, and collectives with clear errors."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from ..core.errors import BnnkitError, check_positive

DEFAULT_TIMEOUT_S = 300.0
"""How long a collective waits for the other ranks before the job fails (seconds)."""

# Timeouts of the groups this module created, for the error messages.
_TIMEOUTS: dict[Any, float] = {}
# gloo groups over the ranks of an NCCL group, for coordination (barriers with a timeout, objects).
_GLOO_GROUPS: dict[Any, Any] = {}


class DistributedError(RuntimeError):
    """A collective failed: another rank died, or stopped responding within the timeout."""


@dataclass(frozen=True)
class DistInfo:
    """Where this process stands in the job: what :func:`init_from_env` returns.

    Usable as a context manager that destroys the process group on exit::

        with bnnkit.distributed.init_from_env() as info:
            ...
    """

    rank: int
    world_size: int
    local_rank: int
    backend: str
    device: torch.device
    timeout_s: float

    @property
    def is_main(self) -> bool:
        """True on rank 0 (the rank that prints, writes reports and returns gathered draws)."""
        return self.rank == 0

    def __enter__(self) -> DistInfo:
        return self

    def __exit__(self, *exc: object) -> None:
        shutdown()


def default_backend() -> str:
    """``"nccl"`` when CUDA and NCCL are available, else ``"gloo"``."""
    if torch.cuda.is_available() and dist.is_nccl_available():
        return "nccl"
    return "gloo"


def init_from_env(backend: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> DistInfo:
    """Initialise ``torch.distributed`` from the variables ``torchrun`` sets.

    Reads ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` (set by
    ``torchrun --nproc_per_node=N script.py``).  Without them (a plain ``python script.py``) the
    process becomes a job of one rank, so a script written for ``torchrun`` also runs alone.
    Already initialised: returns the current job's description and changes nothing.

    Args:
        backend: ``"gloo"`` (CPU), ``"nccl"`` (one GPU per rank: rank ``LOCAL_RANK`` uses
            ``cuda:LOCAL_RANK``) or ``None``: NCCL when CUDA is available, else gloo.
        timeout_s: how long a collective (and the start-up rendezvous) waits for the other
            ranks.  A rank that dies closes its connections, and the others fail at once with a
            :class:`DistributedError`; a rank that hangs makes the others fail after this long.
            With NCCL the watchdog (``TORCH_NCCL_ASYNC_ERROR_HANDLING``, on by default) then
            ends the process.
    """
    if not dist.is_available():
        raise BnnkitError("this PyTorch build has no torch.distributed; install a build with it.")
    check_positive("timeout_s", timeout_s, "It is how long a collective waits for the other ranks.")
    if dist.is_initialized():
        return describe()
    backend = default_backend() if backend is None else backend.lower()
    if backend not in ("gloo", "nccl"):
        raise BnnkitError(f"backend must be 'gloo', 'nccl' or None, got {backend!r}.")
    if backend == "nccl" and not torch.cuda.is_available():
        raise BnnkitError("backend='nccl' needs CUDA GPUs; use backend='gloo' on CPUs.")
    timeout = timedelta(seconds=float(timeout_s))

    launched = "RANK" in os.environ or "WORLD_SIZE" in os.environ
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if backend == "nccl":
        if local_rank >= torch.cuda.device_count():
            raise BnnkitError(
                f"LOCAL_RANK={local_rank} but this machine has {torch.cuda.device_count()} GPU(s): NCCL needs one "
                "GPU per rank; run at most that many ranks per node (torchrun --nproc_per_node)."
            )
        torch.cuda.set_device(local_rank)
    # NCCL: bind the group to this rank's GPU (eager connection set-up, no device guessing).
    device = {"device_id": torch.device("cuda", local_rank)} if backend == "nccl" else {}
    if launched:
        missing = [v for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if v not in os.environ]
        if missing:
            raise BnnkitError(
                f"the environment sets only part of a distributed launch (missing {', '.join(missing)}); "
                "start the script with torchrun, e.g. torchrun --standalone --nproc_per_node=2 script.py."
            )
        dist.init_process_group(backend, init_method="env://", timeout=timeout, **device)
    else:
        # One rank, no rendezvous: an in-process store.
        dist.init_process_group(
            backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout, **device
        )
    _TIMEOUTS[None] = float(timeout_s)
    return describe()


def describe(group: Any = None) -> DistInfo:
    """This process's :class:`DistInfo` in an initialised job."""
    require_initialized("bnnkit.distributed.describe")
    backend = str(dist.get_backend(group))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
    return DistInfo(
        rank=dist.get_rank(group),
        world_size=dist.get_world_size(group),
        local_rank=local_rank,
        backend=backend,
        device=device,
        timeout_s=group_timeout_s(group),
    )


def shutdown() -> None:
    """Destroy the default process group (if there is one)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    _TIMEOUTS.clear()
    _GLOO_GROUPS.clear()


def require_initialized(what: str) -> None:
    if not (dist.is_available() and dist.is_initialized()):
        raise BnnkitError(
            f"{what} needs an initialised torch.distributed job: call bnnkit.distributed.init_from_env() "
            "first, and start the script with torchrun (e.g. torchrun --standalone --nproc_per_node=2 "
            "script.py) or run it as one process."
        )


def group_timeout_s(group: Any = None) -> float:
    """The collective timeout of ``group`` in seconds (as set at initialisation)."""
    if group in _TIMEOUTS:
        return _TIMEOUTS[group]
    try:  # set by someone else's init_process_group: ask the backend
        pg = group if group is not None else dist.distributed_c10d._get_default_group()
        return pg._get_backend(torch.device("cpu")).options._timeout.total_seconds()
    except Exception:  # noqa: BLE001 - only used to word an error message
        return float("nan")


def coordination_group(group: Any = None) -> Any:
    """A gloo group over the ranks of ``group`` (``group`` itself when it is gloo already).

    Barriers with their own timeout (``monitored_barrier``) and object collectives run on CPU
    through gloo, also in an NCCL job.
    """
    if str(dist.get_backend(group)) == "gloo":
        return group
    if group not in _GLOO_GROUPS:
        ranks = None if group is None else dist.get_process_group_ranks(group)
        seconds = group_timeout_s(group)
        timeout = timedelta(seconds=seconds) if seconds == seconds else None
        _GLOO_GROUPS[group] = dist.new_group(ranks=ranks, backend="gloo", timeout=timeout)
        _TIMEOUTS[_GLOO_GROUPS[group]] = seconds
    return _GLOO_GROUPS[group]


def collective(fn: Callable[[], Any], what: str, group: Any = None) -> Any:
    """Run the collective ``fn`` and turn a lost peer or a timeout into a :class:`DistributedError`."""
    try:
        return fn()
    except RuntimeError as err:
        if isinstance(err, DistributedError):
            raise
        rank, world = dist.get_rank(group), dist.get_world_size(group)
        timeout = group_timeout_s(group)
        waited = f"{timeout:g} s" if timeout == timeout else "the group's timeout"
        raise DistributedError(
            f"rank {rank} of {world}: {what} failed. Another rank has most likely failed (look for the first "
            f"error in the job's output) or stopped responding within {waited}; this rank stops too. "
            f"Cause: {type(err).__name__}: {err}"
        ) from err
