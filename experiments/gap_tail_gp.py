"""Is it the prior or the sampler?  The functional samplers' GP prior, conditioned exactly on the
training rows, on the held-out region of gap and tail splits.

fsgld / fsghmc put an RBF GP, fitted by marginal likelihood to at most 500 training rows
(``bnnkit.api.methods.fitted_gp``, the same seed as the bench's cell), on the network's outputs.
Their intervals beyond the data are too narrow (docs/results/gap_tail.md, "Why the tails'
intervals are too narrow").  This script predicts each split's held-out rows with that GP's exact
posterior (all training rows, its fitted noise; ``experiments.uci_gp_regression.gp_predict``):
if the GP alone covers the held-out region, the prior says the right thing and the chains do not
reach it; if the GP is as narrow, the prior (its kernel or fit) is the cause.

    python -m experiments.gap_tail_gp --datasets yacht,energy,boston,concrete,wine,kin8nm \\
        --kinds gap,tail --data ../shared/data --out experiments/results/gap_tail_gp.jsonl
"""

from __future__ import annotations

import argparse
import time

import torch

from bnnkit.api.methods import GP_POINTS, fitted_gp

from .functional_kernel import emit, groups
from .uci_gp_regression import gp_predict


def run(data, kind: str, split: int) -> dict:
    d = data.split(split)
    t0 = time.perf_counter()
    gp, fitted = fitted_gp(d.x_train, d.y_train, split, max_points=GP_POINTS)
    out = {"dataset": data.name, "split_kind": kind, "split": split}
    for where, x, y in (("held_out", d.x_test, d.y_test), ("train", d.x_train, d.y_train)):
        with torch.no_grad():
            mean, var = gp_predict(gp, fitted["noise_variance"], d.x_train, d.y_train, x)
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default="yacht,energy")
    p.add_argument("--kinds", default="gap,tail")
    p.add_argument("--data", default="../shared/data")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    torch.set_num_threads(1)
    for data, kind in groups(a.datasets, a.kinds, a.data):
        for split in range(data.num_splits):
            emit(run(data, kind, split), a.out)


if __name__ == "__main__":
    main()
