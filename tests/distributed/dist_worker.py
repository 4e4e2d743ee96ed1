"""One rank of the distributed tests, started as a subprocess with torchrun's variables.

    RANK=r WORLD_SIZE=w MASTER_ADDR=127.0.0.1 MASTER_PORT=p python dist_worker.py SCENARIO OUT

Scenarios: ``runs`` (data-parallel SGLD/SGHMC/HMC and chain-parallel SGLD, draws saved to OUT)
and ``errors`` (ranks out of sync, then rank 1 hangs past a timeout, then rank 1 crashes).  The test compares the saved draws
with single-process runs built by :func:`problem` and the same settings.
"""

from __future__ import annotations

import sys
import time
from datetime import timedelta
from pathlib import Path

import torch

import bnnkit
from bnnkit import distributed as bd
from bnnkit.data import Minibatches

N, BATCH = 37, 8  # 37 rows: uneven shards and a short last batch of each epoch
SGLD_KW = dict(num_samples=50, num_warmup=0, thin=1, num_chains=1, seed=7, progress=False)
SGHMC_KW = dict(num_samples=50, num_warmup=0, thin=1, num_chains=2, seed=11, progress=False)
HMC_KW = dict(num_samples=10, num_warmup=10, num_chains=1, seed=5, progress=False)
CHAIN_KW = dict(num_samples=20, num_warmup=5, thin=2, seed=3, progress=False)
HANG_TIMEOUT_S = 2.0
UNEVEN_SPLIT = 33  # rank 0 holds rows [0, 33), rank 1 rows [33, 37): many batches miss rank 1


