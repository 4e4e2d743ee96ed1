"""Use of the posterior: predictive distributions (weighted for importance sampling) and metrics."""

from .metrics import (
    accuracy,
    brier_score,
    expected_calibration_error,
    interval_coverage,
    ood_auroc,
    predictive_entropy,
    rmse,
)
from .predictive import ClassificationPredictive, RegressionPredictive, network_outputs, predict

__all__ = [
    "predict",
    "network_outputs",
    "RegressionPredictive",
    "ClassificationPredictive",
    "rmse",
    "accuracy",
    "interval_coverage",
    "expected_calibration_error",
    "brier_score",
    "predictive_entropy",
    "ood_auroc",
]
