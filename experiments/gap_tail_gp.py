"""Is it the prior or the sampler?  The functional samplers' GP prior, conditioned exactly on the
training rows, on the held-out region of gap and tail splits.

fsgld / fsghmc put an RBF GP, fitted by marginal likelihood to at most 500 training rows
(``bnnkit.api.gp_fit.fitted_gp``, the same seed as the bench's cell), on the network's outputs.
Their intervals beyond the data are too narrow (docs/results/gap_tail.md, "Why the tails'
intervals are too narrow").  This script predicts each split's held-out rows with that GP's exact
posterior (all training rows, its fitted noise; ``GPPrior.predict``):
if the GP alone covers the held-out region, the prior says the right thing and the chains do not
reach it; if the GP is as narrow, the prior (its kernel or fit) is the cause.

    python -m experiments.gap_tail_gp --datasets yacht,energy,boston,concrete,wine,kin8nm \\
        --kinds gap,tail --data ../shared/data --out experiments/results/gap_tail_gp.jsonl
    python -m experiments.gap_tail_gp --out experiments/results/gap_tail_gp.jsonl \
        --plot docs/results/gap/*_cells*.jsonl docs/results/gap/*_functional.jsonl
"""

from __future__ import annotations

import argparse
import time

import torch

from bnnkit.api.gp_fit import fitted_gp
from bnnkit.api.methods import GP_POINTS

from .functional_kernel import emit, groups


def run(data, kind: str, split: int) -> dict:
    d = data.split(split)
    t0 = time.perf_counter()
    gp, fitted = fitted_gp(d.x_train, d.y_train, split, max_points=GP_POINTS)
    out = {"dataset": data.name, "split_kind": kind, "split": split}
    for where, x, y in (("held_out", d.x_test, d.y_test), ("train", d.x_train, d.y_train)):
        with torch.no_grad():
            mean, var = gp.predict(d.x_train, d.y_train, x)
        sd, y64 = var.sqrt(), y.double()
        z = ((y64 - mean) / sd).abs()
        lp = torch.distributions.Normal(mean, sd).log_prob(y64).float()
        out[where] = {
            "rmse_std": float(((mean - y64) ** 2).mean().sqrt()),
            "nll": float(-d.unnormalise_log_density(lp).mean()),
            "sd": float(var.mean().sqrt()),
            "coverage_95": float((z <= 1.959964).double().mean()),
            "mean_abs_z": float(z.mean()),
        }
    out["noise_sd"] = float(fitted["noise_variance"]) ** 0.5
    out["seconds"] = time.perf_counter() - t0
    return out


METHODS = ("fsgld", "fsghmc", "default", "laplace")
SHORT = {"bostonHousing": "Boston", "wine-quality-red": "wine"}


def plot(gp_cells: str, bench_cells: list[str], out: str) -> None:
    """Held-out NLL of each method minus the prior's exact posterior, per (set, kind), mean over
    the splits (symmetric log scale: a few splits reach hundreds of nats)."""
    import json
    import statistics

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = {}
    for path in bench_cells:  # later files' cells replace earlier ones', as experiments.gap_tail_tables
        for line in open(path):
            c = json.loads(line)
            cells[(c["dataset"], c.get("split_kind"), c["split"], c["method"])] = c
    gp = [json.loads(line) for line in open(gp_cells)]
    groups = sorted({(r["dataset"], r["split_kind"]) for r in gp}, key=lambda g: (g[1], g[0]))
    fig, ax = plt.subplots(figsize=(10, 4.2))
    width = 0.8 / len(METHODS)
    for m, method in enumerate(METHODS):
        diffs = []
        for ds, kind in groups:
            rows = [r for r in gp if (r["dataset"], r["split_kind"]) == (ds, kind)]
            d = [cells[(ds, kind, r["split"], method)]["nll"] - r["held_out"]["nll"] for r in rows]
            diffs.append(statistics.mean(d))
        ax.bar([i + (m - 1.5) * width for i in range(len(groups))], diffs, width, label=method)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_yscale("symlog", linthresh=0.1)
    ax.set_ylim(-10, 300)
    ax.set_xticks(range(len(groups)), [f"{SHORT.get(d, d)}\n{k}" for d, k in groups], fontsize=8)
    ax.set_ylabel("held-out NLL minus the GP prior's own posterior")
    ax.set_title("Above 0: worse than the functional samplers' GP prior conditioned exactly on the data")
    ax.legend(fontsize=8, ncol=4)
    fig.tight_layout()
    fig.savefig(out, dpi=130)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default="yacht,energy")
    p.add_argument("--kinds", default="gap,tail")
    p.add_argument("--data", default="../shared/data")
    p.add_argument("--out", required=True)
    p.add_argument(
        "--plot", nargs="*", help="bench cell files: plot OUT's GP cells against them (PNG: --png)"
    )
    p.add_argument("--png", default="docs/img/gap_tail_gp.png")
    a = p.parse_args()
    if a.plot:
        plot(a.out, a.plot, a.png)
        return
    torch.set_num_threads(1)
    for data, kind in groups(a.datasets, a.kinds, a.data):
        for split in range(data.num_splits):
            emit(run(data, kind, split), a.out)


if __name__ == "__main__":
    main()
