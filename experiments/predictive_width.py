"""Why the default recipe loses small, nearly noiseless sets: fit it on one UCI split and print the
test RMSE, the predictive's aleatoric and epistemic sd, each chain's sampled noise sd, the mean
|z| of the test targets (0.8 for a calibrated Gaussian predictive) and the training RMSE, all in
standardised units.

    python -m experiments.predictive_width --dataset yacht --split 0 --data ../shared/data
"""

from __future__ import annotations

import argparse
import math
import warnings

import torch

import bnnkit
from bnnkit.core.random import global_rng_seeded
from bnnkit.data import load_uci
from bnnkit.nets import mlp


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="yacht")
    p.add_argument("--split", type=int, default=0)
    p.add_argument("--data", default="../shared/data")
    a = p.parse_args()
    torch.set_num_threads(1)
    d = load_uci(a.dataset, a.split, root=a.data)
    with global_rng_seeded(a.split):
        net = mlp(d.x_train.shape[1], 100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = bnnkit.fit(net, (d.x_train, d.y_train), seed=a.split, progress=False)
    pred = f.predict(d.x_test)
    print("test RMSE", float(((pred.mean - d.y_test) ** 2).mean().sqrt()))
    print(
        "aleatoric sd (the noise, and a held noise's GP widening)",
        float(pred.aleatoric_variance.mean().sqrt()),
    )
    print("epistemic sd (the spread of the draws' means)", float(pred.epistemic_variance.mean().sqrt()))
    conv = f.draws.config["convergence"]
    if "likelihood.log_precision" not in f.draws.params:  # the noise held (protocols 15 and 16)
        held = conv["noise_held"] * f.scaling.y_std if f.scaling.y_std is not None else conv["noise_held"]
        widen = (pred.aleatoric_variance.mean() - held**2).clamp_min(0).sqrt()
        print("noise held at", held, "widening sd", float(widen), "sampled again:", conv.get("noise_drift"))
    else:
        log_tau = f.draws.params["likelihood.log_precision"]
        print(
            "noise sd per chain (first, last draw)",
            [
                (
                    round(math.exp(-0.5 * float(log_tau[c, 0])), 4),
                    round(math.exp(-0.5 * float(log_tau[c, -1])), 4),
                )
                for c in range(log_tau.shape[0])
            ],
        )
    print("mean |z|", float(((d.y_test - pred.mean) / pred.stddev).abs().mean()))
    train = f.predict(d.x_train)
    print("train RMSE", float(((train.mean - d.y_train) ** 2).mean().sqrt()))


if __name__ == "__main__":
    main()
