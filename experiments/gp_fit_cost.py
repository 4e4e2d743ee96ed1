"""What the functional samplers' GP prior fit costs on at most 1,000 and at most 500 rows: on each
gap / tail split's training rows, ``GPPrior("rbf").fit`` as ``bnnkit.fit``'s fsgld / fsghmc call
it (300 Adam steps, seeded by the split), both caps one after the other in the same process;
seconds, final loss (negative log marginal likelihood per row), noise variance, outputscale and
the lengthscales.

    python -m experiments.gp_fit_cost --datasets energy,concrete,wine --kinds gap,tail \
        --splits 3 --data ../shared/data --out experiments/results/gp_fit_cost.jsonl
"""

from __future__ import annotations

import argparse
import time

import torch

from bnnkit.functional import GPPrior
from experiments.functional_kernel import emit, groups


def fit_once(x: torch.Tensor, y: torch.Tensor, split: int, max_points: int) -> dict:
    gp = GPPrior("rbf", input_dim=x.shape[1])
    t0 = time.perf_counter()
    f = gp.fit(x, y, num_steps=300, max_points=max_points, generator=torch.Generator().manual_seed(split),
               progress=False)  # fmt: skip
    seconds = time.perf_counter() - t0
    return {"max_points": max_points, "seconds": seconds, "loss": f["loss"],
            "noise_variance": f["noise_variance"], "outputscale": f["outputscale"],
            "lengthscale": f["lengthscale"], "num_points": f["num_points"],
            "two_starts": f["starts"] is not None}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--datasets", default="energy,concrete,wine")
    p.add_argument("--kinds", default="gap,tail")
    p.add_argument("--data", default="../shared/data")
    p.add_argument("--splits", type=int, default=None, help="the first N splits of each kind (default all)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    for data, kind in groups(a.datasets, a.kinds, a.data):
        for split in range(min(data.num_splits, a.splits or data.num_splits)):
            s = data.split(split)
            for max_points in (1000, 500):
                emit({"dataset": data.name, "split_kind": kind, "split": split,
                      **fit_once(s.x_train, s.y_train, split, max_points)}, a.out)  # fmt: skip


if __name__ == "__main__":
    main()
