"""Minibatch streams for stochastic-gradient samplers.

A stream is what :func:`bnnkit.sample` accepts as ``data`` when every step should see a fresh
minibatch: an object with ``next(generator) -> batch``, ``state_dict()``/``load_state_dict()``
(so an interrupted run resumes on the same batch sequence), and optionally ``initial_state()``
(where every chain starts) and ``check(posterior)``.

The posterior scales a batch of ``M`` rows by ``N / M`` using the rows it actually receives, so
a short last batch of an epoch is weighted correctly.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least
from ..core.types import Batch


def _check_num_data(posterior: Any, n: int) -> None:
    num_data = getattr(posterior, "num_data", None)
    if num_data is None:
        raise BnnkitError(
            f"minibatch sampling needs the training-set size: build the Posterior with num_data={n} "
            "so each minibatch's log-likelihood is scaled by N/M."
        )
    if num_data != n:
        raise BnnkitError(
            f"the posterior has num_data={num_data} but the minibatch stream holds {n} rows; "
            f"pass num_data={n} (N must be the size of the data the minibatches come from)."
        )


class EpochIndices:
    """Row indices of shuffled epochs, the state every minibatch stream shares.

    Each epoch draws a permutation of ``range(num_data)`` from the chain's generator (where the
    generator lives, so a CUDA chain uses its CUDA generator) and walks through it ``batch_size``
    rows at a time.  With ``num_chains=K`` it walks K permutations at once (``[K, M]`` indices,
    all drawn in one call as the argsort of uniform noise) and drops a short last batch, so
    the K chains' batches stack.  ``state_dict()`` is the permutation and position: a checkpoint
    resumes on the same batch sequence.
    """

    def __init__(
        self,
        num_data: int,
        batch_size: int,
        shuffle: bool = True,
        drop_last: bool = False,
        num_chains: int | None = None,
        device: torch.device | None = None,
    ):
        self.num_data, self.batch_size = num_data, batch_size
        self.shuffle, self.num_chains = shuffle, num_chains
        self.device = device if device is not None else torch.device("cpu")
        self.drop_last = drop_last or num_chains is not None
        self._perm: Tensor | None = None
        self._pos = 0

    def next(self, gen: torch.Generator) -> Tensor:
        n, m, k = self.num_data, self.batch_size, self.num_chains
        if self._perm is None or self._pos >= n or (self.drop_last and self._pos + m > n):
            if not self.shuffle:
                perm = torch.arange(n, device=self.device)
                self._perm = perm if k is None else perm.expand(k, n)
            elif k is None:
                self._perm = torch.randperm(n, generator=gen, device=gen.device).to(self.device)
            else:
                u = torch.rand(k, n, generator=gen, device=gen.device)
                self._perm = torch.argsort(u, dim=1).to(self.device)
            self._pos = 0
        idx = self._perm[..., self._pos : self._pos + m]
        self._pos += m
        return idx

    def state_dict(self) -> dict:
        return {"perm": self._perm, "pos": self._pos}

    @staticmethod
    def initial_state() -> dict:
        """The state before the first batch (each chain of a run starts from it)."""
        return {"perm": None, "pos": 0}

    def load_state_dict(self, state: dict) -> None:
        self._perm, self._pos = state["perm"], state["pos"]


def row_count(owner: str, example: str, tensors: tuple[Tensor, ...], what: str = "tensors") -> int:
    """The number of rows of ``tensors``, the data arguments of ``owner`` (``example`` shows a call's
    arguments): refused unless there is at least one and every one is a tensor with a row
    dimension of that size (``what`` names them in the message)."""
    if not tensors:
        raise BnnkitError(f"{owner} needs at least one tensor, e.g. {owner}({example}).")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor) or t.ndim == 0:
            raise BnnkitError(
                f"argument {i} of {owner} must be a tensor with a row dimension, got {type(t).__name__}."
            )
    n = tensors[0].shape[0]
    if any(t.shape[0] != n for t in tensors):
        shapes = ", ".join(str(tuple(t.shape)) for t in tensors)
        raise BnnkitError(f"all {what} must have the same number of rows; got shapes {shapes}.")
    return n


def check_batch_size(batch_size: int, num_data: int) -> None:
    """A minibatch size ``1 <= batch_size <= num_data``."""
    check_int_at_least("batch_size", batch_size, 1)
    if batch_size > num_data:
        raise BnnkitError(
            f"batch_size={batch_size} is larger than the data set ({num_data} rows); use batch_size <= {num_data}."
        )


class EpochStream:
    """A minibatch stream whose whole state is its :class:`EpochIndices` (``self.indices``)."""

    indices: EpochIndices

    def _keep(
        self, tensors: tuple[Tensor, ...], num_data: int, batch_size: int, shuffle: bool, drop_last: bool
    ):
        """Keep the data and the batching of epochs over ``num_data`` rows; start the indices."""
        self.tensors = tensors
        self.num_data = num_data
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        self._full = batch_size == num_data
        self.indices = EpochIndices(num_data, batch_size, shuffle, drop_last, device=tensors[0].device)

    def state_dict(self) -> dict:
        return self.indices.state_dict()

    def initial_state(self) -> dict:
        """The state before the first batch (each chain of a run starts from it)."""
        return EpochIndices.initial_state()

    def load_state_dict(self, state: dict) -> None:
        self.indices.load_state_dict(state)


class Minibatches(EpochStream):
    """Shuffled epochs of minibatches over tensors that share their first dimension.

    Each epoch draws a permutation from the chain's generator and walks through it in batches of
    ``batch_size``; the last batch of an epoch has ``N mod batch_size`` rows unless
    ``drop_last=True``.  With ``batch_size == N`` every step gets the whole data set in its
    original order and no random numbers are drawn, so SGLD reduces exactly to unadjusted
    Langevin dynamics.

    Args:
        *tensors: e.g. ``inputs, targets``; all with the same number of rows ``N >= 1``.
        batch_size: rows per step, ``1 <= M <= N``.
        shuffle: draw a fresh permutation every epoch (else go through rows in order).
        drop_last: skip the short last batch of each epoch.
    """

    def __init__(self, *tensors: Tensor, batch_size: int, shuffle: bool = True, drop_last: bool = False):
        n = row_count("Minibatches", "x, y, batch_size=32", tensors)
        if n == 0:
            raise BnnkitError("the data set is empty (0 rows); minibatch sampling needs at least one row.")
        check_batch_size(batch_size, n)
        self._keep(tensors, n, batch_size, shuffle, drop_last)

    def per_chain(self, num_chains: int) -> ChainMinibatches:
        """This stream as ``num_chains`` chains' own minibatches (vectorised chains)."""
        return ChainMinibatches(self, num_chains)

    @property
    def batches_per_epoch(self) -> int:
        n, m = self.num_data, self.batch_size
        return n // m if self.drop_last else -(-n // m)

    def _take(self, idx: Tensor | None) -> Batch:
        out = tuple(t if idx is None else t[idx] for t in self.tensors)
        return out if len(out) > 1 else out[0]

    def next(self, gen: torch.Generator) -> Batch:
        if self._full:
            return self._take(None)
        return self._take(self.indices.next(gen))

    def check(self, posterior: Any) -> None:
        _check_num_data(posterior, self.num_data)
        if hasattr(posterior, "check_data"):
            posterior.check_data(self._take(torch.arange(min(self.num_data, self.batch_size))))

    def fingerprint(self) -> tuple[dict, Batch]:
        """What identifies the stream's data (every row, and how it is batched), and a fixed batch
        (its first ``batch_size`` rows) to evaluate the log density on; draws nothing and leaves the
        stream's state alone (a run directory stores this to refuse a resume on other data)."""
        desc = {
            "stream": "Minibatches",
            "batch_size": self.batch_size,
            "shuffle": self.shuffle,
            "drop_last": self.drop_last,
            "tensors": self.tensors,
        }
        rows = torch.arange(min(self.num_data, self.batch_size), device=self.tensors[0].device)
        return desc, self._take(rows)


