"""The UCI bench's csgld (cyclical pSGLD) with Gibbs draws of the noise precision: an experiment.

Protocol 7's csgld moves the noise precision with the weights. On yacht and energy its chains
agree in function space but sample a noise about 4x their own training residual, because the
precision lags each kick of the cycle (docs/sgmcmc_diagnosis.md). This runs the same cells with a
draw of the precision from its Gamma conditional every 50 steps
(:func:`bnnkit.bench.uci.gibbs_csgld_protocol`, version 8). Its chains run one at a time (a
vectorised target has no conjugate updates), spend the whole budget, and the function-space R-hat
and ESS are measured at the end. The cells are written and read as the bench's are::

    python -m benchmarks.uci_csgld_gibbs --datasets boston,yacht --splits 10 --data ../shared/data --out OUT
    python -m benchmarks.uci_csgld_gibbs --datasets boston,yacht --splits 10 --from-cells OUT/uci_cells.jsonl --out OUT
"""

from __future__ import annotations

import argparse

import torch

from bnnkit.bench.uci import gibbs_csgld_protocol, run_uci


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default="boston,yacht,concrete,energy")
    p.add_argument("--splits", type=int, default=10)
    p.add_argument("--every", type=int, default=50, help="steps between Gibbs draws of the noise precision")
    p.add_argument("--data", default=None)
    p.add_argument("--out", default="bnnkit-out/uci-csgld-gibbs")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--from-cells", default=None, metavar="JSONL")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    report = run_uci(
        [d for d in a.datasets.split(",") if d],
        ["csgld"],
        splits=a.splits,
        out=a.out,
        root=a.data,
        quick=a.quick,
        progress=False,
        resume=a.resume,
        from_cells=a.from_cells,
        protocol=gibbs_csgld_protocol(a.quick, a.every),
    )
    print(report["markdown"])


if __name__ == "__main__":
    main()
