"""Do the default recipe's chains drift away from their MAP starts?  For each split, the bench's
``default`` cell refitted (the same call and seed) and, in standardised units on the test rows:
the RMSE of each chain's MAP start and of their mean, the RMSE of each chain's draws' mean and of
all draws' mean, and each chain's per-draw RMSE every ``--every`` draws (the drift).  A diagnosis
(it reads test targets), not a recipe round.

    python -m experiments.chain_drift --dataset yacht --splits 7,5,0 --data ../shared/data
"""

from __future__ import annotations

import argparse


def drift(name: str, split: int, root: str | None, every: int) -> None:
    import torch

    from bnnkit.api.recipe import MAP_CHAINS, map_fits
    from bnnkit.bench.uci.cell import fit_cell
    from bnnkit.bench.uci.protocol import FULL
    from bnnkit.core.random import make_generator
    from bnnkit.core.samples import Samples
    from bnnkit.data.uci import load_uci
    from bnnkit.predict import predict

    data = load_uci(name, split, root=root)
    f = fit_cell("default", data, FULL, None, split, False)
    post, draws = f.posterior, f.draws
    xt, yt = data.x_test, data.y_test.reshape(-1)

    def rmse(m: torch.Tensor) -> float:
        return float(((m.reshape(-1) - yt) ** 2).mean().sqrt())

    with torch.no_grad():
        k = draws.positions.shape[0]
        fd = predict(post, draws, xt).f.reshape(k, draws.positions.shape[1], -1)
        # the MAP starts, recomputed from the same generators as the fit's (bnnkit.api.recipe)
        gens = [make_generator(split, MAP_CHAINS + c, xt.device) for c in range(k)]
        best, _, _ = map_fits(
            FULL.recipe, post, data.x_train, data.y_train, FULL.recipe.batch_size, gens, False
        )
        fm = predict(post, Samples(best.unsqueeze(1), {}, post.view, {}), xt).f.reshape(k, -1)
    print(f"{name} split {split}: MAP starts {[round(rmse(m), 4) for m in fm]}, their mean {rmse(fm.mean(0)):.4f}; "
          f"draws' mean per chain {[round(rmse(c.mean(0)), 4) for c in fd]}, all draws' mean {rmse(fd.mean((0, 1))):.4f}")  # fmt: skip
    for c in range(k):
        per_draw = ((fd[c] - yt) ** 2).mean(-1).sqrt()[::every]
        print(f"  chain {c} per-draw RMSE: " + " ".join(f"{float(v):.3f}" for v in per_draw))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="yacht")
    ap.add_argument("--splits", default="7")
    ap.add_argument("--data", default=None)
    ap.add_argument("--every", type=int, default=5)
    a = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    for s in a.splits.split(","):
        drift(a.dataset, int(s), a.data, a.every)


if __name__ == "__main__":
    main()
