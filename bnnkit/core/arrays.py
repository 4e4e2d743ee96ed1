"""Array-likes (NumPy arrays, pandas columns, nested lists of numbers) as tensors, with one message
for what cannot be converted: the one converter every public door calls."""

from __future__ import annotations

import torch
from torch import Tensor

from .errors import BnnkitError


def to_tensor(value: object, name: str) -> Tensor:
    """``value`` as a tensor (a tensor is returned as it is); a string, or anything that is not an
    array of numbers, is refused naming ``name`` and the type given."""
    if isinstance(value, Tensor):
        return value
    array_like = hasattr(value, "__array__") or hasattr(value, "to_numpy") or isinstance(value, (list, tuple))
    if isinstance(value, (str, bytes)) or not (array_like or isinstance(value, (int, float))):
        raise BnnkitError(
            f"{name} must be a torch.Tensor or a NumPy array with one row per example, got {type(value).__name__}."
        )
    if hasattr(value, "to_numpy"):  # pandas Series / DataFrame
        value = value.to_numpy()
    try:
        return torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError) as err:
        raise BnnkitError(
            f"{name} must be a torch.Tensor or a NumPy array of numbers; {type(value).__name__} could not be "
            f"converted ({err})."
        ) from err
