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
        """Training statistics in float64, by the UCI loader's rule: mean and population sd of each
        column; a constant column gets its value as mean and sd 1 (it standardises to 0)."""
        xm = xs = None
        if inputs:
            xm, xs = _column_stats(x.double())
        ym = ys = None
        if targets:
            m, s = _column_stats(y.double().reshape(-1, 1))
            ym, ys = float(m[0]), float(s[0])
        return Scaling(xm, xs, ym, ys)

    def inputs(self, x: Tensor) -> Tensor:
        """Standardised inputs, computed in float64 and returned in ``x``'s dtype."""
        if self.x_mean is None:
            return x
        dtype = x.dtype if x.is_floating_point() else torch.get_default_dtype()
        return ((x.double() - self.x_mean.to(x.device)) / self.x_std.to(x.device)).to(dtype)

    def targets(self, y: Tensor) -> Tensor:
        if self.y_mean is None:
            return y
        dtype = y.dtype if y.is_floating_point() else torch.get_default_dtype()
        return ((y.double() - self.y_mean) / self.y_std).to(dtype)

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


def _column_stats(v: Tensor) -> tuple[Tensor, Tensor]:
    mean = v.mean(0)
    std = v.std(0, correction=0)
    constant = (v == v[:1]).all(0)
    mean = torch.where(constant, v[0], mean)
    std = torch.where(constant | (std == 0), torch.ones_like(std), std)
    return mean, std
