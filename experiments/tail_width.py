"""Why the functional samplers' intervals are too narrow beyond the data: on tail (or gap) splits,
each method's predictive on the held-out rows against the same predictive on the training rows.

For each split and method the fit is the bench's cell (``bnnkit.bench.uci.cell``: the same network,
seed, options and fixed noise of the fitted baselines), then, in standardised units, on the
held-out rows and on the training rows: the RMSE, the epistemic sd (the spread of the posterior's
functions), the aleatoric sd (the noise), the 95 % coverage, and the mean |z| of the targets
(0.80 for a calibrated Gaussian). "widening" is the epistemic sd held out over that on the
training rows: how much the posterior's spread grows where the data say nothing, against how much
the error grows (the RMSE ratio).

    python -m experiments.tail_width --datasets boston,energy --kind tail \\
        --methods default,fsgld,laplace --data ../shared/data --out experiments/results/tail_width.jsonl
"""

from __future__ import annotations

import argparse
import time

import torch

from bnnkit.bench.uci.cell import fit_cell, predictive, split_gp
from bnnkit.bench.uci.protocol import FULL, uses_gp_noise

from .functional_kernel import emit, groups


def _parts(pred, y: torch.Tensor) -> dict[str, float]:
    epi = pred.epistemic_variance.mean().sqrt()
    ale = pred.aleatoric_variance.mean().sqrt()
    sd = pred.variance.sqrt()
    z = ((y - pred.mean) / sd).abs()
    return {
        "rmse": float(((pred.mean - y) ** 2).mean().sqrt()),
        "epistemic_sd": float(epi),
        "aleatoric_sd": float(ale),
        "coverage_95": float((z <= 1.959964).double().mean()),
        "mean_abs_z": float(z.mean()),
    }


def run(data, kind: str, split: int, method: str) -> dict:
    d = data.split(split)
    noise = split_gp(d, FULL, split)[0] if uses_gp_noise(method) else None
    t0 = time.perf_counter()
    f = fit_cell(method, d, FULL, noise, split, progress=False)
    draws = f.laplace if f.laplace is not None else f.draws
    held = _parts(predictive(f.posterior, draws, d.x_test), d.y_test)
    train = _parts(predictive(f.posterior, draws, d.x_train), d.y_train)
    return {
        "dataset": data.name,
        "split_kind": kind,
        "split": split,
        "method": method,
        "held_out": held,
        "train": train,
        "widening": held["epistemic_sd"] / train["epistemic_sd"],
        "error_growth": held["rmse"] / train["rmse"],
        "seconds": time.perf_counter() - t0,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default="boston")
    p.add_argument("--kind", default="tail")
    p.add_argument("--methods", default="default,fsgld,laplace")
    p.add_argument("--splits", default=None, help="e.g. 0,1 (default: all of the kind)")
    p.add_argument("--data", default="../shared/data")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    torch.set_num_threads(1)
    for data, kind in groups(a.datasets, a.kind, a.data):
        splits = range(data.num_splits) if a.splits is None else [int(s) for s in a.splits.split(",")]
        for split in splits:
            for method in a.methods.split(","):
                emit(run(data, kind, split, method), a.out)


if __name__ == "__main__":
    main()