def problem(
    learn_noise: bool = False, dtype: torch.dtype = torch.float32
) -> tuple[bnnkit.Posterior, torch.Tensor, torch.Tensor]:
    """A small regression MLP (2 -> 8 -> 1) and its data; identical in every process."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, 2, generator=g, dtype=dtype)
    y = torch.sin(x[:, 0]) + 0.5 * x[:, 1] + 0.1 * torch.randn(N, generator=g, dtype=dtype)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).to(dtype)
    lik = (
        bnnkit.Gaussian(0.3, learn_noise=True, precision_prior=(2.0, 0.2))
        if learn_noise
        else bnnkit.Gaussian(0.3)
    )
    return bnnkit.Posterior(net, lik, bnnkit.GaussianPrior(1.0), num_data=N), x, y


def algorithms() -> dict[str, bnnkit.SGLD | bnnkit.SGHMC]:
    return {"sgld": bnnkit.SGLD(step_size=2e-3), "sghmc": bnnkit.SGHMC(step_size=2e-2, friction=5.0)}


def single_process_runs() -> dict[str, torch.Tensor]:
    """The reference: plain bnnkit.sample on the full data."""
    out = {}
    post, x, y = problem(learn_noise=True)
    out["sgld"] = bnnkit.sample(algorithms()["sgld"], post, Minibatches(x, y, batch_size=BATCH), **SGLD_KW)
    post, x, y = problem()
    out["sghmc"] = bnnkit.sample(algorithms()["sghmc"], post, Minibatches(x, y, batch_size=BATCH), **SGHMC_KW)
    post, x, y = problem(dtype=torch.float64)
    out["hmc"] = bnnkit.sample(bnnkit.HMC(step_size=0.01, num_steps=5), post, (x, y), **HMC_KW)
    post, x, y = problem()
    out["chains"] = bnnkit.sample(
        algorithms()["sgld"], post, Minibatches(x, y, batch_size=BATCH), num_chains=4, **CHAIN_KW
    )
    return out


def run_scenario_runs(info: bd.DistInfo, out: Path) -> None:
    # Data-parallel SGLD, contiguous shards, noise precision sampled with the weights.
    post, x, y = problem(learn_noise=True)
    shard = bd.ShardedMinibatches.from_full(x, y, batch_size=BATCH)
    s = bnnkit.sample(algorithms()["sgld"], bd.data_parallel(post), shard, **SGLD_KW)
    torch.save(
        {"positions": s.positions, "log_density": s.stats["log_density"]}, out / f"sgld_rank{info.rank}.pt"
    )

    # The same run streamed to a directory per rank, interrupted on every rank at step 25 and
    # resumed: every rank continues from its own (identical) checkpoint.
    run_dir = out / f"dp_run_rank{info.rank}"
    try:
        bnnkit.sample(
            algorithms()["sgld"],
            bd.data_parallel(post),
            FailingStream(shard, info.rank, fail_at=25, all_ranks=True),
            output=str(run_dir),
            chunk_size=10,
            **SGLD_KW,
        )
    except RuntimeError as err:
        assert "injected failure" in str(err)
    s = bnnkit.sample(
        algorithms()["sgld"], bd.data_parallel(post), shard, output=str(run_dir), chunk_size=10, **SGLD_KW
    )
    torch.save({"positions": s.positions}, out / f"sgld_resumed_rank{info.rank}.pt")

    # Data-parallel SGHMC, 2 chains, a lopsided split: rank 1 often has no row of a minibatch.
    post, x, y = problem()
    lo, hi = (0, UNEVEN_SPLIT) if info.rank == 0 else (UNEVEN_SPLIT, N)
    shard = bd.ShardedMinibatches(x[lo:hi], y[lo:hi], num_data=N, shard_start=lo, batch_size=BATCH)
    s = bnnkit.sample(algorithms()["sghmc"], bd.data_parallel(post), shard, **SGHMC_KW)
    torch.save(
        {"positions": s.positions, "log_density": s.stats["log_density"]}, out / f"sghmc_rank{info.rank}.pt"
    )

    # Data-parallel full-batch HMC (float64): each rank passes its whole shard as the data.
    post, x, y = problem(dtype=torch.float64)
    rows = bd.shard_range(N)
    hmc = bnnkit.HMC(step_size=0.01, num_steps=5)
    s = bnnkit.sample(
        hmc, bd.data_parallel(post), (x[rows.start : rows.stop], y[rows.start : rows.stop]), **HMC_KW
    )
    torch.save(
        {"positions": s.positions, "log_density": s.stats["log_density"]}, out / f"hmc_rank{info.rank}.pt"
    )

    # Chain-parallel: 4 chains over 2 ranks, every rank with all the data; gathered in memory
    # and, streamed to one directory, read back from the files.
    post, x, y = problem()
    for gather in ("memory", "files"):
        s = bd.chain_parallel_sample(
            algorithms()["sgld"],
            post,
            Minibatches(x, y, batch_size=BATCH),
            num_chains=4,
            output=str(out / "chain_run") if gather == "files" else None,
            gather=gather,
            **CHAIN_KW,
        )
        if info.rank == 0:
            torch.save({"positions": s.positions, "config": s.config}, out / f"chains_{gather}.pt")
        else:
            assert s is None


class FailingStream:
    """A stream that, on rank 1 (or every rank) at a given step, raises (a crash) or sleeps (a hang)."""

    def __init__(
        self,
        inner: bd.ShardedMinibatches,
        rank: int,
        fail_at: int,
        sleep_s: float = 0.0,
        all_ranks: bool = False,
    ):
        self.inner, self.rank, self.fail_at, self.sleep_s, self.calls = inner, rank, fail_at, sleep_s, 0
        self.all_ranks = all_ranks

    def next(self, gen: torch.Generator):
        self.calls += 1
        if (self.rank == 1 or self.all_ranks) and self.calls == self.fail_at:
            if not self.sleep_s:
                raise RuntimeError("injected failure on rank 1")
            time.sleep(self.sleep_s)
        return self.inner.next(gen)

    def state_dict(self) -> dict:
        return self.inner.state_dict()

    def initial_state(self) -> dict:
        return self.inner.initial_state()

    def load_state_dict(self, state: dict) -> None:
        self.inner.load_state_dict(state)


def run_scenario_errors(info: bd.DistInfo, out: Path) -> None:
    post, x, y = problem()
    shard = bd.ShardedMinibatches.from_full(x, y, batch_size=BATCH)
    # 1. Ranks out of sync (another seed on rank 1): every rank raises, nobody hangs.
    try:
        bnnkit.sample(algorithms()["sgld"], bd.data_parallel(post), shard, **{**SGLD_KW, "seed": info.rank})
    except bd.DistributedError as err:
        (out / f"desync_rank{info.rank}.txt").write_text(str(err))

    # 2. Rank 1 stops responding for longer than the timeout of the group the all-reduce runs
    # on: rank 0 gives up after the timeout.  (A group with a short timeout, made once both
    # ranks are up: start-up can take longer.)
    torch.distributed.barrier()
    group = torch.distributed.new_group(backend="gloo", timeout=timedelta(seconds=HANG_TIMEOUT_S))
    stream = FailingStream(shard, info.rank, fail_at=5, sleep_s=HANG_TIMEOUT_S + 1.5)
    t0 = time.monotonic()
    try:
        bnnkit.sample(algorithms()["sgld"], bd.data_parallel(post, group=group), stream, **SGLD_KW)
    except bd.DistributedError as err:
        (out / f"hang_rank{info.rank}.txt").write_text(f"{time.monotonic() - t0:.2f}\n{err}")

    # 3. Rank 1 crashes at its 10th minibatch; rank 0 must stop with a clear error.
    torch.distributed.barrier()
    stream = FailingStream(shard, info.rank, fail_at=10)
    bnnkit.sample(algorithms()["sgld"], bd.data_parallel(post), stream, **SGLD_KW)


def main() -> None:
    scenario, out = sys.argv[1], Path(sys.argv[2])
    torch.set_num_threads(1)
    info = bd.init_from_env(backend="gloo", timeout_s=float(sys.argv[3]) if len(sys.argv) > 3 else 60.0)
    with info:
        {"runs": run_scenario_runs, "errors": run_scenario_errors}[scenario](info, out)


if __name__ == "__main__":
    main()
