"""Helper, not an experiment: the UCI bench's ``default`` cell (``bnnkit.bench.uci.cell.run_cell``:
the same network, seed and scores) under changed recipes, one JSON line per (set, split, label).
Used by the pre-registered recipe rounds (``fan_in_prior``, ``heldout_noise``)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from bnnkit.bench.uci.cell import run_cell
from bnnkit.bench.uci.protocol import FULL
from bnnkit.data.uci import load_uci


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
