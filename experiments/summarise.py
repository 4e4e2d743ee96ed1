"""Mean +- standard error over splits of the JSON lines that ``experiments.default_recipe`` writes
(or of a bench's ``uci_cells.jsonl``), one row per (data set, variant / method):

    python -m experiments.summarise experiments/results/default_recipe_choose.jsonl
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict


def summarise(paths: list[str]) -> str:
    rows: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for path in paths:
        for line in open(path):
            r = json.loads(line)
            rows[(r["dataset"], r.get("variant") or r.get("method"))].append(r)

    def ms(values: list[float]) -> str:
        v = [x for x in values if x is not None and math.isfinite(x)]
        if not v:
            return "-"
        m = sum(v) / len(v)
        se = (sum((x - m) ** 2 for x in v) / (len(v) - 1) / len(v)) ** 0.5 if len(v) > 1 else float("nan")
        return f"{m:.3f} +- {se:.3f}"

    out = [
        "| data set | variant | splits | test RMSE | test NLL | R-hat | seconds |",
        "|---|---|---:|---|---|---|---|",
    ]
    for (ds, v), rs in sorted(rows.items()):
        out.append(
            f"| {ds} | {v} | {len(rs)} | {ms([r['rmse'] for r in rs])} | {ms([r['nll'] for r in rs])} | "
            f"{ms([r.get('rhat') for r in rs])} | {ms([r['seconds'] for r in rs])} |"
        )
    return "\n".join(out)


if __name__ == "__main__":
    print(summarise(sys.argv[1:]))
