"""1-D extrapolation, the functional SG-MCMC paper's first figure with bnnkit's own data (function,
intervals and noise are not the paper's): fSGHMC with an RBF GP prior fitted to the data against
SGHMC with N(0, 1) weights and (``sghmc_scaled``) N(0, 1/fan_in) on the 100-unit layers.  Truth
``sin(3x) + 0.3 x`` plus noise 0.1 at 10 inputs on each of ``[-2, -0.75]`` and ``[0.75, 2]``;
network 1-100-100-1 (tanh), the likelihood's noise the GP's fitted one, full batch; 2 chains of
2000 burn-in steps, then 80 draws thinned by 100.  Writes ``extrapolation.png`` (predictive means,
95 % bands) and ``extrapolation.json`` (RMSE and mean predictive sd in range and out of range,
``|x| > 2.25``, with the protocol)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import torch

from ..core.errors import BnnkitError
from ..core.files import pyplot, save_figure
from ..core.posterior import Posterior
from ..core.random import global_rng_seeded
from ..data.minibatch import Minibatches
from ..likelihoods import Gaussian
from ..nets import mlp
from ..predict import predict
from ..priors import GaussianPrior
from ..sgmcmc.sghmc import SGHMC
from .divergence import sample_or_diverged

NOISE = 0.1
INTERVALS = ((-2.0, -0.75), (0.75, 2.0))
PLOT_RANGE = (-4.0, 4.0)
OUT_OF_RANGE = 2.25


def truth(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(3 * x) + 0.3 * x


def make_data(seed: int = 0, n_per_interval: int = 10) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    xs = [lo + (hi - lo) * torch.rand(n_per_interval, generator=g) for lo, hi in INTERVALS]
    x = torch.cat(xs).sort().values[:, None]
    y = truth(x[:, 0]) + NOISE * torch.randn(x.shape[0], generator=g)
    return x, y


def _summary(pred: Any, grid: torch.Tensor) -> dict[str, float]:
    x = grid[:, 0]
    inside = torch.zeros_like(x, dtype=torch.bool)
    for lo, hi in INTERVALS:
        inside |= (x >= lo) & (x <= hi)
    outside = x.abs() > OUT_OF_RANGE
    err = (pred.mean - truth(x)) ** 2
    std = pred.stddev
    return {
        "in_range_rmse": float(err[inside].mean().sqrt()),
        "out_of_range_rmse": float(err[outside].mean().sqrt()),
        "in_range_mean_std": float(std[inside].mean()),
        "out_of_range_mean_std": float(std[outside].mean()),
    }


def run_extrapolation(
    out: str | Path = "bnnkit-out/extrapolation",
    quick: bool = False,
    seed: int = 0,
    progress: bool = True,
    step_size: float = 2e-3,
    friction: float = 10.0,
    jitter: float = 1e-3,
) -> dict[str, Any]:
    """Run both methods, write the PNG and JSON into ``out`` and return the JSON content."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    x, y = make_data(seed)
    warmup, keep, thin, chains = (300, 20, 20, 2) if quick else (2000, 80, 100, 2)

    t0 = time.perf_counter()
    gp, fitted, noise = _fit_prior(x, y, jitter, 200 if quick else 1000, progress)
    fit_seconds = time.perf_counter() - t0

    stream = Minibatches(x, y, batch_size=x.shape[0])
    grid = torch.linspace(*PLOT_RANGE, 400)[:, None]
    results: dict[str, Any] = {}
    preds = {}
    kw = dict(num_samples=keep, num_warmup=warmup, thin=thin, num_chains=chains, seed=seed, progress=progress)
    for name, (post, algorithm) in _models(x, gp, noise, seed, step_size, friction).items():
        t0 = time.perf_counter()
        s = sample_or_diverged(algorithm, post, stream, **kw)
        seconds = time.perf_counter() - t0
        if not bool(torch.isfinite(s.positions).all()):
            raise BnnkitError(
                f"{name} diverged (non-finite weights) at step_size={step_size}: use a smaller step size"
                + (" or a larger GP jitter" if name == "fsghmc" else "")
                + "."
            )
        preds[name] = predict(post, s, grid)
        results[name] = {**_summary(preds[name], grid), "seconds": seconds, "draws": keep * chains}

    report = {
        "experiment": "extrapolation_1d",
        "command": "bnnkit experiment extrapolation" + (" --quick" if quick else ""),
        "seed": seed,
        "protocol": {
            "truth": "sin(3x) + 0.3x",
            "noise_std": NOISE,
            "train_intervals": INTERVALS,
            "n_train": x.shape[0],
            "out_of_range": f"|x| > {OUT_OF_RANGE}",
            "network": "1-100-100-1 tanh",
            "burn_in": warmup,
            "thin": thin,
            "draws_per_chain": keep,
            "chains": chains,
            "step_size": step_size,
            "friction": friction,
            "gp_jitter_relative": jitter,
            "measurement_points": "40 train draws (deduplicated) + 40 uniform on [-4, 4]",
            "not_the_papers": "function, intervals and noise level are bnnkit's choices",
        },
        "gp_prior": {k: v for k, v in fitted.items() if k != "loss"},
        "likelihood_noise_std": noise,
        "gp_fit_seconds": fit_seconds,
        **results,
    }
    (out / "extrapolation.json").write_text(json.dumps(report, indent=2, default=float))
    _plot(out / "extrapolation.png", x, y, grid, preds, results)
    return report


