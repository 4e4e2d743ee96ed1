"""``bnnkit demo``: HMC on a small BNN over the embedded 1-D data set.

Samples an MLP 1-32-32-1 (tanh) with a per-layer Gaussian prior and a learnt noise level,
prints predictive metrics and convergence diagnostics, and writes a PNG of the predictive mean
with a 95% band over the data and beyond it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch

import bnnkit
from bnnkit.core.errors import BnnkitError
from bnnkit.core.files import create_folder, unwritable
from bnnkit.data.toy import TOY1D_NOISE, load_toy1d, toy1d_function
from bnnkit.diagnostics import ess, rhat
from bnnkit.predict import network_outputs, predict, rmse

HIDDEN = 32


def demo_model() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(1, HIDDEN),
        torch.nn.Tanh(),
        torch.nn.Linear(HIDDEN, HIDDEN),
        torch.nn.Tanh(),
        torch.nn.Linear(HIDDEN, 1),
    )


def demo_posterior(module: torch.nn.Module) -> bnnkit.Posterior:
    # Hidden-to-hidden and output weights scaled by ~1/sqrt(fan-in) (Neal 1996), so the prior over
    # functions does not saturate the tanh units; noise precision learnt with a vague Gamma prior.
    prior = bnnkit.GaussianPrior(1.0, scales={"2.": 0.3, "4.": 0.3})
    likelihood = bnnkit.Gaussian(0.1, learn_noise=True, precision_prior=(2.0, 0.02))
    return bnnkit.Posterior(module, likelihood, prior)


def check_out_file(out: str | os.PathLike[str]) -> Path:
    """Check, before any sampling, that the figure can be written at ``out``: not a folder, a
    format matplotlib writes, under a folder (created if missing) that can be written into.
    Raises a :class:`BnnkitError` that names the path."""
    from matplotlib.backend_bases import FigureCanvasBase

    path = Path(out).expanduser()
    if path.is_dir():
        raise BnnkitError(
            f"--out {path} is a folder: pass the path of the figure to write, e.g. {path / 'bnnkit-demo.png'}."
        )
    formats = FigureCanvasBase.get_supported_filetypes()
    suffix = path.suffix.lower().lstrip(".")
    if suffix and suffix not in formats:
        raise BnnkitError(
            f"--out {path}: matplotlib writes no {suffix!r} figures; end the name in one of "
            f"{', '.join('.' + f for f in sorted(formats))} (e.g. .png)."
        )
    parent = path.parent
    why = create_folder(parent)
    if why is not None:
        raise BnnkitError(f"cannot create the folder {parent} of --out {path}: {why}.")
    if path.exists() and not os.access(path, os.W_OK):
        raise BnnkitError(f"cannot write --out {path}: the file is read-only.")
    why = unwritable(parent)
    if why is not None:
        raise BnnkitError(f"cannot write --out {path}: {why} in {parent}.")
    return path


def run_demo(
    out: str = "bnnkit-demo.png",
    num_chains: int = 4,
    num_samples: int = 200,
    num_warmup: int = 300,
    num_steps: int = 30,
    seed: int = 0,
    threads: int = 1,
    progress: bool = True,
    chain_method: str = "vectorized",
) -> dict:
    check_out_file(out)  # before the run, not after it
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    X, y = load_toy1d()
    posterior = demo_posterior(demo_model())
    print(
        f"bnnkit demo: HMC on an MLP 1-{HIDDEN}-{HIDDEN}-1 ({posterior.view.size} parameters), {len(X)} points"
    )
    samples = bnnkit.sample(
        bnnkit.HMC(step_size=0.01, num_steps=num_steps),
        posterior,
        (X, y),
        num_samples=num_samples,
        num_warmup=num_warmup,
        num_chains=num_chains,
        seed=seed,
        progress=progress,
        chain_method=chain_method,  # the chains as one batched computation (docs/scaling.md)
    )
    t_sample = time.perf_counter() - t0

    gen = torch.Generator().manual_seed(seed + 1)
    x_in = torch.cat(
        [
            torch.empty(100, 1).uniform_(-2.0, -0.6, generator=gen),
            torch.empty(100, 1).uniform_(0.6, 2.0, generator=gen),
        ]
    )
    y_in = toy1d_function(x_in.squeeze(-1)) + TOY1D_NOISE * torch.randn(200, generator=gen)
    x_out = torch.cat([torch.linspace(-3.5, -2.2, 50), torch.linspace(2.2, 3.5, 50)]).unsqueeze(-1)

    train = predict(posterior, samples, X)
    test = predict(posterior, samples, x_in)
    outside = predict(posterior, samples, x_out)
    metrics = {
        "train_rmse": rmse(train.mean, y),
        "train_nll": train.nll(y),
        "test_rmse": rmse(test.mean, y_in),
        "test_nll": test.nll(y_in),
        "outside_rmse_vs_truth": rmse(outside.mean, toy1d_function(x_out.squeeze(-1))),
        "inside_mean_sd": float(test.stddev.mean()),
        "outside_mean_sd": float(outside.stddev.mean()),
        "acceptance_rate": samples.acceptance_rate(),
        "divergences": samples.num_divergences(),
        "step_size": [round(float(s), 5) for s in samples.stats["step_size"][:, 0]],
        "noise_sd": float(train.aleatoric_variance.mean().sqrt()),
    }
    probe = torch.linspace(-3.5, 3.5, 15).unsqueeze(-1)
    f_probe = network_outputs(posterior, samples, probe).reshape(samples.num_chains, samples.num_draws, -1)
    if samples.num_chains > 1:
        metrics["rhat_max_f"] = float(rhat(f_probe).max())
        metrics["rhat_log_density"] = float(rhat(samples.stats["log_density"].unsqueeze(-1)).max())
    metrics["ess_min_f"] = float(ess(f_probe).min())
    metrics["ess_log_density"] = float(ess(samples.stats["log_density"].unsqueeze(-1)).min())
    metrics["seconds"] = time.perf_counter() - t0
    _report(metrics, t_sample)
    _plot(out, posterior, samples, X, y)
    print(f"wrote {out}")
    return metrics


def _report(m: dict, t_sample: float) -> None:
    print()
    print("  predictive                          diagnostics")
    print(f"  train RMSE {m['train_rmse']:7.3f}               acceptance rate   {m['acceptance_rate']:.2f}")
    print(f"  train NLL  {m['train_nll']:7.3f}               divergences       {m['divergences']}")
    print(f"  test  RMSE {m['test_rmse']:7.3f}               step size         {m['step_size']}")
    print(
        f"  test  NLL  {m['test_nll']:7.3f}               R-hat  f(x), max  {m.get('rhat_max_f', float('nan')):.3f}"
    )
    print(
        f"  noise sd   {m['noise_sd']:7.3f} (true 0.12)    R-hat  log post.  {m.get('rhat_log_density', float('nan')):.3f}"
    )
    print(f"  mean sd inside data  {m['inside_mean_sd']:.3f}      ESS    f(x), min  {m['ess_min_f']:.0f}")
    print(
        f"  mean sd beyond data  {m['outside_mean_sd']:.3f}      ESS    log post.  {m['ess_log_density']:.0f}"
    )
    print(f"  sampling took {t_sample:.1f} s")
    print("  (test: 200 fresh points of the true function inside the data range; R-hat/ESS on function")
    print("   values at 15 inputs, since weight-space R-hat is meaningless under BNN symmetries)")


def _plot(
    path: str, posterior: bnnkit.Posterior, samples: bnnkit.Samples, X: torch.Tensor, y: torch.Tensor
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = torch.linspace(-3.5, 3.5, 300).unsqueeze(-1)
    pred = predict(posterior, samples, grid)
    g = grid.squeeze(-1).numpy()
    mean, sd = pred.mean.numpy(), pred.stddev.numpy()
    epi = pred.epistemic_variance.sqrt().numpy()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.fill_between(
        g, mean - 1.96 * sd, mean + 1.96 * sd, color="tab:blue", alpha=0.2, label="95% predictive band"
    )
    ax.fill_between(
        g, mean - 1.96 * epi, mean + 1.96 * epi, color="tab:blue", alpha=0.3, label="95% epistemic band"
    )
    ax.plot(g, mean, color="tab:blue", lw=2, label="predictive mean")
    ax.plot(g, toy1d_function(grid.squeeze(-1)).numpy(), "k--", lw=1, label="true function")
    ax.scatter(X.squeeze(-1).numpy(), y.numpy(), s=14, color="black", zorder=3, label="data")
    ax.axvspan(-3.5, -2.0, color="grey", alpha=0.08)
    ax.axvspan(-0.6, 0.6, color="grey", alpha=0.08)
    ax.axvspan(2.0, 3.5, color="grey", alpha=0.08, label="no data")
    ax.set_xlim(-3.5, 3.5)
    ax.set_ylim(-4, 4)
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_title(
        f"bnnkit demo: HMC posterior predictive ({samples.num_chains} chains x {samples.num_draws} draws)"
    )
    ax.legend(loc="upper left", fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
