"""Thin wrappers around ArviZ for arrays shaped ``[chain, draw, ...]``."""

from __future__ import annotations

import warnings

import numpy as np
from torch import Tensor

from ..core.weights import warn_if_degenerate, weight_ess  # noqa: F401 (re-exported)
from .rank_stats import bulk_ess, rank_rhat


def _numpy(draws: Tensor | np.ndarray) -> np.ndarray:
    arr = (
        draws.detach().double().cpu().numpy() if isinstance(draws, Tensor) else np.asarray(draws, dtype=float)
    )
    if arr.ndim < 2:
        raise ValueError(f"draws must be shaped [chain, draw, ...], got shape {arr.shape}.")
    return arr


def _dataset(draws: Tensor | np.ndarray):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz as az
    return az, az.convert_to_dataset(_numpy(draws))


def ess(draws: Tensor | np.ndarray, method: str = "bulk") -> np.ndarray:
    """Effective sample size per element of ``draws [chain, draw, ...]`` (ArviZ ``ess``; the bulk
    ESS computed for all elements at once, :func:`~bnnkit.diagnostics.rank_stats.bulk_ess`, with
    ArviZ's numbers)."""
    if method == "bulk":
        return bulk_ess(_numpy(draws)).reshape(np.shape(draws)[2:])
    az, ds = _dataset(draws)
    return np.asarray(az.ess(ds, method=method)["x"].values)


def rhat(draws: Tensor | np.ndarray) -> np.ndarray:
    """Rank-normalised split R-hat per element of ``draws [chain, draw, ...]``: ArviZ ``rhat``'s
    numbers, computed for all elements at once (:func:`~bnnkit.diagnostics.rank_stats.rank_rhat`)."""
    return rank_rhat(_numpy(draws)).reshape(np.shape(draws)[2:])


def psis_loo(log_lik: Tensor | np.ndarray) -> dict[str, float]:
    """Pareto-smoothed importance-sampling leave-one-out cross-validation (Vehtari, Gelman and
    Gabry 2017; ArviZ ``loo``) from the pointwise log-likelihood ``log p(y_n | theta_{c,s})`` of
    draws shaped ``[chain, draw, N]``:

        elpd_loo = sum_n log( sum_s w_{n,s} p(y_n | theta_s) / sum_s w_{n,s} ),  w_{n,s} ~ 1 / p(y_n | theta_s)

    with the raw weights' tails replaced by a fitted generalised Pareto.  It estimates the
    predictive density of each training row from the posterior without that row, so it compares
    posteriors of one data set by fit without held-out labels, where it holds: when draws differ by
    many nats on a row (tightly fitted regressions; on UCI yacht most rows of cyclical SGHMC's
    draws) the row's weights have no finite variance, k > 0.7, and the estimate means little, so
    check ``bad_k`` before trusting ``elpd``.  Returns ``elpd`` (the sum),
    ``se``, ``p_loo`` (effective parameters), ``pareto_k_max`` and ``bad_k`` (rows with k > 0.7,
    where the estimate of that row is unreliable) and ``n`` (rows)."""
    arr = (
        log_lik.detach().double().cpu().numpy()
        if isinstance(log_lik, Tensor)
        else np.asarray(log_lik, dtype=float)
    )
    if arr.ndim != 3 or arr.shape[1] < 2 or arr.shape[2] < 1:
        raise ValueError(
            f"log_lik must be shaped [chain, draw, N] with at least 2 draws per chain, got shape {arr.shape}."
        )
    if not np.isfinite(arr).all():
        raise ValueError(
            "log_lik has non-finite entries (a diverged draw?); drop those draws before PSIS-LOO."
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FutureWarnings, and ArviZ's own warning that k is high (returned)
        import arviz as az

        idata = az.from_dict(posterior={"_": np.zeros(arr.shape[:2])}, log_likelihood={"y": arr})
        r = az.loo(idata, pointwise=True)
    k = np.asarray(r.pareto_k.values)
    return {
        "elpd": float(r.elpd_loo),
        "se": float(r.se),
        "p_loo": float(r.p_loo),
        "pareto_k_max": float(k.max()),
        "bad_k": int((k > 0.7).sum()),
        "n": int(arr.shape[2]),
    }


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
