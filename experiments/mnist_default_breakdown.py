"""Where the default recipe's seconds go on MNIST: the MAP phase, sampling and scoring of one
``bnnkit.fit(net, (x, y))`` of the image bench's CNN (the phases' seconds as the fit's convergence
record gives them); also each chain's MAP steps (best, run) and the R-hat / ESS the fit reports.

    python -m experiments.mnist_default_breakdown --data ../shared/data --device cuda --out FILE

``--quick`` takes 600 training images and the image bench's short recipe (a smoke test).
"""

from __future__ import annotations

import argparse
import json
import time

import torch

import bnnkit
from bnnkit.api.recipe import SamplerRecipe
from bnnkit.bench.image import QUICK, build_net
from bnnkit.core.random import global_rng_seeded
from bnnkit.data.mnist import load_mnist


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="folder with mnist/ and fashion-mnist/")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None, help="append the record as one JSON line here")
    args = ap.parse_args(argv)
    dev = args.device
    x, y = load_mnist(args.data, train=True)
    x_te, y_te = load_mnist(args.data, train=False)
    recipe = None
    if args.quick:
        x, y, x_te, y_te = x[:600], y[:600], x_te[:300], y_te[:300]
        recipe = SamplerRecipe(**QUICK["default_recipe"])
    x, y, x_te, y_te = (t.to(dev) for t in (x, y, x_te, y_te))
    times: dict[str, float] = {}
    with global_rng_seeded(0):
        net = build_net("cnn").to(dev)
    t0 = time.perf_counter()
    f = bnnkit.fit(net, (x, y), seed=0, progress=False, recipe=recipe)
    times["fit_s"] = time.perf_counter() - t0
    times["map_phase_s"] = f.draws.config["convergence"]["seconds"]["map_phase"]
    t1 = time.perf_counter()
    probs = f.predict(x_te).probs
    times["predict_test_s"] = time.perf_counter() - t1
    rec = {
        "times": times,
        "error_pct": 100 * float((probs.argmax(-1) != y_te).double().mean()),
        "convergence": f.draws.config["convergence"],
        "draws_shape": list(f.draws.positions.shape),
        "device": dev,
        "torch": torch.__version__,
    }
    line = json.dumps(rec, default=float)  # the record holds plain Python numbers (float: a 0-d tensor)
    print(line)
    if args.out:
        with open(args.out, "a") as fh:
            fh.write(line + "\n")
    return rec


if __name__ == "__main__":
    main()
