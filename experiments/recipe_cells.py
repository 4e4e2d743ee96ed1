"""Helper, and run as a module an exploratory runner: the UCI bench's ``default`` cell
(``bnnkit.bench.uci.cell.run_cell``: the same network, seed and scores) under changed recipes, one
JSON line per (set, split, label).  Used by the pre-registered recipe rounds (``fan_in_prior``,
``heldout_noise``, ``stacked_chains``, ``noiseless_step``)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from bnnkit.bench.uci.cell import run_cell
from bnnkit.bench.uci.protocol import FULL
from bnnkit.data.uci import load_uci

# the current recipe's stored default cells a round pairs its candidates with (a later file's cell
# replaces an earlier one's), and the scores a cell the candidate leaves alone must repeat
STORED_CELLS = (
    "docs/results/uci_bench/uci_cells.jsonl",
    "experiments/results/default_recipe_confirm_heldout_13.jsonl",
    "experiments/results/default_recipe_confirm_heldout_14.jsonl",
    "experiments/results/heldout_co2_dietox.jsonl",
)
SCORES = ("rmse_std", "nll_std", "rmse", "nll", "coverage_95")


def uci_cells(
    datasets: list[str],
    splits: list[int],
    root: str | None,
    out: str,
    recipes: Mapping[str, Mapping[str, Any]],
    key: str,
) -> None:
    """For each split of each set, the bench's ``default`` cell with the recipe changed by each of
    ``recipes`` (label -> SamplerRecipe fields), appended to ``out`` with ``key: label`` and the
    training targets' sd (standardised units: 1 up to the estimator)."""
    for name in datasets:
        for split in splits:
            data = load_uci(name, split, root=root)
            for label, changes in recipes.items():
                cfg = dataclasses.replace(FULL, recipe=dataclasses.replace(FULL.recipe, **changes))
                cell = run_cell("default", data, cfg, None, split, False)
                ysd = float(data.y_train.double().std())
                row = {"dataset": name, "split": split, key: label, "y_train_sd": ysd, **cell}
                with open(out, "a") as f:
                    f.write(json.dumps(row, default=str) + "\n")
                print(name, split, label, round(cell["nll"], 3), round(cell["rmse"], 3),
                      round(cell["seconds"], 1), flush=True)  # fmt: skip


def gap_tail_cells(
    datasets: str,
    kinds: str,
    methods: str,
    root: str,
    out: str,
    recipes: Mapping[str, Mapping[str, Any]],
    key: str,
) -> None:
    """Every gap / tail split of ``datasets``: the bench's cell of each method under each of
    ``recipes`` (label -> SamplerRecipe fields, in order), one JSON line each with ``key: label``."""
    from experiments.functional_kernel import emit, groups

    for data, kind in groups(datasets, kinds, root):
        for split in range(data.num_splits):
            d = data.split(split)
            for method in methods.split(","):
                for label, changes in recipes.items():
                    cfg = dataclasses.replace(FULL, recipe=dataclasses.replace(FULL.recipe, **changes))
                    cell = run_cell(method, d, cfg, None, seed=split, progress=False)
                    emit({"dataset": data.name, "split_kind": kind, "split": split, "method": method,
                          key: label, **cell}, out)  # fmt: skip


def run_round(
    a: Any, label: str, candidate: Mapping[str, Any], key: str, splits: Iterable[int] | None = None
) -> None:
    """A recipe round's cells from its parsed options ``a`` (:func:`add_cell_arguments`, and
    ``--kinds`` where the script has it), single-threaded: the candidate recipe (with ``--both``
    the current one first) on every gap / tail split of ``--kinds``, else on the random splits
    ``splits`` (default ``0 .. --splits - 1``), one JSON line per cell with ``key: label``."""
    import torch

    torch.set_num_threads(1)
    recipes = {"current": {}, label: candidate} if a.both else {label: candidate}
    if getattr(a, "kinds", None):
        gap_tail_cells(a.datasets, a.kinds, "default", a.data, a.out, recipes, key)
        return
    uci_cells(
        a.datasets.split(","),
        list(range(a.splits) if splits is None else splits),
        a.data,
        a.out,
        recipes,
        key,
    )


def read_rows(paths: Iterable[str]) -> list[dict]:
    """Every JSON line of the files ``paths``, in order."""
    return [json.loads(line) for p in paths for line in open(p)]


def cell_key(r: dict) -> tuple:
    """Which cell a row is: (set, kind of split, method, split)."""
    return r["dataset"], r.get("split_kind", "random"), r.get("method", "default"), r["split"]


