"""Variational inference and its baselines: Bayes by Backprop (mean-field Gaussian) with
reparameterisation, local reparameterisation and flipout estimators; deep and anchored ensembles;
MC dropout; functional VI (FBNN, with the spectral Stein gradient estimator); Bayesian layers (local reparameterisation) for models built from them."""

from .bbb import BayesByBackprop, VIResult
from .dropout import MCDropout, MCDropoutResult
from .ensemble import DeepEnsemble
from .fbnn import FBNN
from .kl import gaussian_kl, mean_field_kl, monte_carlo_kl
from .layers import (
    BayesianConv2d,
    BayesianLayer,
    BayesianLinear,
    elbo_loss,
    fit_bayesian_layers,
    kl_divergence,
    predict_bayesian_layers,
    set_generator,
)
from .meanfield import MeanFieldGaussian
from .ssge import ssge_score

__all__ = [
    "BayesByBackprop",
    "VIResult",
    "MeanFieldGaussian",
    "gaussian_kl",
    "mean_field_kl",
    "monte_carlo_kl",
    "DeepEnsemble",
    "FBNN",
    "ssge_score",
    "MCDropout",
    "MCDropoutResult",
    "BayesianLayer",
    "BayesianLinear",
    "BayesianConv2d",
    "kl_divergence",
    "elbo_loss",
    "fit_bayesian_layers",
    "predict_bayesian_layers",
    "set_generator",
]
