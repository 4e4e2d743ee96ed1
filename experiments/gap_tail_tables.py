"""The gap / tail tables of docs/results/gap_tail.md from bench cells, and the goal summary.

Reads any number of ``uci_cells.jsonl`` files of ``bnnkit bench uci --split-kind gap|tail``
(protocols 13 and 14, which differ only on protein). Where several files hold a cell for the same (set, kind, split, method), the one
from the file named LAST wins, so the sampler cells of a later run replace those of an earlier one
and the baselines' cells stay. Per (set, kind): test RMSE, NLL, the NLL paired with the
weight-space default, on how many splits a method is lower than the default, 95 % coverage and
seconds per split (mean +- s.e. over the splits); then, against issue 46's goal, whether fsgld or
fsghmc is lowest or within one s.e. of the lowest NLL, read strictly: its mean within the lowest
mean's s.e. AND its paired difference to the lowest method within that difference's s.e. (the
first alone passes a method the splits' spread hides, the second alone one whose one split is
catastrophic), their coverage, and their seconds over the default's (cells of one process, where
they ran together).

    python -m experiments.gap_tail_tables docs/results/gap/*_cells*.jsonl docs/results/gap/*_functional.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

from bnnkit.bench.uci.report import mean_se

NAMES = {
    "default": "default (weight prior)",
    "fsgld": "fsgld (GP prior)",
    "fsghmc": "fsghmc (GP prior)",
    "bbb": "BBB",
    "laplace": "Laplace",
    "ensemble": "deep ensemble",
    "mcdropout": "MC dropout",
    "nuts": "NUTS (full batch)",
}
FUNCTIONAL = ("fsgld", "fsghmc")


def load(paths: list[str]) -> dict[tuple[str, str], dict[str, dict[int, dict]]]:
    """``{(set, kind): {method: {split: cell}}}``, later files replacing earlier ones' cells."""
    cells: dict[tuple[str, str], dict[str, dict[int, dict]]] = defaultdict(lambda: defaultdict(dict))
    for path in paths:
        for line in open(path):
            c = json.loads(line)
            # 14 changed only protein's cells (the MAP cap); 13's stand for the others
            if (
                c.get("protocol") in (13, 14)
                and c.get("split_kind") in ("gap", "tail")
                and not c.get("quick")
            ):
                cells[(c["dataset"], c["split_kind"])][c["method"]][c["split"]] = c
    return cells


def table(methods: dict[str, dict[int, dict]]) -> tuple[list[str], dict]:
    """The markdown table of one (set, kind) and the goal summary."""
    splits = sorted(methods["default"])
    stats = {}
    for m, by in methods.items():
        if sorted(by) != splits:
            raise SystemExit(f"{m} has splits {sorted(by)}, the default {splits}")
        diff = [by[s]["nll"] - methods["default"][s]["nll"] for s in splits]
        stats[m] = {
            "rmse": mean_se([by[s]["rmse"] for s in splits]),
            "nll": mean_se([by[s]["nll"] for s in splits]),
            "paired": mean_se(diff),
            "lower": sum(d < 0 for d in diff),
            "coverage": sum(by[s]["coverage_95"] for s in splits) / len(splits),
            "seconds": sum(by[s].get("seconds_total", by[s]["seconds"]) for s in splits) / len(splits),
        }
    order = sorted(stats, key=lambda m: stats[m]["nll"][0])
    best, best_rmse = order[0], min(stats, key=lambda m: stats[m]["rmse"][0])
    lines = [
        "| method | test RMSE | test NLL | paired NLL - default | lower than the default on | 95 % coverage | seconds / split |",
        "|---|---|---|---|---|---|---:|",
    ]
    for m in order:
        s = stats[m]
        rmse = f"{s['rmse'][0]:.3f} +- {s['rmse'][1]:.3f}"
        nll = f"{s['nll'][0]:.3f} +- {s['nll'][1]:.3f}"
        rmse = f"**{rmse}**" if m == best_rmse else rmse
        nll = f"**{nll}**" if m == best else nll
        paired = "" if m == "default" else f"{s['paired'][0]:+.3f} +- {s['paired'][1]:.3f}"
        lower = "" if m == "default" else f"{s['lower']} of {len(splits)}"
        lines.append(
            f"| {NAMES.get(m, m)} | {rmse} | {nll} | {paired} | {lower} | {s['coverage']:.3f} | {s['seconds']:.0f} |"
        )

    def within(m: str) -> bool:
        if m == best:
            return True
        d, se = mean_se([methods[m][s]["nll"] - methods[best][s]["nll"] for s in splits])
        return d <= se and stats[m]["nll"][0] <= stats[best]["nll"][0] + stats[best]["nll"][1]

    goal = {
        "splits": len(splits),
        "best": best,
        "within": [m for m in FUNCTIONAL if m in stats and within(m)],
        "coverage": {m: stats[m]["coverage"] for m in FUNCTIONAL if m in stats},
        "ratio": {m: stats[m]["seconds"] / stats["default"]["seconds"] for m in FUNCTIONAL if m in stats},
    }
    return lines, goal


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cells", nargs="+", help="uci_cells.jsonl files; later files win")
    args = ap.parse_args()
    goals = {}
    for (name, kind), methods in sorted(load(args.cells).items()):
        lines, goal = table(methods)
        goals[(name, kind)] = goal
        print(f"### {name}, {kind} splits ({goal['splits']})\n")
        print("\n".join(lines) + "\n")
    print(
        "| set | kind | lowest NLL | fsgld / fsghmc within one s.e. | coverage fsgld / fsghmc | seconds / default's, fsgld / fsghmc |"
    )
    print("|---|---|---|---|---|---|")
    for (name, kind), g in sorted(goals.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        within = ", ".join(g["within"]) or "neither"
        cov = " / ".join(f"{g['coverage'][m]:.3f}" for m in FUNCTIONAL)
        ratio = " / ".join(f"{g['ratio'][m]:.2f}x" for m in FUNCTIONAL)
        print(f"| {name} | {kind} | {NAMES.get(g['best'], g['best'])} | {within} | {cov} | {ratio} |")


if __name__ == "__main__":
    main()
