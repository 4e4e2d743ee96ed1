"""Predictions of a :class:`~bnnkit.api.Fit` in the user's units.

The network was fitted to standardised targets ``y' = (y - m) / s``; a regression predictive is
moved back as ``mean = m + s mean'``, ``var = s^2 var'``, ``log p(y) = log p'(y') - log s``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..predict.metrics import accuracy, brier_score, expected_calibration_error, rmse
from .scaling import Scaling


class RegressionPrediction:
    """Predictive mean, spread, intervals and log density at some inputs, in the targets' units.

    ``epistemic_variance`` is the spread of the posterior's functions, ``aleatoric_variance`` the
    noise; ``variance`` is their sum.
    """

    def __init__(self, base: Any, scaling: Scaling):
        self.base, self.scaling = base, scaling
        self._s2 = (scaling.y_std or 1.0) ** 2

    @property
    def mean(self) -> Tensor:
        return self.scaling.outputs(self.base.mean)

    @property
    def epistemic_variance(self) -> Tensor:
        return self.base.epistemic_variance * self._s2

    @property
    def aleatoric_variance(self) -> Tensor:
        return self.base.aleatoric_variance * self._s2

    @property
    def variance(self) -> Tensor:
        return self.base.variance * self._s2

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def interval(self, level: float = 0.95) -> tuple[Tensor, Tensor]:
        """The central ``level`` interval of a Gaussian with the predictive's mean and variance."""
        lo, hi = self.base.interval(level)
        return self.scaling.outputs(lo), self.scaling.outputs(hi)

    def log_prob(self, y: Tensor) -> Tensor:
        """Log predictive density of each target (in the targets' units)."""
        y = torch.as_tensor(y).to(self.base.mean.dtype)
        return self.base.log_prob(self.scaling.targets(y)) - self.scaling.log_y_std

    def nll(self, y: Tensor) -> float:
        return float(-self.log_prob(y).mean())

    def metrics(self, y: Tensor, level: float = 0.95) -> dict[str, float]:
        """RMSE, NLL, the share of targets inside the central ``level`` interval, and its mean width."""
        y = torch.as_tensor(y).to(self.base.mean.dtype).reshape(self.mean.shape)
        lo, hi = self.interval(level)
        return {
            "rmse": rmse(self.mean, y),
            "nll": self.nll(y),
            f"coverage_{round(level * 100)}": float(((y >= lo) & (y <= hi)).double().mean()),
            f"interval_width_{round(level * 100)}": float((hi - lo).mean()),
        }


class ClassificationPrediction:
    """Averaged class probabilities ``probs [N, C]`` (C = 2 for a Bernoulli likelihood)."""

    def __init__(self, base: Any):
        self.base = base

    @property
    def probs(self) -> Tensor:
        return self.base.probs

    @property
    def mean(self) -> Tensor:
        return self.base.probs

    def predicted_class(self) -> Tensor:
        return self.probs.argmax(-1)

    def entropy(self) -> Tensor:
        """Predictive entropy per row (nats): high where the posterior is unsure."""
        p = self.probs.clamp_min(1e-40)
        return -(self.probs * p.log()).sum(-1)

    def nll(self, y: Tensor) -> float:
        y = torch.as_tensor(y).long().reshape(-1)
        p = self.probs.gather(-1, y.reshape(-1, 1)).squeeze(-1)
        return float(-torch.log(p.clamp_min(1e-40)).mean())

    def metrics(self, y: Tensor, num_bins: int = 15) -> dict[str, float]:
        """Accuracy, error, NLL, expected calibration error (``num_bins`` bins) and Brier score."""
        y = torch.as_tensor(y).long().reshape(-1)
        acc = accuracy(self.probs, y)
        ece, _ = expected_calibration_error(self.probs, y, num_bins)
        return {
            "accuracy": acc,
            "error": 1 - acc,
            "nll": self.nll(y),
            "ece": ece,
            "brier": brier_score(self.probs, y),
        }
