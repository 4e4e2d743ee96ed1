"""Variational inference and its baselines: Bayes by Backprop (mean-field Gaussian) with
reparameterisation, local reparameterisation and flipout estimators; deep and anchored ensembles;
MC dropout; functional VI (FBNN, with the spectral Stein gradient estimator); Bayesian layers (local reparameterisation) for models built from them.

Every method is a kernel on the samplers' contract (``build(target, model=posterior)`` returns
``init``/``step`` over a state of tensors: the variational parameters and Adam's moments), run by
the one driver: ``bnnkit.sample(BayesByBackprop(...), posterior, data, num_samples=S)`` fits and
then draws, with progress, ``output=`` streaming and bit-identical resume; the ``fit`` methods are
such runs (see :mod:`bnnkit.vi.kernel`)."""

from .bbb import BayesByBackprop, VIResult
from .dropout import MCDropout, MCDropoutResult
from .ensemble import DeepEnsemble
from .fbnn import FBNN
from .kernel import VIState, mean_field_kernel
from .kl import gaussian_kl, mean_field_kl, monte_carlo_kl
from .layers import (
    BayesianConv2d,
    BayesianLayer,
    BayesianLinear,
    LayersELBO,
    LayersObjective,
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
    "LayersELBO",
    "LayersObjective",
    "VIState",
    "mean_field_kernel",
    "BayesianConv2d",
    "kl_divergence",
    "elbo_loss",
    "fit_bayesian_layers",
    "predict_bayesian_layers",
    "set_generator",
]
