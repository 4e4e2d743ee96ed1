"""Paired table of experiments/functional_kernel.py's rows against the bench's own cells (the same
set, kind, split and method at the default RBF kernel): held-out NLL difference (new kernel minus
RBF, negative is better), coverage and seconds.

    python -m experiments.functional_kernel_table experiments/results/functional_kernel_choose.jsonl \
        docs/results/gap/*_p13.jsonl docs/results/gap/energy_*_cells.jsonl
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict


def _rows(path: str) -> list[dict]:
    return [json.loads(line) for line in open(path) if line.strip()]


def _mean_se(v: list[float]) -> tuple[float, float]:
    m = sum(v) / len(v)
    if len(v) < 2:
        return m, float("nan")
    return m, math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1) / len(v))


def main(new_path: str, *cell_paths: str) -> None:
    base = {}
    for p in cell_paths:
        for c in _rows(p):
            if c.get("protocol") == 13:
                base[(c["dataset"], c["split_kind"], c["split"], c["method"])] = c
    groups = defaultdict(list)
    for r in _rows(new_path):
        b = base.get((r["dataset"], r["split_kind"], r["split"], r["method"]))
        if b is not None:
            groups[(r["dataset"], r["split_kind"], r["method"], r["kernel"])].append((r, b))
    print(
        "| set | kind | method | kernel | splits | NLL RBF | NLL kernel | paired (kernel - RBF) | coverage RBF / kernel | s/split RBF / kernel |"
    )
    print("|---|---|---|---|---:|---|---|---|---|---|")
    for (name, kind, method, kernel), pairs in sorted(groups.items()):
        nb, _ = _mean_se([b["nll"] for _, b in pairs])
        nk, _ = _mean_se([r["nll"] for r, _ in pairs])
        d, se = _mean_se([r["nll"] - b["nll"] for r, b in pairs])
        cb, _ = _mean_se([b["coverage_95"] for _, b in pairs])
        ck, _ = _mean_se([r["coverage_95"] for r, _ in pairs])
        sb, _ = _mean_se([b["seconds"] for _, b in pairs])
        sk, _ = _mean_se([r["seconds"] for r, _ in pairs])
        print(
            f"| {name} | {kind} | {method} | {kernel} | {len(pairs)} | {nb:.3f} | {nk:.3f} | {d:+.3f} +- {se:.3f} | "
            f"{cb:.2f} / {ck:.2f} | {sb:.0f} / {sk:.0f} |"
        )


if __name__ == "__main__":
    main(*sys.argv[1:])