class LoaderStream:
    """Adapts a ``torch.utils.data.DataLoader`` to the stream interface.

    Batches come in the loader's own order; the stream restarts the loader at the end of each
    epoch.  Resuming is exact when the loader shuffles with its own ``generator=`` (its state is
    recorded at the start of each epoch) or does not shuffle.
    """

    def __init__(self, loader: Any):
        try:
            n = len(loader.dataset)
        except TypeError as err:
            raise BnnkitError("LoaderStream needs a DataLoader over a dataset with a length.") from err
        if n == 0:
            raise BnnkitError("the DataLoader's dataset is empty; minibatch sampling needs at least one row.")
        self.loader = loader
        self.num_data = n
        self._it: Any = None
        gen = getattr(loader, "generator", None)
        # The loader generator's state at the start of the current epoch (resume replays from it).
        self._epoch_gen_state: Tensor | None = gen.get_state() if gen is not None else None
        self._index = 0
        self._initial = {"gen_state": self._epoch_gen_state, "index": 0}
        sampler = getattr(loader, "sampler", None)
        if gen is None and type(sampler).__name__ == "RandomSampler":
            warnings.warn(
                "the DataLoader shuffles with the global RNG; pass generator=torch.Generator().manual_seed(s) "
                "to the DataLoader so runs are reproducible and resumable.",
                stacklevel=2,
            )

    def _start_epoch(self) -> None:
        gen = getattr(self.loader, "generator", None)
        self._epoch_gen_state = gen.get_state() if gen is not None else None
        self._it = iter(self.loader)
        self._index = 0

    def next(self, gen: torch.Generator) -> Batch:
        if self._it is None:
            self._start_epoch()
        try:
            batch = next(self._it)
        except StopIteration:
            self._start_epoch()
            batch = next(self._it)
        self._index += 1
        return tuple(batch) if isinstance(batch, list) else batch

    def state_dict(self) -> dict:
        return {"gen_state": self._epoch_gen_state, "index": self._index}

    def initial_state(self) -> dict:
        """The loader's state when the stream was made (each chain of a run starts from it)."""
        return dict(self._initial)

    def load_state_dict(self, state: dict) -> None:
        gen = getattr(self.loader, "generator", None)
        if gen is not None and state["gen_state"] is not None:
            gen.set_state(state["gen_state"])
        self._epoch_gen_state = state["gen_state"]
        self._it = iter(self.loader)
        for _ in range(state["index"]):
            next(self._it)
        self._index = state["index"]

    def check(self, posterior: Any) -> None:
        _check_num_data(posterior, self.num_data)

    def fingerprint(self, max_items: int = 64) -> tuple[dict, Batch]:
        """What identifies the loader's data, and a fixed batch to evaluate the log density on.

        Read from the dataset by index (a ``TensorDataset``: all its tensors; otherwise its size
        and first ``max_items`` items), so the loader's generator, the global RNG and the stream's
        position are left as they are, and a loader that shuffles gives the same fingerprint every
        time.  The fixed batch is the loader's collation of the dataset's first ``batch_size`` items.
        """
        dataset = self.loader.dataset
        bs = getattr(self.loader, "batch_size", None) or 1
        desc: dict[str, Any] = {
            "stream": "LoaderStream",
            "dataset": type(dataset).__name__,
            "num_data": self.num_data,
            "batch_size": bs,
            "drop_last": bool(getattr(self.loader, "drop_last", False)),
        }
        tensors = getattr(dataset, "tensors", None)
        if isinstance(tensors, (tuple, list)) and all(isinstance(t, Tensor) for t in tensors):
            desc["tensors"] = tuple(tensors)
        else:
            desc["items"] = [dataset[i] for i in range(min(self.num_data, max_items))]
        collate = getattr(self.loader, "collate_fn", None)
        items = [dataset[i] for i in range(min(self.num_data, bs))]
        if collate is None:
            from torch.utils.data import default_collate

            collate = default_collate
        batch = collate(items)
        return desc, tuple(batch) if isinstance(batch, list) else batch


