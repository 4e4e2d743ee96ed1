"""Does a sampler that moves further from its MAP starts carry the functional prior beyond the
data?  The bench's fsgld cell (or any method's) on gap / tail splits with the recipe's pSGLD step
per datum changed (``SamplerRecipe.step_size``, default 1e-3), one JSON line per cell.  A
diagnosis, not a recipe round: no rule was written for it.

    python -m experiments.functional_step_size --datasets boston --kinds tail --steps 3e-3,1e-2 \\
        --data ../shared/data --out experiments/results/functional_step_boston_tail.jsonl
"""

from __future__ import annotations

import argparse
import dataclasses


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="boston")
    ap.add_argument("--kinds", default="tail")
    ap.add_argument("--steps", default="3e-3,1e-2")
    ap.add_argument("--methods", default="fsgld")
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--splits", default=None, help="e.g. 0,1 (default: all of the kind)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import torch

    from bnnkit.bench.uci.cell import run_cell
    from bnnkit.bench.uci.protocol import FULL
    from experiments.functional_kernel import emit, groups

    torch.set_num_threads(1)
    for data, kind in groups(a.datasets, a.kinds, a.data):
        splits = range(data.num_splits) if a.splits is None else map(int, a.splits.split(","))
        for split in splits:
            d = data.split(split)
            for step in a.steps.split(","):
                for method in a.methods.split(","):
                    recipe = dataclasses.replace(FULL.recipe, step_size=float(step))
                    cell = run_cell(
                        method, d, dataclasses.replace(FULL, recipe=recipe), None, seed=split, progress=False
                    )
                    keep = ("rmse", "nll", "coverage_95", "seconds", "rhat")
                    emit({"dataset": data.name, "split_kind": kind, "split": split, "method": method, "step": step,
                          **{k: cell.get(k) for k in keep}}, a.out)  # fmt: skip


if __name__ == "__main__":
    main()
