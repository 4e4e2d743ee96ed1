"""1-D extrapolation with functional SG-MCMC (the paper's first figure), as a script.

Same as ``bnnkit experiment extrapolation``: fits an RBF GP prior to 20 points, samples a
1-100-100-1 tanh network with fSGHMC (GP prior on its outputs at 40 + 40 measurement points) and
with SGHMC under two Gaussian weight priors, and writes ``extrapolation.png`` and
``extrapolation.json`` (RMSE and mean predictive sd inside and outside the data).  About 100 s on
one CPU thread; ``--quick`` takes about 10 s.

Run:  python examples/extrapolation_1d.py [--quick] [--out DIR]
"""

from __future__ import annotations

import argparse
import json

import torch

from bnnkit.bench.extrapolation import run_extrapolation

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bnnkit-out/extrapolation")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)  # tiny matrices: a second thread only adds synchronisation
    report = run_extrapolation(args.out, quick=args.quick)
    for name in ("fsghmc", "sghmc", "sghmc_scaled"):
        print(name, json.dumps({k: round(v, 3) for k, v in report[name].items()}))
