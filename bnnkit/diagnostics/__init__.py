"""Convergence diagnostics via ArviZ (R-hat, ESS, PSIS-LOO, trace plots) and simulation-based
calibration of samplers (:mod:`bnnkit.diagnostics.sbc`).  Rank-normalised R-hat and bulk ESS run
vectorised over quantities (:mod:`bnnkit.diagnostics.rank_stats`: ArviZ's numbers bit for bit, about
10x faster on a fit's 100 outputs); everything else is ArviZ's own."""

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
