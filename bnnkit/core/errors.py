"""Input validation with messages that say what is wrong and what to do."""

from __future__ import annotations

import math

import torch
from torch import Tensor


class BnnkitError(ValueError):
    """Raised for invalid user input; the message names the problem and the fix."""


class DivergenceError(BnnkitError):
    """A chain (or an optimiser) reached a non-finite state; nothing non-finite was kept.

    Attributes:
        chains: the chain indices that diverged.
        step: the step (counted from 0, warm-up included) at which it happened.
        partial: draws kept before the divergence, ``{chain: (positions [n, D], stats)}``, for runs
            kept in memory (a run with ``output`` has them on disk).
    """

    def __init__(self, message: str, chains: list[int], step: int, partial: dict | None = None):
        super().__init__(message)
        self.chains = list(chains)
        self.step = step
        self.partial = dict(partial or {})


def check_positive(name: str, value: float | Tensor, hint: str = "") -> None:
    v = float(value) if not isinstance(value, Tensor) else float(value.min())
    if not math.isfinite(v) or v <= 0:
        extra = f" {hint}" if hint else ""
        raise BnnkitError(f"{name} must be a positive finite number, got {value!r}.{extra}")


def check_int_at_least(name: str, value: int, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise BnnkitError(f"{name} must be an integer >= {minimum}, got {value!r}.")


def resolve_batch_size(batch_size: int | None, n: int) -> int:
    """``batch_size`` (``None``: all ``n`` rows), refused when it exceeds the data."""
    bs = n if batch_size is None else batch_size
    if bs > n:
        raise BnnkitError(f"batch_size {bs} exceeds the {n} rows of data; use batch_size <= {n}.")
    return bs


def check_finite_rows(name: str, tensor: Tensor) -> None:
    """Raise if ``tensor`` has NaN/inf entries, naming how many rows and the first few."""
    if not torch.is_floating_point(tensor):
        return
    bad = ~torch.isfinite(tensor)
    if bad.any():
        rows = bad.reshape(bad.shape[0], -1).any(dim=1) if bad.ndim > 0 else bad.reshape(1)
        idx = torch.nonzero(rows).flatten().tolist()
        shown = ", ".join(str(i) for i in idx[:5]) + (", ..." if len(idx) > 5 else "")
        raise BnnkitError(
            f"{name} contains NaN or inf in {len(idx)} of {rows.numel()} rows "
            f"(rows {shown}); remove or impute those rows before sampling."
        )


class StuckChainWarning(UserWarning):
    """A chain accepted no proposal for a long stretch: its draws repeat one point."""


def check_device(device: str) -> None:
    """Refuse a ``device`` that names no torch device, or CUDA where PyTorch sees none."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise BnnkitError(
            f"device must name a torch device such as 'cpu' or 'cuda', got {device!r}."
        ) from err
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise BnnkitError(f"device {device!r}: PyTorch sees no CUDA device here; use 'cpu'.")
