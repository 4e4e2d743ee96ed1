"""Data as users hold it (tensors, NumPy arrays, pandas columns, a ``DataLoader``) turned into what
the library computes with: a pair of tensors, or a minibatch stream.

Every public function that takes data calls these, so a ``DataLoader`` or an array works wherever
a tensor does, and a wrong type gets the same clear message everywhere.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..core.arrays import to_tensor
from ..core.errors import BnnkitError


def is_loader(data: Any) -> bool:
    """Whether ``data`` is a ``torch.utils.data.DataLoader`` (or anything iterable over batches
    with a ``dataset``, as a loader is)."""
    return isinstance(data, torch.utils.data.DataLoader)


def as_tensor(value: Any, name: str, dtype: torch.dtype | None = None) -> Tensor:
    """``value`` (a tensor, NumPy array, pandas Series / DataFrame or nested list of numbers) as a
    tensor; ``dtype`` converts floating inputs (integers are kept for class labels)."""
    t = to_tensor(value, name)
    if t.dtype == torch.bool:
        t = t.to(torch.get_default_dtype() if dtype is None else dtype)
    if not (
        t.is_floating_point() or t.dtype in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)
    ):
        raise BnnkitError(f"{name} must hold real numbers, got dtype {t.dtype}.")
    if dtype is not None and t.is_floating_point() and t.dtype != dtype:
        t = t.to(dtype)
    return t


def loader_tensors(loader: Any) -> tuple[Tensor, Tensor]:
    """All the rows of a ``DataLoader`` as one ``(inputs, targets)`` pair, in the loader's order
    (for methods that need the whole data set at once: full-batch samplers, Laplace, warm starts).
    Each batch must be a pair ``(inputs, targets)``."""
    xs, ys = [], []
    for i, batch in enumerate(loader):
        if not (isinstance(batch, (tuple, list)) and len(batch) == 2):
            raise BnnkitError(
                f"batch {i} of the DataLoader is a {type(batch).__name__}, not a pair (inputs, targets); "
                "make the dataset return (x, y), e.g. torch.utils.data.TensorDataset(X, y)."
            )
        xs.append(as_tensor(batch[0], "the loader's inputs"))
        ys.append(as_tensor(batch[1], "the loader's targets"))
    if not xs:
        raise BnnkitError("the DataLoader yielded no batches; its dataset is empty.")
    return torch.cat(xs), torch.cat(ys)


def as_pair(data: Any, what: str = "data") -> tuple[Tensor, Tensor]:
    """``data`` as an ``(inputs, targets)`` pair of tensors: a pair of tensors / arrays, or a
    ``DataLoader`` (all its rows)."""
    if is_loader(data):
        return loader_tensors(data)
    if isinstance(data, (tuple, list)) and len(data) == 2:
        return as_tensor(data[0], f"{what}'s inputs"), as_tensor(data[1], f"{what}'s targets")
    raise BnnkitError(
        f"{what} must be a pair (inputs, targets) of tensors or NumPy arrays, or a torch DataLoader "
        f"yielding such pairs; got {type(data).__name__}."
    )