def minibatches(data: Any, batch_size: int | None = None, **kwargs: Any) -> Minibatches | LoaderStream:
    """A stream from ``(inputs, targets)`` tensors and a batch size, or from a ``DataLoader``."""
    if hasattr(data, "dataset") and hasattr(data, "__iter__"):
        return LoaderStream(data)
    if batch_size is None:
        raise BnnkitError("pass batch_size=M to draw minibatches from tensors.")
    tensors = data if isinstance(data, (tuple, list)) else (data,)
    return Minibatches(*tensors, batch_size=batch_size, **kwargs)


class ChainMinibatches(EpochStream):
    """K chains' minibatches from one :class:`Minibatches` stream, as tensors ``[K, M, ...]``.

    Used by vectorised chains (``chain_method="vectorized"``): each chain walks its own shuffled
    epochs, all K permutations drawn in one call per epoch (``argsort`` of uniform noise), so a
    step costs one gather for all chains.  A short last batch is dropped, because the stacked
    batches must have the same size for every chain (a different batch per chain is still an
    unbiased N/M-scaled estimate).
    """

    chain_batches = True

    def __init__(self, stream: Minibatches, num_chains: int):
        if not isinstance(stream, Minibatches):
            raise BnnkitError(
                f"vectorised chains need a bnnkit.Minibatches stream, got {type(stream).__name__}."
            )
        self.stream = stream
        self.num_chains = num_chains
        self.num_data = stream.num_data
        self.indices = EpochIndices(
            stream.num_data, stream.batch_size, stream.shuffle, True, num_chains, stream.tensors[0].device
        )

    def next(self, gen: torch.Generator) -> Batch:
        s, k = self.stream, self.num_chains
        if s._full:
            out = tuple(t.unsqueeze(0).expand(k, *t.shape) for t in s.tensors)
        else:
            idx = self.indices.next(gen)
            out = tuple(t[idx] for t in s.tensors)
        return out if len(out) > 1 else out[0]

    def check(self, posterior: Any) -> None:
        self.stream.check(posterior)
