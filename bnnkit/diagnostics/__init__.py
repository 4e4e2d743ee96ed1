"""Convergence diagnostics via ArviZ (R-hat, ESS, trace plots); nothing ArviZ computes is re-implemented."""

from .arviz_utils import ess, rhat, trace_plot, warn_if_degenerate, weight_ess
from .convergence import FunctionSpaceConvergence

__all__ = ["FunctionSpaceConvergence", "ess", "rhat", "trace_plot", "warn_if_degenerate", "weight_ess"]
