"""Exact GP regression with the functional samplers' fitted prior: what the GP alone predicts.

The UCI bench's fsgld / fsghmc cells put the RBF GP that ``bnnkit bench uci`` fits on each split
(same fit, same seed) on the network's function at the measurement points.  This script predicts
the test rows with that GP itself (the closed-form posterior mean and variance, plus the fitted
noise), in original units, so a functional cell can be read against its own prior's posterior:
where the GP alone is behind a weight-space method, the prior's function class is part of the gap;
where the functional cell is behind the GP, the sampler or the network is.

Run:  python -m experiments.uci_gp_regression --datasets concrete,boston,energy,yacht --splits 10 \
        --data ../shared/data --out docs/results/uci_gp_regression.json
"""

from __future__ import annotations

import argparse
import statistics

import torch

from benchmarks._timing import write_results
from bnnkit.data import load_uci, uci_num_splits
from bnnkit.data.uci import uci_dataset_name
from bnnkit.functional import GPPrior


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="concrete,boston,energy,yacht")
    ap.add_argument("--splits", type=int, default=10)
    ap.add_argument("--data", default=None, help="data directory (default: BNNKIT_DATA)")
    ap.add_argument("--out", default="docs/results/uci_gp_regression.json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    cells, summary = [], {}
    for ds in args.datasets.split(","):
        name = uci_dataset_name(ds)
        rows = []
        for split in range(min(args.splits, uci_num_splits(name, root=args.data))):
            data = load_uci(name, split, root=args.data)
            gp = GPPrior("rbf", input_dim=data.x_train.shape[1], jitter=1e-4)
            # the bench's fit of the split's GP (seed 0 + split): 300 steps on at most 1,000 rows
            gp.fit(data.x_train, data.y_train, num_steps=300, max_points=1000,
                            generator=torch.Generator().manual_seed(split), progress=False)  # fmt: skip
            mean, var = gp.predict(data.x_train, data.y_train, data.x_test)
            err = data.unnormalise_y(mean.float()) - data.unnormalise_y(data.y_test)
            lp = torch.distributions.Normal(mean, var.sqrt()).log_prob(data.y_test.double()).float()
            cell = {
                "dataset": name,
                "split": split,
                "rmse": float(err.pow(2).mean().sqrt()),
                "nll": float(-data.unnormalise_log_density(lp).mean()),
                "hyperparameters": gp.hyperparameters(),
            }
            cells.append(cell)
            rows.append(cell)
            print(f"{name} split {split}: RMSE {cell['rmse']:.3f} NLL {cell['nll']:.3f}", flush=True)
        summary[name] = {
            "splits": len(rows),
            "rmse": statistics.mean(r["rmse"] for r in rows),
            "rmse_se": statistics.stdev(r["rmse"] for r in rows) / len(rows) ** 0.5
            if len(rows) > 1
            else None,
            "nll": statistics.mean(r["nll"] for r in rows),
            "nll_se": statistics.stdev(r["nll"] for r in rows) / len(rows) ** 0.5 if len(rows) > 1 else None,
        }
        s = summary[name]
        print(f"{name}: RMSE {s['rmse']:.3f} NLL {s['nll']:.3f} over {s['splits']} splits")
    write_results(args.out, {"benchmark": "uci_gp_regression", "summary": summary, "cells": cells})


if __name__ == "__main__":
    main()
