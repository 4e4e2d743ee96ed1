"""Standardisation done inside :func:`bnnkit.fit`: the network sees standardised inputs and
targets, the user sees every prediction and metric in the data's own units.

For a Gaussian likelihood on targets ``y' = (y - m) / s`` the predictive in the user's units is
the same mixture moved and stretched: ``mean = m + s mean'``, ``var = s^2 var'`` and
``log p(y) = log p'(y') - log s``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class Scaling:
    """Per-feature input shift and scale (``None``: inputs as given) and the target's (``None``:
    classification)."""

    x_mean: Tensor | None = None
    x_std: Tensor | None = None
    y_mean: float | None = None
    y_std: float | None = None

    @staticmethod
    def from_data(x: Tensor, y: Tensor, inputs: bool, targets: bool) -> Scaling:
        xm = xs = None
        if inputs:
            xm = x.mean(0)
            # a constant column has sd 0: leave it unscaled rather than divide by zero
            xs = torch.where(x.std(0) > 0, x.std(0), torch.ones_like(xm))
        ym = ys = None
        if targets:
            ym = float(y.double().mean())
            ys = float(y.double().std()) if y.numel() > 1 else 1.0
            ys = ys if ys > 0 else 1.0
        return Scaling(xm, xs, ym, ys)

    def inputs(self, x: Tensor) -> Tensor:
        if self.x_mean is None:
            return x
        return (x - self.x_mean.to(x)) / self.x_std.to(x)

    def targets(self, y: Tensor) -> Tensor:
        if self.y_mean is None:
            return y
        return (y - self.y_mean) / self.y_std

    def outputs(self, f: Tensor) -> Tensor:
        """Standardised predictions back in the target's units."""
        return f if self.y_mean is None else f * self.y_std + self.y_mean

    @property
    def log_y_std(self) -> float:
        return 0.0 if self.y_std is None else math.log(self.y_std)

    def state_dict(self) -> dict:
        out: dict = {}
        if self.x_mean is not None:
            out["x_mean"], out["x_std"] = self.x_mean.cpu(), self.x_std.cpu()
        if self.y_mean is not None:
            out["y_mean"], out["y_std"] = self.y_mean, self.y_std
        return out

    @staticmethod
    def from_state_dict(state: dict) -> Scaling:
        return Scaling(state.get("x_mean"), state.get("x_std"), state.get("y_mean"), state.get("y_std"))
