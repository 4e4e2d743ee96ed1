"""Variational inference: Bayes by Backprop (mean-field Gaussian) with reparameterisation, local
reparameterisation and flipout estimators."""

from .bbb import BayesByBackprop, VIResult
from .kl import gaussian_kl, mean_field_kl, monte_carlo_kl
from .meanfield import MeanFieldGaussian

__all__ = [
    "BayesByBackprop",
    "VIResult",
    "MeanFieldGaussian",
    "gaussian_kl",
    "mean_field_kl",
    "monte_carlo_kl",
]
