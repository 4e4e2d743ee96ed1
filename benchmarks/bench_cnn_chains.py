"""K chains' gradient of the image bench's CPU CNN: one vmapped computation against a loop.

``Target.vectorized(chain_batched=True)`` gives K chains' log posterior and gradient as one
``torch.func.vmap`` computation (for a convolution, a grouped convolution); the loop computes each
chain's gradient on its own.  Both are timed in the same run against a plain PyTorch forward and
backward of one network on the same rows (``plain``), for the default recipe's shape (4 chains of
32 rows) and the image bench ensemble's (5 members of 125 rows).  Random MNIST-shaped images.

Run:  python -m benchmarks.bench_cnn_chains --threads 1 [--out benchmarks/results/cnn_chains.json]
"""

from __future__ import annotations

import argparse

import torch

import bnnkit
from benchmarks._timing import time_per_call, write_results
from bnnkit.nets import small_cnn

N = 60_000
SHAPES = ((4, 32), (5, 125))  # (chains, rows): the default's MAP phase, the image bench's ensemble


def run(number: int) -> dict:
    torch.manual_seed(0)
    net = small_cnn()
    post = bnnkit.Posterior(
        net, bnnkit.likelihoods.Categorical(), bnnkit.priors.GaussianPrior(1.0), num_data=N
    )
    target = post.target()
    mapped = target.vectorized(chain_batched=True)
    rows = {}
    for k, m in SHAPES:
        gens = [torch.Generator().manual_seed(c) for c in range(k)]
        x = torch.stack([0.05 * post.initial_position("prior", g) for g in gens])
        xb, yb = torch.randn(k, m, 1, 28, 28), torch.randint(10, (k, m))

        def plain(xb=xb, yb=yb, k=k) -> None:
            for c in range(k):
                net.zero_grad(set_to_none=True)
                torch.nn.functional.cross_entropy(net(xb[c]), yb[c], reduction="sum").backward()

        def vmapped(x=x, xb=xb, yb=yb) -> None:
            mapped.value_and_grad(x, (xb, yb))

        def loop(x=x, xb=xb, yb=yb, k=k) -> None:
            for c in range(k):
                target.value_and_grad(x[c], (xb[c], yb[c]))

        t = {
            name: time_per_call(fn, number=number, repeats=5, warmup=5)
            for name, fn in (("plain", plain), ("vmap", vmapped), ("loop", loop))
        }
        key = f"K{k}_M{m}"
        rows[key] = {f"{n}_ms": 1e3 * v for n, v in t.items()} | {
            "vmap_x_plain": t["vmap"] / t["plain"],
            "loop_x_plain": t["loop"] / t["plain"],
            "vmap_x_loop": t["vmap"] / t["loop"],
        }
        r = rows[key]
        print(
            f"{key}: plain {r['plain_ms']:.2f} ms, vmap {r['vmap_ms']:.2f} ms ({r['vmap_x_plain']:.2f}x), "
            f"loop {r['loop_ms']:.2f} ms ({r['loop_x_plain']:.2f}x); vmap / loop {r['vmap_x_loop']:.2f}"
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--number", type=int, default=20)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    rows = run(a.number)
    if a.out:
        write_results(a.out, {"benchmark": "cnn_chains", "rows": rows})


if __name__ == "__main__":
    main()
