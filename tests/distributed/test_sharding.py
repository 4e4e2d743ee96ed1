"""Sharded streams, misuse errors and a one-rank job, all in this process (no subprocesses)."""

from __future__ import annotations

import pytest
import torch

import bnnkit
from bnnkit import distributed as bd
from bnnkit.core.errors import BnnkitError
from bnnkit.data import Minibatches
from tests.distributed import dist_worker as W

TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


@pytest.mark.parametrize("n,world", [(10, 1), (10, 3), (7, 7), (5, 2), (3, 4)])
def test_shard_ranges_tile_the_data(n, world):
    rows = [list(bd.shard_range(n, r, world)) for r in range(world)]
    assert sum(rows, []) == list(range(n))
    assert max(map(len, rows)) - min(map(len, rows)) <= 1


@pytest.mark.parametrize("kw", [{}, {"drop_last": True}, {"shuffle": False}, {"batch_size": 23}])
@pytest.mark.parametrize("world", [2, 3])
def test_shards_together_give_the_single_process_minibatches(kw, world):
    n = 23
    x = torch.arange(n, dtype=torch.float64)[:, None]
    y = torch.arange(n, dtype=torch.float64) * 10
    kw = {"batch_size": 5, **kw}
    full = Minibatches(x, y, **kw)
    shards = [bd.ShardedMinibatches.from_full(x, y, rank=r, world_size=world, **kw) for r in range(world)]
    g_full = torch.Generator().manual_seed(1)
    g_ranks = [torch.Generator().manual_seed(1) for _ in range(world)]
    for step in range(13):  # several epochs, with short or dropped last batches
        xb, yb = full.next(g_full)
        parts = [s.next(g) for s, g in zip(shards, g_ranks)]
        assert all(isinstance(p, bd.ShardBatch) and p.global_rows == xb.shape[0] for p in parts)
        got_x = torch.cat([p[0] for p in parts])
        got_y = torch.cat([p[1] for p in parts])
        assert sorted(got_x[:, 0].tolist()) == sorted(xb[:, 0].tolist()), step
        assert torch.equal(got_y, got_x[:, 0] * 10)  # rows stay together
        # The stream's state is the single-process one on every rank (checkpoints resume).
        for s in shards:
            st = s.state_dict()
            assert st["pos"] == full.state_dict()["pos"]
            assert (st["perm"] is None) == (full.state_dict()["perm"] is None)
            if st["perm"] is not None:
                assert torch.equal(st["perm"], full.state_dict()["perm"])


def test_resumed_sharded_stream_continues_the_sequence():
    x, y = torch.randn(11, 2), torch.randn(11)
    a = bd.ShardedMinibatches.from_full(x, y, batch_size=3, rank=1, world_size=2)
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        a.next(g)
    state, gstate = a.state_dict(), g.get_state()
    expect = [a.next(g) for _ in range(6)]
    b = bd.ShardedMinibatches.from_full(x, y, batch_size=3, rank=1, world_size=2)
    b.load_state_dict(state)
    g.set_state(gstate)
    for e in expect:
        got = b.next(g)
        assert torch.equal(got[0], e[0]) and got.global_rows == e.global_rows


def test_sharded_stream_checks_its_arguments_and_the_posterior():
    post, x, y = W.problem()
    with pytest.raises(BnnkitError, match="num_data must be the size of the full data set"):
        bd.ShardedMinibatches(x[:10], y[:10], num_data=W.N, shard_start=30, batch_size=4)
    with pytest.raises(BnnkitError, match="same number of rows"):
        bd.ShardedMinibatches(x[:10], y[:9], num_data=W.N, shard_start=0, batch_size=4)
    with pytest.raises(BnnkitError, match="batch_size"):
        bd.ShardedMinibatches(x[:10], y[:10], num_data=W.N, shard_start=0, batch_size=W.N + 1)
    shard = bd.ShardedMinibatches(x[:10], y[:10], num_data=W.N, shard_start=0, batch_size=4)
    shard.check(post)
    wrong = bnnkit.Posterior(post.module, post.likelihood, post.prior, num_data=10)
    with pytest.raises(BnnkitError, match="full data set's size, not the shard's"):
        shard.check(wrong)
    with pytest.raises(BnnkitError, match="init_from_env"):
        bd.ShardedMinibatches.from_full(x, y, batch_size=4)  # no job: rank unknown


def test_misuse_without_a_job_names_the_fix(monkeypatch):
    post, x, y = W.problem()
    with pytest.raises(BnnkitError, match="init_from_env"):
        bd.data_parallel(post)
    with pytest.raises(BnnkitError, match="init_from_env"):
        bd.chain_parallel_sample(bnnkit.SGLD(1e-3), post, (x, y), num_chains=2)
    monkeypatch.setenv("RANK", "0")
    for v in ("WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(v, raising=False)
    with pytest.raises(BnnkitError, match="torchrun"):
        bd.init_from_env(backend="gloo")
    with pytest.raises(BnnkitError, match="backend"):
        bd.init_from_env(backend="mpi")


@pytest.fixture
def one_rank_job(monkeypatch):
    for v in TORCHRUN_VARS:
        monkeypatch.delenv(v, raising=False)
    with bd.init_from_env(backend="gloo", timeout_s=30) as info:
        yield info
    assert not torch.distributed.is_initialized()


def test_a_script_run_without_torchrun_is_a_one_rank_job(one_rank_job):
    info = one_rank_job
    assert (info.rank, info.world_size, info.backend, info.is_main) == (0, 1, "gloo", True)
    assert bd.init_from_env() == info  # already initialised: unchanged
    post, x, y = W.problem(learn_noise=True)
    kw = dict(num_samples=30, seed=2, progress=False)
    shard = bd.ShardedMinibatches.from_full(x, y, batch_size=W.BATCH)
    dp = bnnkit.sample(bnnkit.SGLD(2e-3), bd.data_parallel(post), shard, **kw)
    ref = bnnkit.sample(bnnkit.SGLD(2e-3), post, Minibatches(x, y, batch_size=W.BATCH), **kw)
    torch.testing.assert_close(dp.positions, ref.positions, atol=1e-6, rtol=1e-6)
    assert dp.config["model"]["data_parallel"] == {"world_size": 1}
    # The target refuses what it cannot do, with the fix in the message.
    with pytest.raises(BnnkitError, match="compile=False"):
        bnnkit.sample(bnnkit.SGLD(2e-3), bd.data_parallel(post), shard, compile=True, **kw)
    with pytest.raises(BnnkitError, match="chain_method='sequential'"):
        bnnkit.sample(bnnkit.SGLD(2e-3), bd.data_parallel(post), shard, chain_method="vectorized", **kw)
    with pytest.raises(BnnkitError, match="not yet data-parallel"):
        bd.data_parallel(bd.data_parallel(post))
    # Chain-parallel on one rank is the plain multi-chain run.
    cp = bd.chain_parallel_sample(
        bnnkit.SGLD(2e-3), post, Minibatches(x, y, batch_size=W.BATCH), num_chains=2, **kw
    )
    full = bnnkit.sample(bnnkit.SGLD(2e-3), post, Minibatches(x, y, batch_size=W.BATCH), num_chains=2, **kw)
    assert torch.equal(cp.positions, full.positions)


def test_posteriors_with_non_additive_gradients_are_refused(one_rank_job):
    post, _, _ = W.problem()

    class Custom(bnnkit.Posterior):
        def target(self):
            return super().target()

    custom = Custom(post.module, post.likelihood, post.prior, num_data=W.N)
    with pytest.raises(BnnkitError, match="not a sum over data rows"):
        bd.data_parallel(custom)
