"""Cost of one fSGHMC step against one SGHMC step, and its growth with the measurement points.

Model: MLP 13-50-50-1 (tanh), Gaussian likelihood, minibatch 32 of N = 506 rows, float32.
SGHMC uses an N(0, 1) weight prior; fSGHMC an RBF GP prior (fixed hyperparameters, no fit)
at M fresh measurement points per step, half from the training inputs and half uniform in their
box, M in {20, 80, 320}.  The extra work per step: drawing X_M, the kernel matrix and its
Cholesky factor (float64, size M), one solve, and the network on M more rows in the same
forward/backward pass (the vector-Jacobian product J_M^T alpha).

The UCI protocol for N > 1000 is measured too: M = 1000 training rows (no uniform points) of
N = 5000 per step, each step a 1000 x 1000 factorisation; with a plain PyTorch forward+backward
of the same network on the minibatch as the yardstick.

Run:  python -m benchmarks.bench_fsgmcmc [--out benchmarks/results/fsgmcmc.json]
"""

from __future__ import annotations

import argparse

import torch

import bnnkit
from benchmarks._timing import cycling_batches, time_per_call, write_results
from bnnkit.bench.models import mlp
from bnnkit.functional import FSGHMC, FunctionalPosterior, GPPrior, MeasurementPoints


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/fsgmcmc.json")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--number", type=int, default=200)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    n, m = 506, 32
    X, y = torch.randn(n, 13), torch.randn(n)
    next_batch = cycling_batches(X, y, m)

    gen = torch.Generator().manual_seed(0)

    def step_time(alg, post) -> float:
        kernel = alg.build(post.target())
        st = {"s": kernel.init(post.initial_position("module"), (X[:m], y[:m]))}

        def step() -> None:
            st["s"], _ = kernel.step(st["s"], next_batch(), gen)

        return time_per_call(step, number=args.number, warmup=20)

    base_post = bnnkit.Posterior(mlp(13, 50), bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0), num_data=n)
    t_sghmc = step_time(bnnkit.SGHMC(1e-4, friction=10.0), base_post)
    gp = GPPrior("rbf", input_dim=13, lengthscale=3.6, outputscale=1.0)
    rows = {}
    for M in (20, 80, 320):
        meas = MeasurementPoints(num_from_data=M // 2, num_uniform=M - M // 2)
        post = FunctionalPosterior(mlp(13, 50), bnnkit.Gaussian(1.0), gp, meas, X, num_data=n)
        t = step_time(FSGHMC(1e-4, friction=10.0), post)
        rows[str(M)] = {"fsghmc_us": t * 1e6, "ratio": t / t_sghmc}
    # UCI protocol for N > 1000: 1000 fresh training rows per step.
    big_n = 5000
    x_big = torch.randn(big_n, 13)
    uci = MeasurementPoints(num_from_data=1000, num_uniform=0)
    post = FunctionalPosterior(mlp(13, 50), bnnkit.Gaussian(1.0), gp, uci, x_big, num_data=big_n)
    t_uci = step_time(FSGHMC(1e-4, friction=10.0), post)
    t_sghmc = min(t_sghmc, step_time(bnnkit.SGHMC(1e-4, friction=10.0), base_post))
    net, loss_fn = mlp(13, 50), torch.nn.MSELoss()

    def plain() -> None:
        xb, yb = next_batch()
        net.zero_grad(set_to_none=True)
        loss_fn(net(xb).squeeze(-1), yb).backward()

    t_plain = time_per_call(plain, number=args.number, warmup=20)
    print(f"plain forward+backward  : {t_plain * 1e6:8.1f} us")
    print(f"SGHMC step              : {t_sghmc * 1e6:8.1f} us")
    for M, r in rows.items():
        r["ratio"] = r["fsghmc_us"] / (t_sghmc * 1e6)
        print(f"fSGHMC step, M = {M:>4s}   : {r['fsghmc_us']:8.1f} us  ({r['ratio']:.2f}x SGHMC)")
    print(
        f"fSGHMC step, M = 1000 of N = {big_n} training rows (UCI, N > 1000): {t_uci * 1e3:.2f} ms "
        f"({t_uci / t_sghmc:.1f}x SGHMC, {t_uci / t_plain:.1f}x plain forward+backward)"
    )
    write_results(
        args.out,
        {
            "benchmark": "fsgmcmc_step",
            "model": "MLP 13-50-50-1 tanh, minibatch 32 of 506 rows, float32; RBF GP prior",
            "sghmc_us": t_sghmc * 1e6,
            "plain_forward_backward_us": t_plain * 1e6,
            "fsghmc_by_measurement_points": rows,
            "fsghmc_uci_1000_of_5000_rows_us": t_uci * 1e6,
            "threads": args.threads,
        },
    )


if __name__ == "__main__":
    main()
