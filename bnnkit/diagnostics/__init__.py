"""Convergence diagnostics via ArviZ (R-hat, ESS, PSIS-LOO, trace plots; nothing ArviZ computes is re-implemented)
and simulation-based calibration of samplers (:mod:`bnnkit.diagnostics.sbc`)."""

from .arviz_utils import ess, psis_loo, rhat, trace_plot, warn_if_degenerate, weight_ess
from .convergence import ConvergenceWarning, FunctionSpaceConvergence
from .sbc import SBCRanks, SBCTest, sampler_draws, sbc_ranks, sbc_uniformity, scalar_quantities

__all__ = [
    "ConvergenceWarning",
    "FunctionSpaceConvergence",
    "SBCRanks",
    "SBCTest",
    "ess",
    "psis_loo",
    "rhat",
    "sampler_draws",
    "sbc_ranks",
    "sbc_uniformity",
    "scalar_quantities",
    "trace_plot",
    "warn_if_degenerate",
    "weight_ess",
]
