"""Pieces shared by the stochastic-gradient samplers."""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor

from ..core.errors import check_positive
from ..core.types import Batch
from .schedules import Constant


class SGInfo(NamedTuple):
    """Per-step diagnostics of an SG-MCMC step.

    ``log_density`` is the minibatch estimate of the log posterior at the position *before* the
    step (it comes for free with the gradient); ``collect`` is False in the exploration stage of
    a cyclical schedule, where the driver keeps no draw.
    """

    log_density: Tensor
    step_size: Tensor
    collect: Tensor


# Scale-adapted SGHMC's inverse mass M^-1 = (V_hat + floor)^(-1/2), step by step and fused: bounded
# where a gradient is exactly zero throughout.
VHAT_FLOOR = 1e-16

# Shared 0-d flags for ``SGInfo.collect`` (no tensor construction per step).
COLLECT = {True: torch.tensor(True), False: torch.tensor(False)}


class StepSizeTensors:
    """The step size as a 0-d tensor for the state; built once for a constant schedule."""

    def __init__(self, schedule: Any):
        self.constant = isinstance(schedule, Constant)
        self.cache: dict[torch.dtype, Tensor] = {}

    def __call__(self, eps: float, dtype: torch.dtype) -> Tensor:
        if not self.constant:
            return torch.tensor(eps, dtype=dtype)
        t = self.cache.get(dtype)
        if t is None:
            t = self.cache[dtype] = torch.tensor(eps, dtype=dtype)
        return t


def check_temperature(temperature: float) -> None:
    check_positive(
        "temperature", temperature, "T = 1 targets the posterior; T < 1 gives a cold posterior p^(1/T)."
    )


def split_batch(batch: Batch) -> tuple[Batch, Batch, int, int]:
    """Split a batch of tensors by rows into two halves (for the gradient-noise estimate)."""
    tensors = batch if isinstance(batch, tuple) else (batch,)
    m = tensors[0].shape[0]
    h = m // 2
    a = tuple(t[:h] for t in tensors)
    b = tuple(t[h:] for t in tensors)
    if not isinstance(batch, tuple):
        return a[0], b[0], h, m - h
    return a, b, h, m - h


def normal(like: Tensor, gen: torch.Generator) -> Tensor:
    return torch.randn(like.shape, generator=gen, dtype=like.dtype, device=like.device)
