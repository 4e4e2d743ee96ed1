"""Categorical likelihood on logits (multi-class classification)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..core.errors import BnnkitError
from .base import Likelihood


class Categorical(Likelihood):
    """``y ~ Categorical(softmax(f(x)))`` with integer labels in ``[0, C)``, logits ``[N, C]``."""

    kind = "categorical"

    def log_prob(self, output: Tensor, target: Tensor, extra: dict[str, Tensor]) -> Tensor:
        return -F.cross_entropy(output, target, reduction="sum")

    per_row = True

    def log_prob_rows(self, output: Tensor, target: Tensor, extra: dict[str, Tensor]) -> Tensor:
        return -F.cross_entropy(output, target, reduction="none")

    def log_prob_upper_bound(self, target: Tensor) -> Tensor | None:
        return torch.tensor(0.0)

    def check(self, output: Tensor, target: Tensor) -> None:
        super().check(output, target)
        if output.ndim != 2:
            raise BnnkitError(
                f"Categorical needs logits of shape [N, C]; the model output has shape {tuple(output.shape)}."
            )
        if target.ndim != 1 or target.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8):
            raise BnnkitError(
                f"Categorical targets must be a 1-D integer tensor of class labels; got dtype "
                f"{target.dtype} and shape {tuple(target.shape)}. Use labels.long()."
            )
        c = output.shape[1]
        bad = (target < 0) | (target >= c)
        if bad.any():
            raise BnnkitError(
                f"{int(bad.sum())} labels are outside [0, {c - 1}] for a model with {c} output logits "
                f"(e.g. {target[bad][:3].tolist()}); relabel the classes to 0..{c - 1} or widen the output layer."
            )
