"""Throughput of K chains run as one vectorised computation (``chain_method="vectorized"``).

Model: MLP 13-50-50-1 (tanh), Gaussian likelihood, N = 506 rows, minibatch 32 per chain, SGLD
and SGHMC, float32.  For K = 1, 4, 16, 64 chains the kernel step runs on stacked positions
``[K, D]`` with every chain on its own minibatch (``ChainMinibatches``); eager steps take the
hand-batched MLP route (``core/mlp.py``), compiled ones the compiled vmap route.  We
report chain-steps per second and the speed-up over one sequential chain (the ideal is K).  The issue's target is
``K=16 >= 0.8 x 16`` the chain-steps per second of ``K=1``.

Reference: a plain PyTorch forward + backward + ``torch.optim.SGD`` step on the same MLP and
minibatch, timed in the same run; every figure is also given as a ratio to it.

Run:  python -m benchmarks.bench_chains [--compile] [--out benchmarks/results/chains.json]
"""

from __future__ import annotations

import argparse
import time

import torch

import bnnkit
from benchmarks._timing import time_per_call, write_results
from bnnkit.data import Minibatches
from bnnkit.data.minibatch import ChainMinibatches
from bnnkit.nets import mlp


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/chains.json")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--number", type=int, default=200)
    ap.add_argument("--chains", default="1,4,16,64")
    ap.add_argument("--compile", action="store_true", help="also time the compiled vectorised step")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    n, m = 506, 32
    X, y = torch.randn(n, 13), torch.randn(n)

    net = mlp(13, 50)
    opt = torch.optim.SGD(net.parameters(), lr=1e-6)
    plain = Minibatches(X, y, batch_size=m)
    pgen = torch.Generator().manual_seed(0)

    def sgd_step() -> None:
        xb, yb = plain.next(pgen)
        opt.zero_grad(set_to_none=True)
        r = yb - net(xb).squeeze(-1)
        loss = 0.5 * (r * r).sum() * (n / m)
        loss.backward()
        opt.step()

    post = bnnkit.Posterior(mlp(13, 50), bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0), num_data=n)
    t_sgd = time_per_call(sgd_step, number=args.number)
    print(f"plain SGD step (reference): {t_sgd * 1e6:.1f} us")

    results: dict[str, dict] = {}
    algorithms = {"sgld": bnnkit.SGLD(1e-4), "sghmc": bnnkit.SGHMC(1e-3, friction=10.0)}
    modes = [("eager", False)] + ([("compiled", True)] if args.compile else [])
    for name, alg in algorithms.items():
        # one sequential chain: the plain kernel on a [D] position
        kernel = alg.build(post.target())
        seq_rate = chain_steps_per_s(kernel, post.initial_position("module"), plain, args.number)
        print(
            f"\n{name}: sequential K=1  {seq_rate:9.0f} chain-steps/s   step/SGD {1 / seq_rate / t_sgd:5.2f}"
        )
        rows = {"sequential_k1": {"chain_steps_per_s": seq_rate, "step_over_sgd": 1 / seq_rate / t_sgd}}
        for label, compiled in modes:
            for k in (int(c) for c in args.chains.split(",")):
                vtarget = post.target().vectorized(chain_batched=True, compile=compiled)
                kernel = alg.build(vtarget)
                x0 = post.initial_position("module").expand(k, -1).clone()
                stream = ChainMinibatches(Minibatches(X, y, batch_size=m), k)
                t0 = time.perf_counter()
                warm = chain_steps_per_s(kernel, x0, stream, 3)  # compiles on the first call
                first = time.perf_counter() - t0
                rate = chain_steps_per_s(kernel, x0, stream, args.number)
                speedup = rate / seq_rate
                print(
                    f"{name}: {label:8s} K={k:<3d} {rate:9.0f} chain-steps/s   x{speedup:5.2f} of K=1 "
                    f"(ideal {k}, efficiency {speedup / k:4.2f})   step/SGD {k / rate / t_sgd:5.2f}"
                    + (f"   first calls {first:.1f} s" if compiled else "")
                )
                rows[f"{label}_k{k}"] = {
                    "chain_steps_per_s": rate,
                    "speedup_over_sequential_k1": speedup,
                    "efficiency": speedup / k,
                    "step_over_sgd": k / rate / t_sgd,
                    "first_calls_s": first if compiled else None,
                }
                del warm
        results[name] = rows
    k1, k16 = results["sgld"].get("eager_k1"), results["sgld"].get("eager_k16")
    if k1 is not None and k16 is not None:
        like = k16["chain_steps_per_s"] / (16 * k1["chain_steps_per_s"])
        print(
            f"\ntarget: SGLD eager K=16 efficiency {like:.2f} against vectorised K=1, "
            f"{k16['efficiency']:.2f} against the sequential chain (>= 0.8 asked)"
        )
    write_results(
        args.out,
        {
            "benchmark": "vectorised_chains",
            "model": "MLP 13-50-50-1 tanh, minibatch 32 per chain, N=506",
            "sgd_step_us": t_sgd * 1e6,
            "results": results,
        },
    )


def chain_steps_per_s(kernel, x0: torch.Tensor, stream, number: int) -> float:
    """Chain-steps per second of ``kernel.step`` (median of repeats, minibatch drawing included)."""
    gen = torch.Generator().manual_seed(1)
    state = {"s": kernel.init(x0, stream.next(gen))}
    k = x0.shape[0] if x0.ndim == 2 else 1

    def step() -> None:
        state["s"], _ = kernel.step(state["s"], stream.next(gen), gen)

    t = time_per_call(step, number=number, repeats=5, warmup=min(20, number))
    return k / t


if __name__ == "__main__":
    main()
