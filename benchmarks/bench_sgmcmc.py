"""Cost of one SGLD and one SGHMC step against a plain ``torch.optim.SGD`` step.

Model: MLP 13-50-50-1 (tanh), Gaussian likelihood, minibatch 32 of N = 506 rows, float32.

- baseline: ``opt.zero_grad(); loss = -loglik(batch) * N/M; loss.backward(); opt.step()``;
- baseline with the prior: the same with ``SGD(..., weight_decay=1)``, which adds the N(0, 1)
  prior's gradient ``w`` in the optimiser step: the gradient the samplers integrate, computed the
  way a plain PyTorch user would (ratios against both are reported);
- bnnkit kernel: ``kernel.step(state, batch, generator)`` of SGLD / SGHMC built from a
  :class:`bnnkit.Posterior` (Gaussian prior, N/M scaling, injected noise);
- bnnkit driver: wall time per step of ``bnnkit.sample`` (minibatch stream, draw bookkeeping,
  thinning 10) with the progress bar off;
- both eager and with the gradient compiled (``compile=True``; compile time reported apart).

The baseline is timed before and after the bnnkit steps and the faster of the two is used.

Run:  python -m benchmarks.bench_sgmcmc [--out benchmarks/results/sgmcmc.json]
"""

from __future__ import annotations

import argparse
import time

import torch

import bnnkit
from benchmarks._timing import mlp_workload, time_per_call, write_results
from bnnkit.data import Minibatches
from bnnkit.nets import mlp


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/sgmcmc.json")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--number", type=int, default=500)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    n, m = 506, 32
    X, y, next_batch, net, opt = mlp_workload(n, m)
    opt_wd = torch.optim.SGD(net.parameters(), lr=1e-6, weight_decay=1.0)

    def sgd_step(opt=opt) -> None:
        xb, yb = next_batch()
        opt.zero_grad(set_to_none=True)
        r = yb - net(xb).squeeze(-1)
        loss = 0.5 * (r * r).sum() * (n / m)
        loss.backward()
        opt.step()

    def sgd_wd_step() -> None:
        sgd_step(opt_wd)

    post = bnnkit.Posterior(mlp(13, 50), bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0), num_data=n)
    target = post.target()
    gen = torch.Generator().manual_seed(0)
    x0 = post.initial_position("module")
    compiled = target.compiled()
    results = {}
    t_sgd = time_per_call(sgd_step, number=args.number)
    t_wd = time_per_call(sgd_wd_step, number=args.number)
    algs = [("sgld", bnnkit.SGLD(1e-6)), ("sghmc", bnnkit.SGHMC(1e-3, friction=10.0))]
    for (name, alg), compile_ in [(a, c) for c in (False, True) for a in algs]:
        if compile_:
            name += "_compiled"
            if "compile_seconds" not in results:
                t0 = time.perf_counter()
                compiled.value_and_grad(x0, (X[:m], y[:m]))
                results["compile_seconds"] = time.perf_counter() - t0
        kernel = alg.build(compiled if compile_ else target)
        st = {"s": kernel.init(x0, (X[:m], y[:m]))}

        def step(kernel=kernel, st=st) -> None:
            st["s"], _ = kernel.step(st["s"], next_batch(), gen)

        t_kernel = time_per_call(step, number=args.number)
        steps = 4000
        t0 = time.perf_counter()
        bnnkit.sample(
            alg,
            post,
            Minibatches(X, y, batch_size=m, drop_last=True),
            num_samples=steps // 10,
            thin=10,
            num_warmup=0,
            progress=False,
            seed=0,
            compile=compile_,
        )
        t_driver = (time.perf_counter() - t0) / steps
        results[name] = {"kernel_us": t_kernel * 1e6, "driver_us": t_driver * 1e6}
    t_sgd = min(t_sgd, time_per_call(sgd_step, number=args.number))
    t_wd = min(t_wd, time_per_call(sgd_wd_step, number=args.number))
    print(f"torch.optim.SGD step          : {t_sgd * 1e6:8.1f} us")
    print(f"  with weight_decay (prior)   : {t_wd * 1e6:8.1f} us")
    print(f"compile time                  : {results['compile_seconds']:8.1f} s")
    for name, r in results.items():
        if not isinstance(r, dict):
            continue
        r["kernel_ratio"] = r["kernel_us"] / (t_sgd * 1e6)
        r["driver_ratio"] = r["driver_us"] / (t_sgd * 1e6)
        r["kernel_ratio_weight_decay"] = r["kernel_us"] / (t_wd * 1e6)
        r["driver_ratio_weight_decay"] = r["driver_us"] / (t_wd * 1e6)
        print(
            f"{name:5s} kernel step / driver step: {r['kernel_us']:8.1f} us ({r['kernel_ratio']:.2f}x;"
            f" {r['kernel_ratio_weight_decay']:.2f}x with decay) / {r['driver_us']:8.1f} us"
            f" ({r['driver_ratio']:.2f}x; {r['driver_ratio_weight_decay']:.2f}x)   (target <= 1.1x)"
        )
    write_results(
        args.out,
        {
            "benchmark": "sgmcmc_step",
            "model": "MLP 13-50-50-1 tanh, minibatch 32 of 506 rows, float32",
            "sgd_us": t_sgd * 1e6,
            "sgd_weight_decay_us": t_wd * 1e6,
            **results,
            "target_ratio": 1.1,
        },
    )


if __name__ == "__main__":
    main()
