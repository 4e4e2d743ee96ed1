"""fSGHMC with the Vecchia prior (bnnkit.functional.Vecchia defaults) against protocol 3's exact-form cells.

For each split: the protocol-3 cell's GP hyperparameters (its kept fit start) and noise, its step
size (through the bench's default-step hook), seed = split, full protocol otherwise; SGHMC timed
in the same process.  The bench module is not edited: ``FunctionalPosterior`` is replaced, in
``bnnkit.functional``, by a subclass whose ``prior_form`` defaults to ``Vecchia()``.

Run:  python -m experiments.fsgmcmc_cost_uci kin8nm kin8nm 0 10
      python -m experiments.fsgmcmc_cost_uci protein protein 0 5
(dataset name, cells file docs/results/uci/<file>.jsonl, first split, end split); one JSON line per split.
"""

import json
import math
import os
import sys
import time
from pathlib import Path

import torch

import bnnkit.bench.uci.inference as inference
import bnnkit.functional as functional
from bnnkit.bench.uci.runner import bench_config, folder_source
from bnnkit.functional import GPPrior

dataset, cells_file, first, end = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(1)
cells = {}
for line in open(f"docs/results/uci/{cells_file}.jsonl"):
    c = json.loads(line)
    if c["protocol"] == 3 and c["method"] in ("fsghmc", "sghmc"):
        cells[(c["split"], c["method"])] = c
DATA = os.environ.get("BNNKIT_DATA", str(Path(__file__).resolve().parents[2] / "shared" / "data"))
source = folder_source(dataset, DATA)
cfg = bench_config(None, False, False)
Exact = functional.FunctionalPosterior


class VecchiaPosterior(Exact):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("prior_form", functional.Vecchia())
        super().__init__(*args, **kwargs)


functional.FunctionalPosterior = VecchiaPosterior
for split in range(first, end):
    ref = cells[(split, "fsghmc")]
    noise = ref["noise_std_standardised"]
    kept = min(ref["gp_fit_starts"], key=lambda s: abs(math.sqrt(s["noise_variance"]) - noise))
    hp = kept["hyperparameters"]
    data = source.load(split)
    gp = GPPrior(
        "rbf",
        input_dim=data.x_train.shape[1],
        jitter=1e-4,
        lengthscale=hp["lengthscale"],
        outputscale=hp["outputscale"],
    )
    out = {"dataset": dataset, "split": split}
    for method in ("sghmc", "fsghmc"):
        step = cells[(split, method)]["step_size"]
        inference.default_step_size = lambda m, n, c, step=step: step
        t = time.perf_counter()
        post, s = inference.run_method(method, data, cfg, noise, gp, split, False)
        seconds = time.perf_counter() - t
        pred = inference.predictive(post, s, data.x_test)
        out[method] = {
            "rmse_std": float(((pred.mean - data.y_test) ** 2).mean().sqrt()),
            "nll_std": float(-pred.log_prob(data.y_test).mean()),
            "seconds": seconds,
            "step_size": step,
        }
    out["protocol3_fsghmc_exact"] = {"rmse_std": ref["rmse_std"], "nll_std": ref["nll_std"]}
    out["protocol3_sghmc_rmse"] = cells[(split, "sghmc")]["rmse_std"]
    print(json.dumps(out), flush=True)
