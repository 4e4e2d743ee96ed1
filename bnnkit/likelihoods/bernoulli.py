"""Bernoulli likelihood on logits (binary classification)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..core.errors import BnnkitError
from .base import Likelihood
from .gaussian import _match


class Bernoulli(Likelihood):
    """``y ~ Bernoulli(sigmoid(f(x)))`` with targets in {0, 1}."""

    kind = "bernoulli"

    def log_prob(self, output: Tensor, target: Tensor, extra: dict[str, Tensor]) -> Tensor:
        logits = _match(output, target)
        return -F.binary_cross_entropy_with_logits(logits, target.to(logits.dtype), reduction="sum")

    per_row = True

    def log_prob_rows(self, output: Tensor, target: Tensor, extra: dict[str, Tensor]) -> Tensor:
        logits = _match(output, target)
        ll = -F.binary_cross_entropy_with_logits(logits, target.to(logits.dtype), reduction="none")
        return ll.flatten(1).sum(1) if ll.ndim > 1 else ll

    def log_prob_upper_bound(self, target: Tensor) -> Tensor | None:
        return torch.tensor(0.0)

    def check(self, output: Tensor, target: Tensor) -> None:
        super().check(output, target)
        _match(output, target)
        bad = (target != 0) & (target != 1)
        if bad.any():
            raise BnnkitError(
                f"Bernoulli targets must be 0 or 1; {int(bad.sum())} targets are not "
                f"(e.g. {target[bad][:3].tolist()}). Encode the two classes as 0/1."
            )
