"""Laplace prior ``w_i ~ Laplace(0, b_i)``: ``log p(w) = -sum |w_i|/b_i - sum log(2 b_i)``."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from ..core.errors import check_positive
from ..core.flat import FlatView
from .base import BoundPrior, Prior, scale_vector


class LaplacePrior(Prior):
    """Sparsity-inducing Laplace prior with scale ``b`` (variance ``2 b^2``), per layer if wanted."""

    kind = "laplace"

    def __init__(self, scale: float = 1.0, scales: Mapping[str, float] | None = None):
        check_positive("prior scale", scale, "Pass a positive Laplace scale b.")
        self.scale = float(scale)
        self.scales = dict(scales or {})

    def bind(self, view: FlatView) -> BoundPrior:
        b = scale_vector(view, self.scale, self.scales)
        inv_b = 1.0 / b
        const = float(-torch.log(2 * b).sum())

        def log_prob(w: Tensor, extra: dict[str, Tensor]) -> Tensor:
            return -torch.dot(w.abs(), inv_b) + const

        def sample(gen: torch.Generator) -> Tensor:
            u = torch.rand(view.size, generator=gen, dtype=view.dtype, device=view.device) - 0.5
            return -b * torch.sign(u) * torch.log1p(-2 * u.abs())

        return BoundPrior(log_prob, sample)

    def config(self) -> dict:
        return {"kind": self.kind, "scale": self.scale, "scales": self.scales}