def round_table(rows: list[dict], key: str, label: str, applied: str) -> None:
    """Per (set, kind, method) of a recipe round's cells (``key: label`` against ``key:
    "current"``): the paired NLL change (candidate minus current) +- s.e., the RMSE ratio, the
    coverage, on how many splits the rule applied (the cell's field ``applied`` not None), and
    whether the cells where it did not apply equal the current ones.  The current cell is the same
    process's where ``rows`` have one, else the stored protocol-14 cell."""
    stored = stored_default_cells(STORED_CELLS)
    current = {cell_key(r): r for r in rows if r.get(key) == "current"}
    per = defaultdict(list)
    for r in rows:
        if r.get(key) != label:
            continue
        group = cell_key(r)[:3]
        cur = current.get(cell_key(r))
        if cur is None and group[1] == "random":
            cur = stored.get((r["dataset"], r["split"]))
        if cur is not None:
            per[group].append((r, cur))
    pooled = []
    for (name, kind, method), pairs in sorted(per.items()):
        used = [r.get(applied) is not None for r, _ in pairs]
        d = [r["nll"] - c["nll"] for r, c in pairs]
        pooled += [x for x, a in zip(d, used) if a]
        m, se, verdict = paired(d)
        equal = all(all(r[k] == c[k] for k in SCORES) for (r, c), a in zip(pairs, used) if not a)
        ratio = sum(r["rmse"] for r, _ in pairs) / sum(c["rmse"] for _, c in pairs)
        cov = sum(r["coverage_95"] for r, _ in pairs) / len(pairs)
        cov0 = sum(c["coverage_95"] for _, c in pairs) / len(pairs)
        print(f"{name:26s} {kind:6s} {method:7s} n={len(d):2d} applied on {sum(used):2d}  "
              f"paired NLL {m:+.4f} +- {se:.4f} ({verdict})  RMSE x{ratio:.3f}  coverage {cov0:.3f} -> {cov:.3f}  "
              f"unapplied cells equal: {equal}")  # fmt: skip
    if len(pooled) > 1:
        m, se, verdict = paired(pooled)
        print(f"pooled over the {len(pooled)} cells where it applied: {m:+.4f} +- {se:.4f} ({verdict})")


def add_cell_arguments(ap: Any) -> None:
    """The options of a recipe round's script: the sets and splits to run, the data and output,
    ``--both`` (the current recipe's cell too), or ``--table`` over finished cell files."""
    ap.add_argument("--datasets")
    ap.add_argument("--splits", type=int, default=10)
    ap.add_argument("--data", default=None)
    ap.add_argument("--out")
    ap.add_argument("--table", nargs="*", help="print the paired table of these cell files")
    ap.add_argument("--both", action="store_true", help="also the current recipe's cell, same process")


def stored_default_cells(paths: Iterable[str]) -> dict[tuple[str, int], dict]:
    """The ``default`` cells of random splits in the JSON-lines files ``paths``, by (set, split);
    a later file's cell replaces an earlier one's."""
    out = {}
    for path in paths:
        for line in open(path):
            c = json.loads(line)
            if c.get("method") == "default" and c.get("split_kind", "random") == "random":
                out[(c["dataset"], c["split"])] = c
    return out


def paired(diffs: list[float]) -> tuple[float, float, str]:
    """Mean and s.e. of paired differences (candidate minus current), and whether the candidate is
    better or worse by more than the s.e. (else a tie)."""
    m = sum(diffs) / len(diffs)
    se = (
        (sum((x - m) ** 2 for x in diffs) / (len(diffs) - 1) / len(diffs)) ** 0.5
        if len(diffs) > 1
        else math.nan
    )
    return m, se, "better" if m < -se else "worse" if m > se else "tie"


def main() -> None:
    """An exploratory run (no rule): the default cell with the recipe changed by ``--recipe`` (a
    JSON object of SamplerRecipe fields) on the given splits, each line labelled ``--label``.

        python -m experiments.recipe_cells --datasets seals,economics --splits 0,1 \\
            --recipe '{"map_lr_drops": 2}' --label drops2 --data DIR --out FILE
    """
    import argparse

    import torch

    ap = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    ap.add_argument("--datasets", required=True)
    ap.add_argument("--splits", default="0,1,2,3,4,5,6,7,8,9")
    ap.add_argument("--recipe", required=True, help="e.g. '{\"step_size\": 3e-4}'")
    ap.add_argument("--label", required=True)
    ap.add_argument("--data", default=None)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    splits = [int(s) for s in a.splits.split(",")]
    uci_cells(a.datasets.split(","), splits, a.data, a.out, {a.label: json.loads(a.recipe)}, "variant")


if __name__ == "__main__":
    main()
