"""bnnkit: Bayesian neural networks in PyTorch.

Take any ``torch.nn.Module``, put a prior on it, get a posterior by sampling or variational
inference, and use it: predictive distributions, calibrated uncertainty, OOD scores.
"""

from .api import Fit, fit, load
from .core.driver import sample
from .core.flat import FlatView
from .core.posterior import Posterior
from .core.samples import Samples
from .core.storage import StoredSamples, load_samples
from .core.target import Target, as_target
from .laplace import Laplace
from .likelihoods import Bernoulli, Categorical, Gaussian
from .priors import GaussianPrior, LaplacePrior, ScaleMixturePrior
from .samplers import (
    HMC,
    NUTS,
    ImportanceSampler,
    MetropolisHastings,
    MetropolisWithinGibbs,
    RandomWalkMH,
    RejectionSampler,
)
from .sgmcmc import SGHMC, SGLD, AdaptiveSGHMC, CyclicalSGHMC, CyclicalSGLD, PreconditionedSGLD
from .sgmcmc.tune import tune

__version__ = "0.1.0"

_FUNCTIONAL = ("FunctionalPosterior", "FSGLD", "FSGHMC", "GPPrior", "MeasurementPoints")


def __getattr__(name: str):
    # The functional prior imports GPyTorch (about a second): loaded on first use only.
    if name in _FUNCTIONAL:
        from . import functional

        return getattr(functional, name)
    raise AttributeError(f"module 'bnnkit' has no attribute {name!r}")


__all__ = [
    "fit",
    "load",
    "Fit",
    "sample",
    "load_samples",
    "StoredSamples",
    "Posterior",
    "Samples",
    "Target",
    "as_target",
    "FlatView",
    "Laplace",
    "Gaussian",
    "Bernoulli",
    "Categorical",
    "GaussianPrior",
    "ScaleMixturePrior",
    "LaplacePrior",
    "HMC",
    "NUTS",
    "RandomWalkMH",
    "MetropolisHastings",
    "MetropolisWithinGibbs",
    "RejectionSampler",
    "ImportanceSampler",
    "SGLD",
    "SGHMC",
    "AdaptiveSGHMC",
    "CyclicalSGLD",
    "CyclicalSGHMC",
    "PreconditionedSGLD",
    "tune",
    *_FUNCTIONAL,
]
