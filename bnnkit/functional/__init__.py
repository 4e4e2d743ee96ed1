"""Functional priors for SG-MCMC (fSGLD / fSGHMC): a GP prior evaluated at measurement points.

:class:`GPPrior` holds a GPyTorch kernel (built by :func:`make_kernel`), pre-trains it on the data
(:meth:`GPPrior.fit`) and gives ``log p(f_M)`` and ``alpha = K^{-1} (f_M - m)`` at a measurement set
``X_M``; :func:`fit_classification_gp` fits a prior on logits by the Laplace classification evidence
instead; :class:`MeasurementPoints` draws a fresh ``X_M`` at each step.
:class:`FunctionalPosterior` puts the two together with a likelihood, and :class:`FSGLD` /
:class:`FSGHMC` sample it (``docs/fsgmcmc_design.md`` in the repository has the derivation).
``FunctionalPosterior(..., prior_form=Vecchia())`` is the cheap form: a fixed pool whose GP marginal
is replaced by its Vecchia factorisation, a few factors per step (:mod:`bnnkit.functional.vecchia`).
"""

from .algorithms import FSGHMC, FSGLD
from .gp_classification import LaplaceResult, fit_classification_gp, laplace_evidence, prior_predictive
from .gp_fit import SharedKernelMLL
from .gp_prior import GPPrior
from .kernels import KERNEL_NAMES, kernel_hyperparameters, make_kernel
from .measurement import BoundMeasurementPoints, FixedMeasurementPoints, MeasurementPoints, dedupe_rows
from .posterior import FunctionalPosterior
from .vecchia import Vecchia, VecchiaFactors

__all__ = [
    "FunctionalPosterior",
    "FSGLD",
    "FSGHMC",
    "GPPrior",
    "SharedKernelMLL",
    "fit_classification_gp",
    "laplace_evidence",
    "prior_predictive",
    "LaplaceResult",
    "make_kernel",
    "kernel_hyperparameters",
    "KERNEL_NAMES",
    "MeasurementPoints",
    "BoundMeasurementPoints",
    "FixedMeasurementPoints",
    "dedupe_rows",
    "Vecchia",
    "VecchiaFactors",
]
