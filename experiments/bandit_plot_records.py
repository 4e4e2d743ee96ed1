"""Regret curves of bandit records from several files in one plot (e.g. of runs with different configs).

``bnnkit bench bandit --from-runs`` rebuilds a report from the records of *one* configuration;
this plots every record of the given files for one pattern, one line per method (mean over seeds,
min-max band, as the bandit's own plots), e.g. the SG agents beside the fSG agents with the fix
(``docs/img/bandit_fsg_p0.5.png``)::

    python -m experiments.bandit_plot_records experiments/results/bandit_fsg_weight_term/sgld_sghmc.jsonl \
        experiments/results/bandit_fsg_weight_term/fsgld_fsghmc_sgld_weight_term.jsonl --pattern 0.5 \
        --out docs/img/bandit_fsg_p0.5.png

A method found in two files is an error (the plot labels lines by method only).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bnnkit.bench.bandit.report import curve_index, plot_regret_curves


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", nargs="+")
    ap.add_argument("--pattern", type=float, default=0.5)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    curves: dict[str, list[list[float]]] = {}
    source: dict[str, str] = {}
    steps, seeds = None, set()
    for path in args.records:
        for line in Path(path).read_text().splitlines():
            r = json.loads(line)
            if r["pattern"] != args.pattern:
                continue
            m = r["method"]
            if source.setdefault(m, path) != path:
                raise SystemExit(f"{m} has records in {source[m]} and {path}; give one file per method.")
            steps = steps or r["steps"]
            if r["steps"] != steps:
                raise SystemExit(f"records of {steps} and {r['steps']} interactions; give one length.")
            curves.setdefault(m, []).append(r["curve"])
            seeds.add(r["seed"])
    if not curves:
        raise SystemExit(f"no record of pattern p={args.pattern:g} in {', '.join(args.records)}")
    grid = curve_index(steps, len(next(iter(curves.values()))[0]))
    note = "records: " + ", ".join(Path(p).name for p in args.records)
    plot_regret_curves(Path(args.out), args.pattern, curves, grid, sorted(seeds), note)


if __name__ == "__main__":
    main()
