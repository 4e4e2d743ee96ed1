"""The default recipe's K-chain gradient: an MLP with the Gaussian noise learnt (its log precision
sampled under a Gamma prior), hand-written backward against vmap + autograd; and the same for the
functional samplers' posterior (``bnnkit.fit(method="fsgld")``'s: an RBF GP prior in its Vecchia
form at the training inputs, so each chain's step also runs the network on 72 prior rows).

For ``K`` chains on their own minibatches of 32 rows, ``Target.vectorized(chain_batched=True)``
gives the log posterior and its gradient at ``[K, D]`` positions. A plain ``torch.nn`` MLP takes the
hand-written stacked backward (``bnnkit.core.mlp``: the network's passes written out, the Gaussian's
value and gradients in closed form); the same network with its activation wrapped in a module
bnnkit does not know takes the general route (``torch.func.vmap`` of autograd). Both are timed in the
same run against a plain PyTorch forward + backward of one network on 32 rows, and every figure is
also a ratio to it. The functional rows (``functional_*``) time ``Target.estimate_grad`` (the
gradient an SG-MCMC step sees, its prior rows drawn from a generator seeded alike for both routes).

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


def _posterior(net: torch.nn.Module, x: torch.Tensor, n: int, functional: bool):
    """The default recipe's posterior, or (``functional``) fsgld's: an RBF GP prior in its Vecchia
    form with every training input a measurement point, as ``bnnkit.fit`` builds it for N <= 1000."""
    lik = bnnkit.Gaussian(learn_noise=True, precision_prior=(1.0, 1e-3))
    if not functional:
        return bnnkit.Posterior(net, lik, bnnkit.GaussianPrior(1.0), num_data=n)
    from bnnkit.functional import FunctionalPosterior, GPPrior, Vecchia

    gp = GPPrior("rbf", input_dim=x.shape[1], lengthscale=3.0, outputscale=1.0)
    return FunctionalPosterior(net, lik, gp, x, x, num_data=n, prior_form=Vecchia())


def _gradient(target, x0: torch.Tensor, batch, gen: torch.Generator) -> torch.Tensor:
    return target.estimate_grad(x0, batch, gen)[1]


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
            row: dict[str, float] = {}
            for prefix in ("", "functional_"):
                for route, act in (("stacked", torch.nn.Tanh), ("vmap_autograd", _Tanh)):
                    post = _posterior(_net(d, width, act), x_all, n, functional=bool(prefix))
                    target = post.target().vectorized(chain_batched=True)
                    x0 = post.initial_position("module").expand(k, -1).clone()
                    call = partial(_gradient, target, x0, batch)
                    grads[route] = call(torch.Generator().manual_seed(1))
                    gen = torch.Generator().manual_seed(2)
                    times[route] = time_per_call(lambda call=call, gen=gen: call(gen), number=args.number)
                # the two routes compute one gradient (to float rounding)
                diff = float((grads["stacked"] - grads["vmap_autograd"]).abs().max())
                scale = float(grads["vmap_autograd"].abs().max())
                if diff > 1e-4 * scale:
                    raise SystemExit(
                        f"the two routes disagree: max |difference| {diff:.3g} (scale {scale:.3g})"
                    )
                s, v = times["stacked"], times["vmap_autograd"]
                print(
                    f"  K={k:<3d} {'functional prior' if prefix else 'weight prior'}: stacked {s * 1e6:8.1f} us ({s / t_ref:5.2f}x ref)   "
                    f"vmap+autograd {v * 1e6:8.1f} us ({v / t_ref:5.2f}x ref)   speed-up {v / s:4.2f}x"
                )
                row.update(
                    {
                        f"{prefix}stacked_us": s * 1e6,
                        f"{prefix}vmap_autograd_us": v * 1e6,
                        f"{prefix}stacked_over_reference": s / t_ref,
                        f"{prefix}vmap_over_reference": v / t_ref,
                        f"{prefix}speedup": v / s,
                        f"{prefix}max_abs_grad_difference": diff,
                    }
                )
            row["functional_over_weight_prior_stacked"] = row["functional_stacked_us"] / row["stacked_us"]
            print(
                f"  K={k:<3d} functional / weight prior, stacked: {row['functional_over_weight_prior_stacked']:.2f}x"
            )
            rows[f"k{k}"] = row
        results[f"width{width}"] = rows
    write_results(
        args.out,
        {
            "benchmark": "recipe_grad",
            "model": "MLP 13-W-W-1 tanh, Gaussian with learnt noise (Gamma(1, 1e-3)), 32 rows per chain, N=506; "
            "functional_*: RBF GP prior, Vecchia form (8 factors of 9 rows a step) at the 506 inputs",
            "threads": args.threads,
            "results": results,
        },
    )


if __name__ == "__main__":
    main()
