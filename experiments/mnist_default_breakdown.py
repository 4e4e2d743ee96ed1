"""Where the default recipe's seconds go on MNIST: the MAP phase, sampling and scoring, timed
around one ``bnnkit.fit(net, (x, y))`` of the image bench's CNN; also each chain's MAP steps
(best, run) and the R-hat / ESS the fit reports.

    python -m experiments.mnist_default_breakdown --data ../shared/data --device cuda --out FILE

``--quick`` takes 600 training images and the image bench's short recipe (a smoke test).
"""

from __future__ import annotations

import argparse
import json
import time

import torch

import bnnkit
import bnnkit.api.recipe as recipe_module
from bnnkit.api.recipe import SamplerRecipe
from bnnkit.bench.image import DEFAULTS, QUICK, _load, build_net
from bnnkit.core.random import global_rng_seeded


def _plain(v):
    return v.tolist() if isinstance(v, torch.Tensor) else str(v)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="folder with mnist/ and fashion-mnist/")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None, help="append the record as one JSON line here")
    args = ap.parse_args(argv)
    dev = args.device
    x, y, x_te, y_te, _, _ = _load("mnist", args.data, False, dict(DEFAULTS))
    recipe = None
    if args.quick:
        x, y, x_te, y_te = x[:600], y[:600], x_te[:300], y_te[:300]
        recipe = SamplerRecipe(**QUICK["default_recipe"])
    x, y, x_te, y_te = (t.to(dev) for t in (x, y, x_te, y_te))
    times: dict[str, float] = {}
    warm_starts = recipe_module._warm_starts

    def timed(*a, **k):  # the MAP phase is the recipe's warm start
        t = time.perf_counter()
        r = warm_starts(*a, **k)
        if dev.startswith("cuda"):
            torch.cuda.synchronize()
        times["map_phase_s"] = time.perf_counter() - t
        return r

    recipe_module._warm_starts = timed
    try:
        with global_rng_seeded(0):
            net = build_net("cnn").to(dev)
        t0 = time.perf_counter()
        f = bnnkit.fit(net, (x, y), seed=0, progress=False, recipe=recipe)
        times["fit_s"] = time.perf_counter() - t0
    finally:
        recipe_module._warm_starts = warm_starts
    t1 = time.perf_counter()
    probs = f.predict(x_te).probs
    times["predict_test_s"] = time.perf_counter() - t1
    rec = {
        "times": times,
        "error_pct": 100 * float((probs.argmax(-1) != y_te).double().mean()),
        "convergence": json.loads(json.dumps(f.draws.config["convergence"], default=_plain)),
        "draws_shape": list(f.draws.positions.shape),
        "device": dev,
        "torch": torch.__version__,
    }
    print(json.dumps(rec))
    if args.out:
        with open(args.out, "a") as fh:
            fh.write(json.dumps(rec) + "\n")
    return rec


if __name__ == "__main__":
    main()
