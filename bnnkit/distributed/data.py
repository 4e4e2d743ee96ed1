"""Sharded minibatch streams: each rank holds part of the data, all ranks walk one global sequence."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least
from ..core.types import Batch
from ..data.minibatch import EpochStream, check_batch_size, row_count


class ShardBatch(tuple):
    """This rank's rows of a global minibatch, as a tuple ``(inputs, targets, ...)``.

    ``global_rows`` is the number of rows of the whole minibatch over all ranks (``M``), which
    the data-parallel posterior uses for the ``N / M`` scale without a collective.
    """

    global_rows: int

    def __new__(cls, tensors: tuple[Tensor, ...], global_rows: int) -> ShardBatch:
        obj = super().__new__(cls, tensors)
        obj.global_rows = int(global_rows)
        return obj

    def __getnewargs__(self) -> tuple[Any, ...]:  # pickling keeps global_rows
        return (tuple(self), self.global_rows)


def _rank_world(rank: int | None, world_size: int | None) -> tuple[int, int]:
    if rank is None or world_size is None:
        import torch.distributed as dist

        from .launch import require_initialized

        require_initialized("sharding the data by rank")
        rank = dist.get_rank() if rank is None else rank
        world_size = dist.get_world_size() if world_size is None else world_size
    check_int_at_least("world_size", world_size, 1)
    if not isinstance(rank, int) or not 0 <= rank < world_size:
        raise BnnkitError(f"rank must be an integer in [0, world_size={world_size}), got {rank!r}.")
    return rank, world_size


def shard_range(num_data: int, rank: int | None = None, world_size: int | None = None) -> range:
    """Rows ``[start, stop)`` of ``num_data`` held by ``rank``: contiguous shards whose sizes differ
    by at most one.  ``rank``/``world_size`` default to the initialised job's."""
    check_int_at_least("num_data", num_data, 1)
    rank, world_size = _rank_world(rank, world_size)
    return range(rank * num_data // world_size, (rank + 1) * num_data // world_size)


class ShardedMinibatches(EpochStream):
    """The global minibatch sequence of :class:`bnnkit.data.Minibatches`, restricted to one shard.

    Every rank draws the same permutation of all ``N = num_data`` rows from the chain's generator,
    exactly as ``Minibatches(x, y, batch_size=M)`` on the full data does, and keeps the rows of
    each global minibatch that lie in its shard ``[shard_start, shard_start + len(shard))``.
    Over all ranks the minibatches are therefore those of the single-process run, and the
    stream's state (permutation and position) is the same on every rank, so checkpoints resume.

    A rank's part of a minibatch can be empty (e.g. with many ranks and small batches); it still
    takes part in the gradient all-reduce of :func:`~bnnkit.distributed.data_parallel`.

    Args:
        *tensors: this rank's rows, e.g. ``x_shard, y_shard`` (same number of rows, may be 0).
        num_data: ``N``, the rows of the full data set over all ranks.
        shard_start: index of this shard's first row in the full data set.
        batch_size: ``M``, rows of a global minibatch (``1 <= M <= N``).
        shuffle, drop_last: as for :class:`~bnnkit.data.Minibatches`.

    Build it from the full tensors with :meth:`from_full` (each rank keeps only its slice), or
    load just this rank's rows ``shard_range(N)`` from disk and pass them here.
    """

    def __init__(
        self,
        *tensors: Tensor,
        num_data: int,
        shard_start: int,
        batch_size: int,
        shuffle: bool = True,
        drop_last: bool = False,
    ):
        n_local = row_count("ShardedMinibatches", "x_shard, y_shard, ...", tensors, "tensors of a shard")
        check_int_at_least("num_data", num_data, 1)
        check_int_at_least("shard_start", shard_start, 0)
        if shard_start + n_local > num_data:
            raise BnnkitError(
                f"the shard holds rows [{shard_start}, {shard_start + n_local}) but num_data={num_data}; "
                "num_data must be the size of the full data set over all ranks."
            )
        check_batch_size(batch_size, num_data)
        self.shard_start = shard_start
        self.shard_stop = shard_start + n_local
        # The same index draws as Minibatches on the full data (tested against it).
        self._keep(tensors, num_data, batch_size, shuffle, drop_last)

    @classmethod
    def from_full(
        cls,
        *tensors: Tensor,
        batch_size: int,
        rank: int | None = None,
        world_size: int | None = None,
        **kwargs: Any,
    ) -> ShardedMinibatches:
        """This rank's contiguous shard (:func:`shard_range`) of the full ``tensors``."""
        if not tensors or not isinstance(tensors[0], Tensor) or tensors[0].ndim == 0:
            raise BnnkitError(
                "ShardedMinibatches.from_full needs the full data tensors, e.g. from_full(x, y, ...)."
            )
        rows = shard_range(int(tensors[0].shape[0]), rank, world_size)
        shard = tuple(t[rows.start : rows.stop] for t in tensors)
        return cls(
            *shard, num_data=int(tensors[0].shape[0]), shard_start=rows.start, batch_size=batch_size, **kwargs
        )

    @property
    def shard_size(self) -> int:
        return self.shard_stop - self.shard_start

    @property
    def batches_per_epoch(self) -> int:
        n, m = self.num_data, self.batch_size
        return n // m if self.drop_last else -(-n // m)

    def _local(self, idx: Tensor) -> ShardBatch:
        keep = (idx >= self.shard_start) & (idx < self.shard_stop)
        local = idx[keep] - self.shard_start
        dev = self.tensors[0].device
        local = local.to(dev) if local.device != dev else local
        return ShardBatch(tuple(t[local] for t in self.tensors), idx.numel())

    def next(self, gen: torch.Generator) -> Batch:
        if self._full:
            return ShardBatch(self.tensors, self.num_data)
        return self._local(self.indices.next(gen))

    def check(self, posterior: Any) -> None:
        num_data = getattr(posterior, "num_data", None)
        if num_data != self.num_data:
            raise BnnkitError(
                f"the posterior has num_data={num_data} but the sharded stream is over {self.num_data} rows in "
                f"all; pass num_data={self.num_data} (the full data set's size, not the shard's) to the Posterior."
            )
        if self.shard_size > 0 and hasattr(posterior, "check_data"):
            k = min(self.shard_size, self.batch_size)
            posterior.check_data(tuple(t[:k] for t in self.tensors))
