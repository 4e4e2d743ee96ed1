"""Stacking the default recipe's chains (Yao, Vehtari and Gelman 2022, "Stacking for non-mixing
Bayesian computations"): the four chains sit in different modes (function-space R-hat 1.1-3.0),
and the predictive mixes them with equal weights.  Stacking weights them by their leave-one-out
predictive densities on the training rows (PSIS-LOO per chain, ArviZ; the library's
``bnnkit.diagnostics.stacking`` since, the same numbers to 1e-10): maximise
``sum_n log sum_k w_k exp(elpd_loo_{k,n})`` over the simplex.  No test label is read to weight.

Exploratory, on the choice sets only (no rule was registered, no confirmation set was run): one
JSON line per split, equal-weight scores (the bench's stored ``default`` cell, reproduced) beside
the stacked ones, from the same draws.

    python -m experiments.chain_stacking --dataset yacht --splits 10 --data ../shared/data \\
        --out experiments/results/chain_stacking_exploratory.jsonl
"""

from __future__ import annotations

import argparse
import json
import warnings

import numpy as np
import torch


def worst_chain_z(loo: np.ndarray) -> float:
    """How far the worst chain's LOO fit is below the best chain's, in standard errors of the
    paired difference over the rows: ``max_k sum_n (loo[b, n] - loo[k, n]) / (sqrt(N) sd_n(...))``,
    ``b`` the chain with the largest sum (Vehtari et al. 2017's paired elpd difference)."""
    best = int(loo.sum(1).argmax())
    diff = loo[best][None] - loo
    se = np.sqrt(loo.shape[1]) * diff.std(1, ddof=1)
    z = np.where(se > 0, diff.sum(1) / np.where(se > 0, se, 1.0), 0.0)
    return float(z.max())


def run(name: str, split: int, root: str | None) -> dict:
    from bnnkit.bench.uci.cell import fit_cell, test_scores
    from bnnkit.bench.uci.protocol import FULL
    from bnnkit.data.uci import load_uci
    from bnnkit.diagnostics.stacking import loo_per_chain, stacking_weights
    from bnnkit.predict import predict

    d = load_uci(name, split, root=root)
    f = fit_cell("default", d, FULL, None, split, False)
    chains, draws = f.draws.positions.shape[:2]
    ll = predict(f.posterior, f.draws, d.x_train).log_prob_draws(d.y_train)
    loo, k = loo_per_chain(ll.reshape(chains, draws, -1).double().numpy())
    bad = (k > 0.7).mean(1).tolist()
    w = stacking_weights(loo)
    per_draw = torch.tensor(np.repeat(w / draws, draws))
    equal = test_scores(predict(f.posterior, f.draws, d.x_test), d)
    stacked = test_scores(predict(f.posterior, f.draws, d.x_test, weights=per_draw), d)
    return {"dataset": name, "split": split, "weights": w.round(3).tolist(),
            "loo_mean": loo.mean(1).round(3).tolist(), "bad_k_share": bad, "worst_chain_z": worst_chain_z(loo),
            "equal": equal, "stacked": stacked}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="yacht")
    p.add_argument("--splits", type=int, default=10)
    p.add_argument("--data", default=None)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    for split in range(a.splits):
        row = run(a.dataset, split, a.data)
        print(json.dumps(row), flush=True)
        with open(a.out, "a") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
