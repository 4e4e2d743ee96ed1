"""Distributed SGLD with torchrun: data-parallel (each rank a shard) or chain-parallel.

Run (CPUs, gloo; on a GPU machine the same command picks NCCL):

    torchrun --standalone --nproc_per_node=2 examples/torchrun_sgld.py
    torchrun --standalone --nproc_per_node=2 examples/torchrun_sgld.py --mode chains
    python examples/torchrun_sgld.py            # the same script as a one-rank job

``--mode data`` (default): every rank keeps a contiguous shard of the training rows; each step
all ranks walk the same global minibatch (drawn from identically seeded generators), the
minibatch gradient is all-reduced and the injected noise is the same on every rank, so the
ranks hold the same parameters and the draws equal a single-process run on the same
minibatches (``--verify`` reruns it on rank 0 and prints the largest difference).

``--mode chains``: every rank runs its share of the chains (rank r: chains r, r+W, ...) on all
the data; the draws are gathered on rank 0 and equal the single-process multi-chain run.

Rank 0 prints the test RMSE of the posterior predictive mean.  The data are synthetic (no
download): ``y = sin(x0) + 0.5 x1^2 - x2 x3 + N(0, 0.1^2)`` with 4 standard-normal inputs.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.distributed.elastic.multiprocessing.errors import record

import bnnkit
from bnnkit import distributed as bd
from bnnkit.data import Minibatches
from bnnkit.nets import mlp
from bnnkit.predict import predict, rmse


def make_data(n_train: int, n_test: int = 500, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n_train + n_test, 4, generator=g)
    f = torch.sin(x[:, 0]) + 0.5 * x[:, 1] ** 2 - x[:, 2] * x[:, 3]
    y = f + 0.1 * torch.randn(n_train + n_test, generator=g)
    return (x[:n_train], y[:n_train]), (x[n_train:], y[n_train:])


@record  # torchrun then reports the failing rank's traceback in its summary
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["data", "chains"], default="data")
    ap.add_argument("--num-train", type=int, default=4000)
    ap.add_argument("--batch-size", type=int, default=100)
    ap.add_argument("--num-samples", type=int, default=100)
    ap.add_argument("--num-warmup", type=int, default=3000)
    ap.add_argument("--thin", type=int, default=10)
    ap.add_argument("--num-chains", type=int, default=2)
    ap.add_argument("--step-size", type=float, default=1e-6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backend", default=None, help="gloo or nccl (default: nccl with CUDA, else gloo)")
    ap.add_argument("--timeout", type=float, default=300.0, help="collective timeout in seconds")
    ap.add_argument("--verify", action="store_true", help="rank 0 reruns single-process and compares")
    ap.add_argument("--quick", action="store_true", help="a short run (smoke test)")
    args = ap.parse_args()
    if args.quick:
        args.num_samples, args.num_warmup, args.thin = 20, 300, 5
    torch.set_num_threads(1)

    with bd.init_from_env(backend=args.backend, timeout_s=args.timeout) as info:
        (x, y), (x_test, y_test) = make_data(args.num_train)
        torch.manual_seed(0)  # the same initial module on every rank
        post = bnnkit.Posterior(mlp(4, 50), bnnkit.Gaussian(0.1), bnnkit.GaussianPrior(1.0), num_data=len(x))
        algorithm = bnnkit.SGLD(step_size=args.step_size)
        run = dict(
            num_samples=args.num_samples,
            num_warmup=args.num_warmup,
            thin=args.thin,
            num_chains=args.num_chains,
            seed=args.seed,
            init="module",
        )
        t0 = time.perf_counter()
        if args.mode == "data":
            shard = bd.ShardedMinibatches.from_full(x, y, batch_size=args.batch_size)
            print(
                f"rank {info.rank}/{info.world_size} ({info.backend}): rows {shard.shard_start}-{shard.shard_stop - 1}"
            )
            samples = bnnkit.sample(algorithm, bd.data_parallel(post), shard, progress=False, **run)
        else:
            print(
                f"rank {info.rank}/{info.world_size} ({info.backend}): chains {bd.chains_of_rank(args.num_chains, info.rank, info.world_size)}"
            )
            stream = Minibatches(x, y, batch_size=args.batch_size)
            samples = bd.chain_parallel_sample(algorithm, post, stream, progress=False, **run)
        seconds = time.perf_counter() - t0

        if info.is_main:
            pred = predict(post, samples, x_test)
            print(
                f"{'data' if args.mode == 'data' else 'chain'}-parallel SGLD on {info.world_size} rank(s): {samples.num_chains} chains x "
                f"{samples.num_draws} draws in {seconds:.1f} s; test RMSE {rmse(pred.mean, y_test):.4f}"
            )
            if args.verify:
                ref = bnnkit.sample(
                    algorithm, post, Minibatches(x, y, batch_size=args.batch_size), progress=False, **run
                )
                diff = (samples.positions - ref.positions).abs().max().item()
                print(f"single-process run on the same minibatches: max |difference| of the draws {diff:.2e}")


if __name__ == "__main__":
    main()
