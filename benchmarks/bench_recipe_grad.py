"""The default recipe's K-chain gradient: an MLP with the Gaussian noise learnt (its log precision
sampled under a Gamma prior), hand-written backward against vmap + autograd.

For ``K`` chains on their own minibatches of 32 rows, ``Target.vectorized(chain_batched=True)``
gives the log posterior and its gradient at ``[K, D]`` positions. A plain ``torch.nn`` MLP takes the
hand-written stacked backward (``bnnkit.core.mlp``: the network's passes written out, the Gaussian's
value and gradients in closed form); the same network with its activation wrapped in a module
bnnkit does not know takes the general route (``torch.func.vmap`` of autograd). Both are timed in the
same run against a plain PyTorch forward + backward of one network on 32 rows, and every figure is
also a ratio to it.

Run:  python -m benchmarks.bench_recipe_grad [--threads 1] [--out benchmarks/results/recipe_grad.json]
"""

from __future__ import annotations

import argparse
from functools import partial

import torch

import bnnkit
from benchmarks._timing import time_per_call, write_results


class _Tanh(torch.nn.Module):
    """tanh in a module bnnkit's MLP fast path does not recognise: the general (vmap) route."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x)


def _net(d: int, width: int, act: type[torch.nn.Module]) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(d, width), act(), torch.nn.Linear(width, width), act(), torch.nn.Linear(width, 1)
    )


def _plain_step(net: torch.nn.Module, xb: torch.Tensor, yb: torch.Tensor, scale: float) -> None:
    net.zero_grad(set_to_none=True)
    r = yb - net(xb).squeeze(-1)
    (0.5 * (r * r).sum() * scale).backward()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/recipe_grad.json")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--number", type=int, default=200)
    ap.add_argument("--chains", default="1,4,16")
    ap.add_argument("--widths", default="50,100")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    n, d, m = 506, 13, 32
    g = torch.Generator().manual_seed(0)
    x_all, y_all = torch.randn(n, d, generator=g), torch.randn(n, generator=g)
    results: dict[str, dict] = {}
    for width in (int(w) for w in args.widths.split(",")):
        ref = _net(d, width, torch.nn.Tanh)
        xb, yb = x_all[:m], y_all[:m]

        t_ref = time_per_call(partial(_plain_step, ref, xb, yb, n / m), number=args.number)
        print(f"width {width}: plain forward + backward, 32 rows (reference): {t_ref * 1e6:.1f} us")
        rows: dict[str, dict] = {"reference_us": t_ref * 1e6}
        for k in (int(c) for c in args.chains.split(",")):
            idx = torch.randint(n, (k, m), generator=g)
            batch = (x_all[idx], y_all[idx])
            times, grads = {}, {}
            for route, act in (("stacked", torch.nn.Tanh), ("vmap_autograd", _Tanh)):
                post = bnnkit.Posterior(
                    _net(d, width, act),
                    bnnkit.Gaussian(learn_noise=True, precision_prior=(1.0, 1e-3)),
                    bnnkit.GaussianPrior(1.0),
                    num_data=n,
                )
                target = post.target().vectorized(chain_batched=True)
                x0 = post.initial_position("module").expand(k, -1).clone()
                grads[route] = target.value_and_grad(x0, batch)[1]
                times[route] = time_per_call(partial(target.value_and_grad, x0, batch), number=args.number)
            # the two routes compute one gradient (to float rounding)
            diff = float((grads["stacked"] - grads["vmap_autograd"]).abs().max())
            scale = float(grads["vmap_autograd"].abs().max())
            if diff > 1e-4 * scale:
                raise SystemExit(f"the two routes disagree: max |difference| {diff:.3g} (scale {scale:.3g})")
            s, v = times["stacked"], times["vmap_autograd"]
            print(
                f"  K={k:<3d} stacked {s * 1e6:8.1f} us ({s / t_ref:5.2f}x ref)   vmap+autograd "
                f"{v * 1e6:8.1f} us ({v / t_ref:5.2f}x ref)   speed-up {v / s:4.2f}x"
            )
            rows[f"k{k}"] = {
                "stacked_us": s * 1e6,
                "vmap_autograd_us": v * 1e6,
                "stacked_over_reference": s / t_ref,
                "vmap_over_reference": v / t_ref,
                "speedup": v / s,
                "max_abs_grad_difference": diff,
            }
        results[f"width{width}"] = rows
    write_results(
        args.out,
        {
            "benchmark": "recipe_grad",
            "model": "MLP 13-W-W-1 tanh, Gaussian with learnt noise (Gamma(1, 1e-3)), 32 rows per chain, N=506",
            "threads": args.threads,
            "results": results,
        },
    )


if __name__ == "__main__":
    main()
