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

    python -m experiments.uci_fit_rungs --datasets boston,yacht --splits 10 --data ../shared/data --out OUT
    python -m experiments.uci_fit_rungs --datasets boston,yacht --splits 10 --from-cells OUT/uci_cells.jsonl --out OUT

``--compare CELLS`` runs nothing: from the cells' per-rung records it prints, per set, the test
RMSE / NLL each rule's rung gives (``first``: protocol 10's first converged rung; ``lppd``: this
experiment's; ``PSIS-LOO``; ``reliable PSIS-LOO``, which trusts LOO only where its Pareto k
diagnostic does; ``best test NLL``: the rung a rule reading the test labels would keep, a bound and
not a rule), and checks that ``first`` gives protocol 10's cells in
``--p10-cells`` where the split has one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bnnkit.bench.uci import fit_rungs_protocol
from bnnkit.bench.uci.inference import fit_rung, kept_rung
from bnnkit.bench.uci.report import mean_se
from experiments._uci_experiment import experiment_parser, run_experiment

RHAT = fit_rungs_protocol().config()["adaptive"]["rhat"]  # the cells' own threshold (1.1)
# "reliable LOO": PSIS-LOO only where its estimate holds (Pareto k > 0.7 on at most this share of the
# training rows).  Written down after Boston splits 0-4 and yacht 0-3 (where in-sample lppd kept the
# overfitting rung and plain LOO the broken one) and before the other splits ran, so those splits
# test it.
RELIABLE_BAD_K = 0.10


def reliable_loo(rungs: Sequence[dict[str, Any]], rows: int) -> int:
    """Among the converged rungs whose PSIS-LOO is reliable (``bad_k`` at most RELIABLE_BAD_K of the
    ``rows`` training rows), the highest ``loo_elpd``; none: the first converged rung (protocol 10's
    rule)."""
    ok = [{**r, "reliable_loo": r["loo_elpd"]} if r["bad_k"] <= RELIABLE_BAD_K * rows else r for r in rungs]
    if not any(r["rhat"] <= RHAT and "reliable_loo" in r for r in ok):
        return kept_rung(rungs, RHAT)
    return fit_rung(ok, RHAT, "reliable_loo")


# rule name -> the index of the rung it keeps, from the cell's ladder records and its training rows
RULES: dict[str, Callable[[Sequence[dict[str, Any]], int], int]] = {
    "first (protocol 10)": lambda rungs, rows: kept_rung(rungs, RHAT),
    "lppd (this experiment)": lambda rungs, rows: fit_rung(rungs, RHAT, "train_lppd"),
    "PSIS-LOO": lambda rungs, rows: fit_rung(rungs, RHAT, "loo_elpd"),
    "reliable PSIS-LOO": reliable_loo,
    "best test NLL (a bound, reads test labels)": lambda rungs, rows: fit_rung(
        [{**r, "neg_test_nll": -r["test_nll"]} for r in rungs], RHAT, "neg_test_nll"
    ),
}


def compare(cells_path: Path, p10_dir: Path, root: str | None, splits: set[int] | None = None) -> str:
    """The markdown table of ``--compare`` (see the module docstring); ``splits``: only those."""
    from bnnkit.data import load_uci

    cells = [json.loads(line) for line in cells_path.open()]
    cells = [c for c in cells if splits is None or c["split"] in splits]
    rows = {(c["dataset"], c["split"]): load_uci(c["dataset"], c["split"], root=root).x_train.shape[0] for c in cells}
    p10 = {}
    for f in p10_dir.glob("*.jsonl"):
        for line in f.open():
            c = json.loads(line)
            if c["method"] == "sghmc" and c.get("protocol") == 10:
                p10[(c["dataset"], c["split"])] = c
    lines = [
        "| set | splits | rule | test RMSE | test NLL | splits where it keeps another rung than `first` |",
        "|---|---:|---|---|---|---:|",
    ]
    mismatches = []
    for ds in sorted({c["dataset"] for c in cells}):
        mine = sorted((c for c in cells if c["dataset"] == ds), key=lambda c: c["split"])
        firsts = [c["ladder"][kept_rung(c["ladder"], RHAT)] for c in mine]
        for name, rule in RULES.items():
            kept = [c["ladder"][rule(c["ladder"], rows[(ds, c["split"])])] for c in mine]
            rm, rse = mean_se([r["test_rmse"] for r in kept])
            nm, nse = mean_se([r["test_nll"] for r in kept])
            moved = sum(r is not f for r, f in zip(kept, firsts))
            lines.append(f"| {ds} | {len(mine)} | {name} | {rm:.3f} +- {rse:.3f} | {nm:.3f} +- {nse:.3f} | {moved} |")
        for c, first in zip(mine, firsts):  # the first rule must reproduce protocol 10's cell of the split
            old = p10.get((ds, c["split"]))
            if old and abs(old["nll"] - first["test_nll"]) > 1e-4:
                mismatches.append(f"{ds} split {c['split']}: protocol 10 {old['nll']:.4f}, first {first['test_nll']:.4f}")
    lines.append("")
    lines.append(
        "`first` reproduces protocol 10's cells on every split that has one."
        if not mismatches
        else "`first` differs from protocol 10's cell: " + "; ".join(mismatches)
    )
    return "\n".join(lines)


def main() -> None:
    p = experiment_parser(__doc__, "boston,yacht,energy", "bnnkit-out/uci-fit-rungs")
    p.add_argument("--compare", default=None, metavar="JSONL", help="run nothing: compare the rules on these cells")
    p.add_argument("--p10-cells", default="docs/results/uci", help="protocol 10's cells, for --compare")
    p.add_argument("--only-splits", default=None, metavar="I,J", help="--compare: only these splits")
    a = p.parse_args()
    if a.compare:
        only = None if a.only_splits is None else {int(i) for i in a.only_splits.split(",")}
        print(compare(Path(a.compare), Path(a.p10_cells), a.data, only))
        return
    run_experiment(a, "sghmc", fit_rungs_protocol)


if __name__ == "__main__":
    main()
