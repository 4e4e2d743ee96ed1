"""Choose / confirm the default sampler recipe: ``bnnkit.fit`` with a recipe variant (or a named
method) on UCI splits, one JSON line per (set, split, variant) with the test RMSE / NLL in original
units, the function-space R-hat / ESS and the seconds.  No test label is read by any fit; the
test rows are scored once, after the fit.

    python -m experiments.default_recipe --datasets boston,yacht,energy --splits 0,1,2 \
        --variants default,ensemble --out experiments/results/default_recipe.jsonl

Variants: ``default`` (bnnkit.api.DEFAULT_RECIPE), the other fit methods by name, and the named
recipe changes in VARIANTS below.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
import warnings

import torch

import bnnkit
from bnnkit.api import DEFAULT_RECIPE
from bnnkit.data import load_uci
from bnnkit.nets import mlp

VARIANTS = {
    # the MAP phase stops after 10 held-out scores without improvement (20 in the default) and the
    # sampling phase is a quarter as long (500 burn-in steps, 50 draws thinned by 25)
    "p10s": dict(map_patience=10, burn_in=500, draws=50, thin=25),
    # the same with 8 chains: more modes in the predictive
    "p10s8": dict(map_patience=10, burn_in=500, draws=50, thin=25, chains=8),
    # the noise sd held at the MAP phase's held-out RMSE instead of sampled
    "hnoise": dict(noise="heldout"),
    "hnoise_p10s8": dict(noise="heldout", map_patience=10, burn_in=500, draws=50, thin=25, chains=8),
    # a weaker Gamma(1, rate) prior on the noise precision: rate 1e-3 instead of 0.1, so a nearly
    # noiseless target is not pulled to a noise sd of ~0.05 (the prior's -rate * tau term)
    "nprior3": dict(noise_prior=(1.0, 1e-3)),
    # and the MAP phase capped at 300 epochs of its rows (an ensemble member's budget)
    "nprior3_e300": dict(noise_prior=(1.0, 1e-3), map_max_epochs=300),
    # and the sampling phase capped at 300 epochs too (burn-in and thinning scaled down alike)
    "nprior3_e300s": dict(noise_prior=(1.0, 1e-3), map_max_epochs=300, sampler_max_epochs=300),
    "e300s": dict(map_max_epochs=300, sampler_max_epochs=300),
    # the MAP phase capped at 600 epochs, the sampling phase at 300
    "nprior3_m600s300": dict(noise_prior=(1.0, 1e-3), map_max_epochs=600, sampler_max_epochs=300),
    # the sequential MAP phase (one chain after another), otherwise the default
    "seqmap": dict(vectorized_map=False),
}


def run(name: str, split: int, variant: str, root: str, threads: int) -> dict:
    torch.set_num_threads(threads)
    data = load_uci(name, split, root=root)
    with bnnkit.core.random.global_rng_seeded(split):
        net = mlp(data.x_train.shape[1], 100)
    method, recipe = variant, None
    if variant in VARIANTS:
        method, recipe = "default", dataclasses.replace(DEFAULT_RECIPE, **VARIANTS[variant])
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = bnnkit.fit(
            net, (data.x_train, data.y_train), method=method, recipe=recipe, seed=split, progress=False
        )
    seconds = time.perf_counter() - t0
    pred = fit.predict(data.x_test)  # standardised units (the loader's), then the set's own units
    lp = pred.log_prob(data.y_test)
    return {
        "dataset": name,
        "split": split,
        "variant": variant,
        "rmse": float(((data.unnormalise_y(pred.mean) - data.unnormalise_y(data.y_test)) ** 2).mean().sqrt()),
        "nll": float(-data.unnormalise_log_density(lp).mean()),
        "rhat": fit.diagnostics.get("rhat"),
        "ess": fit.diagnostics.get("ess"),
        "seconds": seconds,
        "map_steps": (
            (fit.draws.config or {}).get("convergence", {}).get("map_steps") if fit.draws else None
        ),
        "stopped": fit.diagnostics.get("stopped"),
        "noise_sd": _noise_sd(fit),
    }


def _noise_sd(fit) -> float | None:
    """The mean sampled noise sd in standardised units (None when the noise is not sampled)."""
    if fit.draws is None or "likelihood.log_precision" not in fit.posterior.view.names:
        return None
    lp = fit.posterior.view.unravel(fit.draws.positions.reshape(-1, fit.draws.positions.shape[-1]))[
        "likelihood.log_precision"
    ]
    return float((-0.5 * lp).exp().mean())


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--datasets", default="boston,yacht,energy")
    p.add_argument("--splits", default="0,1,2")
    p.add_argument("--variants", default="default,ensemble")
    p.add_argument("--data", default="../shared/data")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    for name in a.datasets.split(","):
        for split in map(int, a.splits.split(",")):
            for variant in a.variants.split(","):
                row = run(name, split, variant, a.data, a.threads)
                print(json.dumps(row), flush=True)
                with open(a.out, "a") as f:
                    f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
