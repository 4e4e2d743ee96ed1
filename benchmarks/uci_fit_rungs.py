"""The UCI bench's sghmc choosing its ladder rung by fit as well as agreement: an experiment.

Protocol 10's sghmc (cyclical scale-adapted SGHMC) climbs the rungs (peak, window) and keeps the
first whose chains agree (function-space R-hat <= 1.1). Agreement says nothing of fit: on Boston
splits 7 and 8 the first converged rung has test NLL 2.55 and 3.28 against a median of 2.23, and on
yacht split 0 the window-1,000 rung converges with RMSE 3.13. This runs every rung, records how
each fits (in-sample log pointwise predictive density and PSIS-LOO on the training rows; test RMSE
and NLL, which no rule reads), and keeps, among the rungs that converge, the one of highest
in-sample log pointwise predictive density (:func:`bnnkit.bench.uci.fit_rungs_protocol`, version
11). PSIS-LOO is not the rule: on yacht its Pareto k was above 0.7 on most rows. The
cells are written and read as the bench's are::

    python -m benchmarks.uci_fit_rungs --datasets boston,yacht --splits 10 --data ../shared/data --out OUT
    python -m benchmarks.uci_fit_rungs --datasets boston,yacht --splits 10 --from-cells OUT/uci_cells.jsonl --out OUT
"""

from __future__ import annotations

import argparse

import torch

from bnnkit.bench.uci import fit_rungs_protocol, run_uci


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default="boston,yacht,energy")
    p.add_argument("--splits", type=int, default=10)
    p.add_argument("--first-split", type=int, default=0)
    p.add_argument("--data", default=None)
    p.add_argument("--out", default="bnnkit-out/uci-fit-rungs")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--from-cells", default=None, metavar="JSONL")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    report = run_uci(
        [d for d in a.datasets.split(",") if d],
        ["sghmc"],
        splits=a.splits,
        first_split=a.first_split,
        out=a.out,
        root=a.data,
        quick=a.quick,
        progress=False,
        resume=a.resume,
        from_cells=a.from_cells,
        protocol=fit_rungs_protocol(a.quick),
    )
    print(report["markdown"])


if __name__ == "__main__":
    main()
