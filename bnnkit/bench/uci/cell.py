"""One cell of the UCI bench: :func:`bnnkit.fit` with the method's defaults on one split, and the
scores of its predictive on the split's test rows."""

from __future__ import annotations

import time
import warnings
from typing import Any

import torch

from ...api import fit
from ...api.methods import METHODS, fitted_gp, gp_noise
from ...core.errors import DivergenceError
from ...core.random import global_rng_seeded
from ...diagnostics import ConvergenceWarning
from ...laplace import Laplace
from ...nets import mlp
from ...predict import predict
from ...predict.metrics import interval_coverage, rmse
from .protocol import UCIProtocol

# a sampler cell's convergence record: bnnkit.fit's diagnostics, the recipe's stopping rule where it ran
CONVERGENCE = (
    "rhat",
    "ess",
    "draws_per_chain",
    "stopped",
    "map_steps",
    "map_heldout_rmse",
    "noise_held",
    "noise_gp",
    "noise_sampled",
    "noise_drift",
    "stacking",
    "step_size",
)


def split_gp(data: Any, cfg: UCIProtocol, seed: int) -> tuple[float, dict[str, Any], float]:
    """The noise sd (standardised) that the fitted baselines take, the GP fit's report and its
    seconds: the GP :func:`bnnkit.fit` fits for a user's call (:func:`~bnnkit.api.gp_fit.fitted_gp`)."""
    t0 = time.perf_counter()
    _, fitted = fitted_gp(
        data.x_train, data.y_train, seed, max_points=cfg.gp_fit_max_points, steps=cfg.gp_fit_steps
    )
    return gp_noise(fitted), fitted, time.perf_counter() - t0


def fit_cell(method: str, data: Any, cfg: UCIProtocol, noise: float | None, seed: int, progress: bool):
    """The cell's :class:`~bnnkit.api.result.Fit`: ``bnnkit.fit(net, (x, y), method=method,
    seed=seed, standardize=False, noise=noise)`` on the split's standardised rows, the network built
    in a generator forked from ``seed`` (the caller's random state is left alone)."""
    with global_rng_seeded(seed):
        net = mlp(data.x_train.shape[1], cfg.hidden)
    kw = cfg.fit_options(method) | ({} if noise is None else {"noise": noise})
    with warnings.catch_warnings():  # the cell records the diagnostics the warnings repeat
        warnings.simplefilter("ignore", ConvergenceWarning)
        return fit(net, (data.x_train, data.y_train), method=method, seed=seed, progress=progress,
                   standardize=False, **kw)  # fmt: skip


def run_cell(method: str, data: Any, cfg: UCIProtocol, noise: float | None, seed: int, progress: bool):
    """The cell's scores, seconds and (sampler) convergence record of :func:`fit_cell`'s fit.  A
    chain that diverges gives NaN scores."""
    t0 = time.perf_counter()
    try:
        f = fit_cell(method, data, cfg, noise, seed, progress)
    except DivergenceError as err:
        nan = float("nan")
        scores = dict.fromkeys(("rmse_std", "nll_std", "rmse", "nll", "coverage_95"), nan)
        return {**scores, "seconds": time.perf_counter() - t0, "diverged": str(err)}
    seconds = time.perf_counter() - t0
    pred = predictive(f.posterior, f.laplace if f.laplace is not None else f.draws, data.x_test)
    out = {**test_scores(pred, data), "coverage_95": interval_coverage(pred, data.y_test), "seconds": seconds}
    if METHODS[method][1]:
        conv = {**f.diagnostics, **(f.draws.config.get("convergence") or {})}
        out.update({k: conv.get(k) for k in CONVERGENCE})
    return out


def predictive(post: Any, draws: Any, inputs: torch.Tensor, progress: bool = False) -> Any:
    """The predictive at ``inputs``: :func:`bnnkit.predict.predict` of the draws, or a
    :class:`~bnnkit.Laplace`'s linearised (GLM) predictive."""
    if isinstance(draws, Laplace):
        return draws.predict(inputs)
    return predict(post, draws, inputs, progress=progress)


def test_scores(pred: Any, data: Any) -> dict[str, float]:
    """Test RMSE and NLL at ``data.x_test``, standardised and in original units."""
    lp = pred.log_prob(data.y_test)
    return {
        "rmse_std": rmse(pred.mean, data.y_test),
        "nll_std": float(-lp.mean()),
        "rmse": rmse(data.unnormalise_y(pred.mean), data.unnormalise_y(data.y_test)),
        "nll": float(-data.unnormalise_log_density(lp).mean()),
    }
