"""Cost of one fSGHMC step against one SGHMC step and a plain PyTorch step, at 500 and 50,000 rows.

Model: MLP 13-50-50-1 (tanh), Gaussian likelihood, minibatch 32, float32.  SGHMC uses an N(0, 1)
weight prior; fSGHMC an RBF GP prior (fixed hyperparameters, no fit).  The plain step is a
forward+backward of the same network on the minibatch (MSE loss), the floor of any sampler step.

Measurement points: the UCI bench's default (its SG cells' setup in ``bnnkit.bench.uci.inference``):
every training input, fixed, when N <= 1000 (here N = 500: M = 500); else 1000 random training rows
(N = 50,000: M = 1000).  Each fSGHMC variant is timed in two prior forms:

- ``exact``: ``log N(f_M; 0, K)`` at those points (the paper's form): the network on M more rows
  each step, and for fresh points (N > 1000) an M x M kernel matrix and Cholesky factor each step;
  for the fixed set (N <= 1000) the factor is cached and a step needs a solve.
- ``vecchia``: the cheap form (``prior_form=Vecchia()``, ``bnnkit.functional.vecchia``): the pool
  is the reference draw of those points (fixed), its GP marginal in Vecchia form, built once; a
  step runs the network on ``q (k + 1)`` pool rows (8 x 9 = 72 by default) and no factorisation.

Timing under contention (the machine is shared): the variants are timed in interleaved rounds
(``--repeats`` rounds of ``--number`` calls each, after a warm-up), and each ratio is the median
over rounds of the per-round ratio, so a slow stretch of the machine hits both sides of a ratio.
The old sweep over M in {20, 80, 320} fresh points (N = 506, exact form) is kept with ``--sweep``.

Run:  python -m benchmarks.bench_fsgmcmc [--out benchmarks/results/fsgmcmc.json] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

import bnnkit
from benchmarks._timing import cycling_batches, write_results
from bnnkit.functional import FSGHMC, FunctionalPosterior, GPPrior, MeasurementPoints, Vecchia
from bnnkit.nets import mlp

D, HIDDEN, BATCH = 13, 50, 32


def _stepper(alg, post, X, y, next_batch, gen) -> Callable[[], None]:
    kernel = alg.build(post.target())
    st = {"s": kernel.init(post.initial_position("module"), (X[:BATCH], y[:BATCH]))}

    def step() -> None:
        st["s"], _ = kernel.step(st["s"], next_batch(), gen)

    return step


def _rounds(
    fns: dict[str, tuple[Callable[[], None], int]], repeats: int, warmup: int
) -> dict[str, list[float]]:
    """Seconds per call of each function, one entry per round; the functions alternate."""
    for fn, _ in fns.values():
        for _ in range(warmup):
            fn()
    out: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for name, (fn, number) in fns.items():
            t = time.perf_counter()
            for _ in range(number):
                fn()
            out[name].append((time.perf_counter() - t) / number)
    return out


def measure_rows(n: int, args) -> dict:
    """All variants at ``n`` training rows; times in microseconds, ratios as medians per round."""
    g = torch.Generator().manual_seed(n)
    X, y = torch.randn(n, D, generator=g), torch.randn(n, generator=g)
    next_batch = cycling_batches(X, y, BATCH)
    gen = torch.Generator().manual_seed(0)
    gp = GPPrior("rbf", input_dim=D, lengthscale=3.6, outputscale=1.0)
    meas = X if n <= 1000 else MeasurementPoints(num_from_data=1000, num_uniform=0)
    base = bnnkit.Posterior(mlp(D, HIDDEN), bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0), num_data=n)
    net, loss_fn = mlp(D, HIDDEN), torch.nn.MSELoss()

    def plain() -> None:
        xb, yb = next_batch()
        net.zero_grad(set_to_none=True)
        loss_fn(net(xb).squeeze(-1), yb).backward()

    fns = {
        "plain": (plain, args.number),
        "sghmc": (_stepper(bnnkit.SGHMC(1e-4, friction=10.0), base, X, y, next_batch, gen), args.number),
    }
    t0 = time.perf_counter()
    vpost = FunctionalPosterior(
        mlp(D, HIDDEN), bnnkit.Gaussian(1.0), gp, meas, X, num_data=n, prior_form=Vecchia()
    )
    build_s = time.perf_counter() - t0
    fns["fsghmc_vecchia"] = (_stepper(FSGHMC(1e-4, friction=10.0), vpost, X, y, next_batch, gen), args.number)
    if not args.skip_exact:
        epost = FunctionalPosterior(mlp(D, HIDDEN), bnnkit.Gaussian(1.0), gp, meas, X, num_data=n)
        # A fresh 1000 x 1000 factorisation per step takes tens of ms: fewer calls per round.
        number = args.number if n <= 1000 else max(3, args.number // 20)
        fns["fsghmc_exact"] = (_stepper(FSGHMC(1e-4, friction=10.0), epost, X, y, next_batch, gen), number)
    times = _rounds(fns, args.repeats, args.warmup)
    row: dict = {
        "train_rows": n,
        "measurement": f"all training inputs, fixed (M = {n})" if n <= 1000 else "1000 random training rows",
        "vecchia": vpost.vecchia.config(),
        "vecchia_build_s": build_s,
        "median_us": {k: statistics.median(v) * 1e6 for k, v in times.items()},
        "rounds_us": {k: [t * 1e6 for t in v] for k, v in times.items()},
    }
    for name in fns:
        if name.startswith("fsghmc"):
            for ref in ("sghmc", "plain"):
                row[f"{name}_over_{ref}"] = statistics.median(a / b for a, b in zip(times[name], times[ref]))
    return row


def sweep(args) -> dict:
    """The former bench: exact form at M fresh points (half data, half uniform), N = 506."""
    n = 506
    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(n, D, generator=g), torch.randn(n, generator=g)
    next_batch = cycling_batches(X, y, BATCH)
    gen = torch.Generator().manual_seed(0)
    gp = GPPrior("rbf", input_dim=D, lengthscale=3.6, outputscale=1.0)
    base = bnnkit.Posterior(mlp(D, HIDDEN), bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0), num_data=n)
    fns = {"sghmc": (_stepper(bnnkit.SGHMC(1e-4, friction=10.0), base, X, y, next_batch, gen), args.number)}
    for M in (20, 80, 320):
        meas = MeasurementPoints(num_from_data=M // 2, num_uniform=M - M // 2)
        post = FunctionalPosterior(mlp(D, HIDDEN), bnnkit.Gaussian(1.0), gp, meas, X, num_data=n)
        fns[str(M)] = (_stepper(FSGHMC(1e-4, friction=10.0), post, X, y, next_batch, gen), args.number)
    times = _rounds(fns, args.repeats, args.warmup)
    return {
        M: {
            "fsghmc_us": statistics.median(times[M]) * 1e6,
            "ratio": statistics.median(a / b for a, b in zip(times[M], times["sghmc"])),
        }
        for M in fns
        if M != "sghmc"
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/fsgmcmc.json")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--number", type=int, default=100, help="calls per round (exact form at N > 1000: /20)")
    ap.add_argument("--repeats", type=int, default=7, help="interleaved rounds; medians over them")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--rows", type=int, nargs="+", default=[500, 50_000])
    ap.add_argument("--skip-exact", action="store_true", help="time the Vecchia form only")
    ap.add_argument("--sweep", action="store_true", help="also the exact form at M = 20, 80, 320")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rows = {}
    for n in args.rows:
        r = rows[str(n)] = measure_rows(n, args)
        print(f"--- N = {n} training rows, measurement points: {r['measurement']}")
        for name, us in r["median_us"].items():
            extra = ""
            if name.startswith("fsghmc"):
                extra = f"  ({r[name + '_over_sghmc']:.2f}x SGHMC, {r[name + '_over_plain']:.2f}x plain)"
            print(f"  {name:16s} {us:10.1f} us{extra}")
        print(f"  Vecchia build (once): {r['vecchia_build_s'] * 1e3:.0f} ms")
    results: dict = {
        "benchmark": "fsgmcmc_step",
        "model": f"MLP {D}-{HIDDEN}-{HIDDEN}-1 tanh, minibatch {BATCH}, float32; RBF GP prior (lengthscale 3.6)",
        "timing": f"{args.repeats} interleaved rounds of {args.number} calls; medians; ratios are medians "
        "of per-round ratios",
        "by_train_rows": rows,
        "threads": args.threads,
    }
    if args.sweep:
        results["fsghmc_exact_by_measurement_points"] = sweep(args)
        for M, r in results["fsghmc_exact_by_measurement_points"].items():
            print(
                f"exact form, M = {M:>4s} fresh points (N = 506): {r['fsghmc_us']:8.1f} us ({r['ratio']:.2f}x SGHMC)"
            )
    write_results(args.out, results)


if __name__ == "__main__":
    main()
