"""Data- and chain-parallel sampling with 2 gloo processes on localhost against single-process runs.

Each job starts two ``dist_worker.py`` processes with the variables torchrun sets (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT), so ``init_from_env`` is tested on its real path.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.distributed import dist_worker as W

WORKER = Path(W.__file__)
ROOT = WORKER.parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(scenario: str, out: Path, world: int = 2, timeout_s: float = 60.0, wall_s: float = 120.0):
    """Run ``world`` ranks of ``scenario``; return (return codes, stderr texts, seconds)."""
    port = free_port()
    procs = []
    t0 = time.monotonic()
    for rank in range(world):
        env = {
            **os.environ,
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(world),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "OMP_NUM_THREADS": "1",
            "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        }
        procs.append(
            subprocess.Popen(
                [sys.executable, str(WORKER), scenario, str(out), str(timeout_s)],
                env=env,
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    codes, errs = [], []
    try:
        for p in procs:
            remaining = max(1.0, wall_s - (time.monotonic() - t0))
            _, err = p.communicate(timeout=remaining)
            codes.append(p.returncode)
            errs.append(err)
    finally:
        for p in procs:
            if p.poll() is None:  # a hang: stop our own workers before failing
                p.kill()
                p.wait()
    return codes, errs, time.monotonic() - t0


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist_runs")
    codes, errs, _ = launch("runs", out)
    assert codes == [0, 0], "\n\n".join(errs)
    return out, W.single_process_runs()


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
@pytest.mark.parametrize("name", ["sgld", "sghmc", "hmc"])
def test_data_parallel_trajectory_equals_single_process(runs, name):
    out, ref = runs
    r0 = torch.load(out / f"{name}_rank0.pt")
    r1 = torch.load(out / f"{name}_rank1.pt")
    # Both ranks hold the same parameters, bit for bit (same all-reduced gradient, same noise).
    assert torch.equal(r0["positions"], r1["positions"])
    assert torch.equal(r0["log_density"], r1["log_density"])
    # The single-process run on the same global minibatches, to float rounding.
    expect = ref[name]
    assert r0["positions"].shape == expect.positions.shape
    torch.testing.assert_close(r0["positions"], expect.positions, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(r0["log_density"], expect.stats["log_density"], atol=1e-3, rtol=1e-5)
    # Not trivially equal: the chain moved.
    assert (expect.positions[:, -1] - expect.positions[:, 0]).abs().max() > 1e-2


@pytest.mark.slow  # over 3 s: the default run stays under 3 min
def test_interrupted_data_parallel_run_resumes_to_the_same_draws(runs):
    out, _ = runs
    whole = torch.load(out / "sgld_rank0.pt")["positions"]
    for rank in range(2):
        resumed = torch.load(out / f"sgld_resumed_rank{rank}.pt")["positions"]
        assert torch.equal(resumed, whole)


@pytest.mark.parametrize("gather", ["memory", "files"])
def test_chain_parallel_equals_single_process_chains(runs, gather):
    out, ref = runs
    got = torch.load(out / f"chains_{gather}.pt", weights_only=False)
    expect = ref["chains"]
    assert got["positions"].shape == expect.positions.shape == (4, 20, expect.positions.shape[-1])
    # Every chain keeps its seed, so each rank's chains are the single-process chains exactly.
    assert torch.equal(got["positions"], expect.positions)
    assert got["config"]["num_chains"] == 4 and "chains" not in got["config"]


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_failed_or_hung_rank_ends_the_job_with_a_clear_error_not_a_hang(tmp_path):
    codes, errs, seconds = launch("errors", tmp_path, timeout_s=20.0, wall_s=90.0)
    # 1. Ranks out of sync: both raise the synchronisation error (and go on).
    for r in range(2):
        msg = (tmp_path / f"desync_rank{r}.txt").read_text()
        assert "different parameters" in msg and "same seed" in msg
    # 2. Rank 1 sleeps past the 2 s timeout of the all-reduce's group: rank 0 stops after ~2 s.
    waited, msg = (tmp_path / "hang_rank0.txt").read_text().split("\n", 1)
    assert 1.5 < float(waited) < 20, waited
    assert "stopped responding within 2 s" in msg and "Timed out" in msg, msg
    assert (tmp_path / "hang_rank1.txt").exists()  # rank 1, awake, finds rank 0 gone: an error too
    # 3. Rank 1 crashed; rank 0 stopped with a DistributedError naming the cause, well within the
    # collective timeout (the dead peer's connection closes).
    assert codes[0] != 0 and codes[1] != 0, errs
    assert "injected failure on rank 1" in errs[1]
    assert "DistributedError" in errs[0] and "Another rank has most likely failed" in errs[0], errs[0]
    assert seconds < 60
