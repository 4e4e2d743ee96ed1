"""The 1-D extrapolation experiment (``bnnkit experiment extrapolation``) over several seeds: each
seed draws its own training points and chains; one JSON line per seed, then mean +- s.e. over the
seeds per method of the in-range RMSE and the mean predictive sd in and out of the data's range.

    python -m experiments.extrapolation_seeds --seeds 10 --out experiments/results/extrapolation_seeds.jsonl
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch

from bnnkit.bench.extrapolation import run_extrapolation
from bnnkit.bench.uci.report import mean_se

METRICS = ("in_range_rmse", "out_of_range_rmse", "in_range_mean_std", "out_of_range_mean_std", "seconds")
METHODS = ("fsghmc", "sghmc", "sghmc_scaled")


def summarise(rows: list[dict]) -> str:
    out = ["| method | seeds | " + " | ".join(METRICS) + " |", "|---|---:|" + "---|" * len(METRICS)]
    for m in METHODS:
        cells = []
        for k in METRICS:
            mean, se = mean_se([r[m][k] for r in rows])
            cells.append(f"{mean:.3f} +- {se:.3f}")
        out.append(f"| {m} | {len(rows)} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--out", required=True)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    done = {}
    if Path(a.out).exists():  # a stopped run goes on with the seeds it lacks
        done = {r["seed"]: r for r in map(json.loads, Path(a.out).read_text().splitlines())}
    for seed in range(a.seeds):
        if seed in done:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            report = run_extrapolation(out=tmp, seed=seed, progress=False)
        row = {"seed": seed, **{m: {k: report[m][k] for k in METRICS} for m in METHODS}}
        with open(a.out, "a") as f:
            f.write(json.dumps(row) + "\n")
        done[seed] = row
        print(json.dumps(row), flush=True)
    print(summarise([done[s] for s in sorted(done)]))


if __name__ == "__main__":
    main()
