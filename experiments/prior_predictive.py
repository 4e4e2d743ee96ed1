"""Prior predictive check of the image bench's GP priors on the 10 MNIST logits.

Fits the two priors exactly as ``bnnkit bench image`` does (``fit_gp``, seed 0: the same 1000
training images): ``"regression"`` (exact GP regression on one-hot targets) and ``"classification"``
(Laplace evidence of the softmax GP classifier on 500 of them), draws logits from each at those
1000 images, and plots the distribution of the softmax's max-probability and entropy per draw and
image, with the classification evidence over its grid.  Writes the PNG and a JSON summary.

    python -m experiments.prior_predictive --data /work/shared/data --threads 1 \\
        --png docs/img/prior_predictive_mnist.png --json docs/results/image/prior_predictive_mnist.json
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch


def _regression_fit(flat: torch.Tensor, labels: torch.Tensor, steps: int):
    """The image bench's GP prior before the classification fit (until commit 6fd8c02 its
    ``gp_fit = "regression"``): exact GP regression on the images' one-hot labels."""
    from bnnkit.functional import GPPrior

    gp = GPPrior("rbf", input_dim=flat.shape[1], ard=False, jitter=1e-4)
    onehot = torch.nn.functional.one_hot(labels, 10).double()
    return gp, gp.fit(flat, onehot, num_steps=steps, progress=False)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--draws", type=int, default=50)
    ap.add_argument("--png", default="docs/img/prior_predictive_mnist.png")
    ap.add_argument("--json", default="docs/results/image/prior_predictive_mnist.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    from bnnkit.bench.image import DEFAULTS, fit_gp
    from bnnkit.data.mnist import load_mnist
    from bnnkit.functional import laplace_evidence, prior_predictive

    x, y = load_mnist(args.data, train=True)
    g = torch.Generator().manual_seed(0)  # the rows fit_gp uses with seed 0
    idx = torch.randperm(x.shape[0], generator=g)[: DEFAULTS["gp_rows"]]
    flat, labels = x[idx].reshape(len(idx), -1), y[idx]
    summary: dict = {"images": len(idx), "draws": args.draws, "priors": {}}
    results = {}
    for how in ("regression", "classification"):
        t0 = time.perf_counter()
        gp, fitted = (
            fit_gp(x, y, DEFAULTS, seed=0)
            if how == "classification"
            else _regression_fit(flat, labels, DEFAULTS["gp_steps"])
        )
        seconds = time.perf_counter() - t0
        pp = prior_predictive(gp, flat, 10, num_draws=args.draws, generator=torch.Generator().manual_seed(1))
        # the Laplace classification evidence of this prior on the classification fit's 500 rows
        k = gp.covariance(flat[:500])
        evidence = laplace_evidence(k, labels[:500], 10).log_evidence / 500
        results[how] = (gp, fitted, pp)
        mp, ent = pp["max_prob"].flatten(), pp["entropy"].flatten()
        summary["priors"][how] = {
            "outputscale": fitted["outputscale"],
            "lengthscale": fitted["lengthscale"],
            "fit_seconds": seconds,
            "laplace_log_evidence_per_row_first500": evidence,
            "max_prob_quantiles_10_50_90": [
                float(q) for q in mp.quantile(torch.tensor([0.1, 0.5, 0.9], dtype=mp.dtype))
            ],
            "entropy_mean_nats": float(ent.mean()),
            "entropy_over_log10": float(ent.mean()) / math.log(10),
            "share_max_prob_over_0.9": float((mp > 0.9).double().mean()),
        }
        print(how, json.dumps(summary["priors"][how]))
    # fit_classification_gp keeps its evidence grid on gp.fitted (the bench's record drops it)
    summary["classification_grid"] = results["classification"][0].fitted["grid"]
    _plot(Path(args.png), results, summary)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def _plot(path: Path, results: dict, summary: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    colours = {"regression": "tab:red", "classification": "tab:blue"}
    for how, (_gp, fitted, pp) in results.items():
        label = (
            f"{how} fit (outputscale {fitted['outputscale']:.3g}, lengthscale {fitted['lengthscale']:.3g})"
        )
        kw = dict(bins=40, alpha=0.55, color=colours[how], label=label, density=True)
        axes[0].hist(pp["max_prob"].flatten().numpy(), range=(0.1, 1.0), **kw)
        axes[1].hist(pp["entropy"].flatten().numpy(), range=(0.0, math.log(10)), **kw)
    axes[0].set_xlabel("max softmax probability of a prior draw")
    axes[1].set_xlabel("entropy of softmax(f) (nats)")
    axes[1].axvline(math.log(10), color="k", lw=1, ls="--")
    axes[1].text(math.log(10), axes[1].get_ylim()[1] * 0.9, " log 10", ha="right", fontsize=8)
    for ax in axes[:2]:
        ax.set_ylabel("density")
    axes[0].legend(fontsize=7, loc="upper center")
    fitted = results["classification"][1]
    grid = summary["classification_grid"]
    if grid:
        s, ls, v = zip(*grid)
        sc = axes[2].scatter(s, ls, c=v, cmap="viridis", s=40)
        fig.colorbar(sc, ax=axes[2], label="Laplace log evidence per image")
        axes[2].plot(
            [fitted["outputscale"]], [fitted["lengthscale"]], "r*", ms=14, label="classification fit"
        )
        reg = results["regression"][1]
        axes[2].plot([reg["outputscale"]], [reg["lengthscale"]], "kx", ms=10, label="regression fit")
        axes[2].set_xscale("log")
        axes[2].set_yscale("log")
        axes[2].set_xlabel("outputscale")
        axes[2].set_ylabel("lengthscale")
        axes[2].legend(fontsize=7, loc="lower right")
    fig.suptitle(
        f"Prior predictive at {summary['images']} MNIST training images, {summary['draws']} draws each",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