def _fit_prior(x: torch.Tensor, y: torch.Tensor, jitter: float, num_steps: int, progress: bool):
    """The RBF GP prior fitted to the data, its fit, and the likelihood's noise: the fitted one,
    at least 0.02."""
    from ..functional import GPPrior

    # Relative jitter 1e-3: K's smallest eigenvalue sets the stiffest prior curvature (~1/delta),
    # which bounds the stable step size (docs/fsgmcmc_design.md, 7.1); 1e-6 diverges at eps = 2e-3.
    gp = GPPrior("rbf", input_dim=1, jitter=jitter)
    fitted = gp.fit(x, y, num_steps=num_steps, lr=0.05, progress=progress)
    noise = math.sqrt(fitted["noise_variance"])
    noise = max(noise, 0.02)  # guard: a near-interpolating GP fit would make the likelihood too stiff
    return gp, fitted, noise


def _models(
    x: torch.Tensor, gp: Any, noise: float, seed: int, step_size: float, friction: float
) -> dict[str, tuple]:
    """Each method's posterior and algorithm."""
    from ..functional import MeasurementPoints
    from ..functional.algorithms import FSGHMC
    from ..functional.posterior import FunctionalPosterior

    n = x.shape[0]
    measurement = MeasurementPoints(num_from_data=40, num_uniform=40, low=PLOT_RANGE[0], high=PLOT_RANGE[1])
    with global_rng_seeded(seed):  # the initial weights; the caller's random state is left alone
        nets = [mlp(1, 100) for _ in range(3)]
    # Neal's 1/sqrt(fan-in) scaling for the 100-unit layers: a tamer prior over functions.
    scaled = GaussianPrior(1.0, scales={"2.": 0.1, "4.": 0.1})
    return {
        "fsghmc": (
            FunctionalPosterior(nets[0], Gaussian(noise), gp, measurement, x),
            FSGHMC(step_size, friction=friction),
        ),
        "sghmc": (
            Posterior(nets[1], Gaussian(noise), GaussianPrior(1.0), num_data=n),
            SGHMC(step_size, friction=friction),
        ),
        "sghmc_scaled": (
            Posterior(nets[2], Gaussian(noise), scaled, num_data=n),
            SGHMC(step_size, friction=friction),
        ),
    }


_STYLE = {  # title and colour of each method's panel
    "fsghmc": ("fSGHMC, GP prior (RBF)", "tab:blue"),
    "sghmc": ("SGHMC, N(0, 1) weight prior", "tab:orange"),
    "sghmc_scaled": ("SGHMC, N(0, 1/fan_in) weight prior", "tab:green"),
}


def _plot(path: Path, x, y, grid, preds, results) -> None:
    names = list(preds)
    fig, axes = pyplot().subplots(1, len(names), figsize=(6 * len(names), 4.2), sharey=True)
    g = grid[:, 0]
    for ax, name in zip(axes, names):
        p, (title, colour) = preds[name], _STYLE[name]
        lo, hi = p.interval(0.95)
        ax.fill_between(g, lo, hi, color=colour, alpha=0.25, label="95% predictive band")
        ax.plot(g, p.mean, color=colour, lw=1.8, label="predictive mean")
        ax.plot(g, truth(g), "k--", lw=1, label="true function")
        ax.scatter(x[:, 0], y, s=16, color="k", zorder=5, label="training data")
        for lo_i, hi_i in INTERVALS:
            ax.axvspan(lo_i, hi_i, color="grey", alpha=0.08)
        r = results[name]
        ax.set_title(
            f"{title}\nRMSE in/out {r['in_range_rmse']:.2f}/{r['out_of_range_rmse']:.2f}, "
            f"mean sd in/out {r['in_range_mean_std']:.2f}/{r['out_of_range_mean_std']:.2f}",
            fontsize=10,
        )
        ax.set_xlabel("x")
        ax.set_ylim(-4, 4)
    axes[0].set_ylabel("y")
    axes[0].legend(fontsize=8, loc="lower right")
    save_figure(fig, path, 110)
