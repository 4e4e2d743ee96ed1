"""Does a fan-in-scaled weight prior fix the default recipe's wide predictive on small, nearly
noiseless sets?  On yacht the default's test RMSE is 1.14x the ensemble's and its 95 % intervals
cover every test row: the sampled noise sd settles at 0.05-0.06 (standardised) while the MAP's
training residual is 0.01, because draws under the N(0, 1) weight prior wander (a 50-unit layer's
prior pre-activations have variance ~50).  Candidate: ``SamplerRecipe(weight_prior="fan_in")``,
each layer's weights N(0, 1 / fan_in) (Neal's scaling; ``GaussianPrior.fan_in``), biases N(0, 1),
everything else as the recipe has it.  This runs the UCI bench's ``default`` cell
(``bnnkit.bench.uci.cell.run_cell``: same network, seed and scores) with the candidate recipe.

The rule, written before any cell ran (2026-11-28 05:16 UTC, commit 1afcd5e):

- **Choose** on the protocol-13 choice sets, yacht, energy, Boston and concrete (10 splits each),
  paired against their stored protocol-14 ``default`` cells (``docs/results/uci_bench/
  uci_cells.jsonl``, all reproduced at commit 049372a).  Adopt only if the mean paired test-NLL
  change is negative by more than its s.e. on at least 2 of the 4 sets, positive by more than its
  s.e. on none, and the mean RMSE is not worse by more than 5 % on any.
- **Confirm** on sets that did not choose it: wine and kin8nm (10 splits), protein (5), and the
  never-seen diabetes, housing, computers, airquality, movies and diamonds
  (``experiments.heldout_sets``, 3 splits, the current recipe's cell run beside the candidate's
  in the same process).  The paired NLL change may be positive by more than its s.e. on at most
  one of these nine sets; and on MNIST the image bench's ``default`` row with the candidate must
  keep error <= 1.0 % and ECE <= 0.01.

    python -m experiments.fan_in_prior --datasets yacht,energy,bostonHousing,concrete --splits 10 \\
        --data ../shared/data --out experiments/results/fan_in_prior_choose.jsonl
    python -m experiments.fan_in_prior --datasets wine-quality-red,kin8nm --splits 10 \\
        --data ../shared/data --out experiments/results/fan_in_prior_confirm.jsonl
    python -m experiments.fan_in_prior --datasets protein-tertiary-structure --splits 5 ...
    python -m experiments.heldout_sets --out /tmp/heldout-data
    python -m experiments.fan_in_prior --datasets diabetes,housing,computers,airquality,movies,diamonds \\
        --splits 3 --both --data /tmp/heldout-data --out experiments/results/fan_in_prior_confirm.jsonl
    python -m experiments.fan_in_prior --datasets mnist --data ../shared/data --out FILE
"""

from __future__ import annotations

import argparse
import json

CANDIDATE = "fan_in"


def uci(datasets: list[str], splits: int, root: str | None, out: str, both: bool) -> None:
    from experiments.recipe_cells import uci_cells

    priors = ("isotropic", CANDIDATE) if both else (CANDIDATE,)
    recipes = {p: {"weight_prior": p} for p in priors}
    uci_cells(datasets, list(range(splits)), root, out, recipes, "weight_prior")


def mnist(root: str | None, out: str) -> None:
    from experiments.image_records import mnist_records

    (record,) = mnist_records({"weight_prior": CANDIDATE}, ("default",), root)
    row = {"dataset": "mnist", "weight_prior": CANDIDATE, **record}
    with open(out, "a") as f:
        f.write(json.dumps(row, default=str) + "\n")
    print(json.dumps(row, default=str)[:300], flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", required=True)
    ap.add_argument("--splits", type=int, default=10)
    ap.add_argument("--data", default=None)
    ap.add_argument("--out", required=True)
    ap.add_argument("--both", action="store_true", help="also the current recipe's cell, same process")
    a = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    if a.datasets == "mnist":
        mnist(a.data, a.out)
        return
    uci(a.datasets.split(","), a.splits, a.data, a.out, a.both)


if __name__ == "__main__":
    main()
