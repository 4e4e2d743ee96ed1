"""Thin wrappers around ArviZ for arrays shaped ``[chain, draw, ...]``."""

from __future__ import annotations

import warnings

import numpy as np
from torch import Tensor

from ..core.weights import warn_if_degenerate, weight_ess  # noqa: F401 (re-exported)


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
