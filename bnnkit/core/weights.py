"""Importance-weight degeneracy: the Kish effective sample size and a warning below a floor."""

from __future__ import annotations

import warnings

import torch
from torch import Tensor


def weight_ess(log_weights: Tensor) -> float:
    """Kish effective sample size of importance weights: ``(sum w)^2 / sum w^2``."""
    lw = log_weights.double().reshape(-1)
    return float(torch.exp(2 * torch.logsumexp(lw, 0) - torch.logsumexp(2 * lw, 0)))


def warn_if_degenerate(log_weights: Tensor, min_ess_fraction: float = 0.01) -> float:
    """Weight ESS; warns when it is below ``min_ess_fraction`` of the draws (weight degeneracy)."""
    n = log_weights.numel()
    e = weight_ess(log_weights)
    if e < min_ess_fraction * n:
        warnings.warn(
            f"importance weights are degenerate: weight ESS {e:.1f} of {n} draws ({100 * e / n:.2g}%). "
            "Estimates rest on a few draws; use a proposal closer to the posterior (wider, or centred on a "
            "mode) or an MCMC sampler.",
            stacklevel=3,
        )
    return e
