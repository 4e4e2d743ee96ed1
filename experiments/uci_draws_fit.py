"""How well the draws of two UCI bench cells fit their training rows, and what noise they sample.

Runs the bench's cells of ``--methods`` (default csgld and sgld, protocol 7) on one split exactly
as ``bnnkit bench uci`` does, then reports for each, in original units: the training and test RMSE
of the predictive mean, the median predictive sd at the test inputs, and the sampled noise
log-precision (standardised units: per chain the median, over all draws min / median / max).
Written for docs/uci_results.md, "Protocol 7": on the smooth sets cyclical pSGLD's chains agree
in function space but underfit, and this measures by how much::

    python -m experiments.uci_draws_fit --dataset yacht --split 0 --data ../shared/data
"""

from __future__ import annotations

import argparse
import json

import torch

from bnnkit.bench.uci.inference import predictive, run_method
from bnnkit.bench.uci.runner import bench_config
from bnnkit.data import load_uci
from bnnkit.predict.metrics import rmse


def fit_of(method: str, data, cfg: dict, seed: int) -> dict:
    post, s = run_method(method, data, cfg, None, None, seed, False)
    train = predictive(post, s, data.x_train)
    test = predictive(post, s, data.x_test)
    y = data.unnormalise_y
    out = {
        "method": method,
        "train_rmse": rmse(y(train.mean), y(data.y_train)),
        "test_rmse": rmse(y(test.mean), y(data.y_test)),
        "test_predictive_sd_median": float(data.unnormalise_std(test.stddev.median())),
    }
    logp = s.params["likelihood.log_precision"].reshape(s.num_chains, s.num_draws, -1)[..., 0]
    out["log_precision_chain_medians"] = [round(float(v), 3) for v in logp.median(dim=1).values]
    flat = logp.reshape(-1)
    out["log_precision_min_median_max"] = [
        round(float(v), 3) for v in (flat.min(), flat.median(), flat.max())
    ]
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="yacht")
    p.add_argument("--split", type=int, default=0)
    p.add_argument("--methods", default="csgld,sgld")
    p.add_argument("--data", default=None)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    cfg = bench_config(None, False, False)
    data = load_uci(a.dataset, a.split, root=a.data)
    for m in a.methods.split(","):
        print(json.dumps({"dataset": a.dataset, "split": a.split, **fit_of(m, data, cfg, a.split)}))


if __name__ == "__main__":
    main()
