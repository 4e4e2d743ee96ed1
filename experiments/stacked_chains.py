"""Stack the default recipe's chains on nearly noiseless targets?  Candidate:
``SamplerRecipe(chain_weights="auto")``: where the MAP phase's pooled held-out RMSE is below 0.1
of the training targets' sd (``noiseless_below``, the threshold registered at 07:27 UTC for
``experiments.heldout_noise``, reused unchanged), the predictive weights the four chains by
stacking their PSIS-LOO fit to (at most 2,000 of) the training rows
(``bnnkit.diagnostics.stacking``; Yao, Vehtari and Gelman 2022); equal weights elsewhere.  The
draws are the current recipe's: only the predictive's weights change.

**Choice** (made before this rule, on the choice sets yacht, energy, Boston and concrete, 10 splits;
``experiments.chain_stacking``, ``experiments/results/chain_stacking_exploratory.jsonl``): stacking
everywhere lowered yacht's NLL by 0.060 +- 0.020 and energy's by 0.036 +- 0.013 (MAP held-out RMSE
0.034-0.057 of the sd: the rule stacks there) and raised Boston's by 0.041 +- 0.019 and concrete's by
0.026 +- 0.022 (0.27-0.55: the rule leaves them).  With the rule: lower by more than the s.e. on two
of four, higher on none, RMSE 0.94x and 0.98x.

**The rule for confirmation, written before any confirmation cell (2026-11-28 08:09 UTC):**

- Sets: wine and kin8nm (10 splits), protein (5), and the never-seen diabetes, housing,
  computers, airquality, movies, diamonds (3 splits) and co2, dietox (10 splits), the candidate's
  ``default`` cell paired with the stored current cell (``docs/results/uci_bench/uci_cells.jsonl``,
  ``experiments/results/default_recipe_confirm_heldout_13.jsonl``, ``..._14.jsonl``,
  ``heldout_co2_dietox.jsonl``).
- (a) On every set where the rule stacks on a majority of splits, the mean paired test-NLL
  change is not positive by more than its s.e. and the RMSE is not more than 5 % worse.
  (b) Where it stacks on no split, every score equals the stored cell's.  (c) It stacks on a
  majority of splits of at least one of these sets (otherwise nothing confirmed it: not adopted).
  (d) Yacht's and energy's rows rerun with every method in one process: the default's seconds
  stay within 2x the ensemble's.
- Adopt (protocol 15) only if (a)-(d) hold.

Outcome: (a)-(d) held (co2 -0.032 +- 0.015, the ten other sets unchanged, yacht 1.9x the
ensemble's seconds), but on yacht's and energy's gap and tail splits the stacked default was
worse beyond the data (energy's tails: 6 of 6, coverage 0.74 -> 0.63), so it was not adopted
(docs/results/default_recipe.md, "The chains stacked on nearly noiseless targets").

    python -m experiments.stacked_chains --datasets wine-quality-red,kin8nm --splits 10 \\
        --data ../shared/data --out experiments/results/stacked_chains_confirm.jsonl
    python -m experiments.stacked_chains --table experiments/results/stacked_chains_confirm.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict


def table(paths: list[str]) -> None:
    """Per set: the paired NLL change (candidate minus stored current cell) +- s.e., the RMSE
    ratio, on how many splits the rule stacked, and whether unstacked cells equal the stored."""
    from experiments.recipe_cells import SCORES, STORED_CELLS, paired, stored_default_cells

    stored = stored_default_cells(STORED_CELLS)
    per = defaultdict(list)
    for p in paths:
        for line in open(p):
            r = json.loads(line)
            per[r["dataset"]].append((r, stored[(r["dataset"], r["split"])]))
    for name, pairs in per.items():
        d = [r["nll"] - s["nll"] for r, s in pairs]
        m, se, verdict = paired(d)
        stacked = sum(r.get("stacking") is not None for r, _ in pairs)
        equal = all(all(r[k] == s[k] for k in SCORES) for r, s in pairs if r.get("stacking") is None)
        ratio = sum(r["rmse"] for r, _ in pairs) / sum(s["rmse"] for _, s in pairs)
        print(f"{name:28s} n={len(d):2d} stacked on {stacked:2d}  paired NLL {m:+.4f} +- {se:.4f} ({verdict})  "
              f"RMSE x{ratio:.3f}  unstacked cells equal stored: {equal}")  # fmt: skip


def main() -> None:
    from experiments.recipe_cells import add_cell_arguments

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_cell_arguments(ap)
    a = ap.parse_args()
    if a.table:
        table(a.table)
        return
    import torch

    from experiments.recipe_cells import uci_cells

    torch.set_num_threads(1)
    recipes = {"auto": {"chain_weights": "auto"}}
    uci_cells(a.datasets.split(","), list(range(a.splits)), a.data, a.out, recipes, "chain_weights")


if __name__ == "__main__":
    main()
