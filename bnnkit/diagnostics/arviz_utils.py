"""Thin wrappers around ArviZ for arrays shaped ``[chain, draw, ...]``."""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch import Tensor


def _dataset(draws: Tensor | np.ndarray):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz as az
    arr = (
        draws.detach().double().cpu().numpy() if isinstance(draws, Tensor) else np.asarray(draws, dtype=float)
    )
    if arr.ndim < 2:
        raise ValueError(f"draws must be shaped [chain, draw, ...], got shape {arr.shape}.")
    return az, az.convert_to_dataset(arr)


def ess(draws: Tensor | np.ndarray, method: str = "bulk") -> np.ndarray:
    """Effective sample size per element of ``draws [chain, draw, ...]`` (ArviZ ``ess``)."""
    az, ds = _dataset(draws)
    return np.asarray(az.ess(ds, method=method)["x"].values)


def rhat(draws: Tensor | np.ndarray) -> np.ndarray:
    """Rank-normalised split R-hat per element of ``draws [chain, draw, ...]`` (ArviZ ``rhat``)."""
    az, ds = _dataset(draws)
    return np.asarray(az.rhat(ds)["x"].values)


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


def trace_plot(samples, var_names: list[str] | None = None, path: str | None = None):
    """ArviZ trace plot of a :class:`~bnnkit.Samples` (optionally saved to ``path``)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz as az
    axes = az.plot_trace(samples.to_arviz(var_names))
    fig = np.asarray(axes).flat[0].figure
    if path is not None:
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
    return fig
