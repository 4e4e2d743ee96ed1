"""Runs that fail loudly and run directories that cannot be turned against their reader.

Divergence stops a chain with its finite draws kept; checkpoints hold no code; damaged files are
named and recovered from the last intact checkpoint; two writers cannot share a chain; a kill at
any point of a checkpoint write resumes bit-identically.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

import bnnkit
import bnnkit.core.storage as storage
from bnnkit.core.errors import BnnkitError, DivergenceError
from bnnkit.core.storage import RunDirectoryError
from bnnkit.data import Minibatches
from bnnkit.vi import BayesByBackprop
from tests.helpers import linear_problem

PROB = linear_problem(n=20, d=2)
DATA = (PROB.X, PROB.y)
RUN = dict(num_samples=45, num_warmup=30, thin=2, num_chains=2, seed=5, progress=False, chunk_size=10)
REPO = Path(__file__).resolve().parents[2]


def runaway(params, batch):
    """log p(x) = x^2 / 2: every step pushes outwards until the density overflows (float32)."""
    return 0.5 * (params["x"] ** 2).sum()


def stiff(params, batch):
    """A Gaussian with sd 0.01: HMC at step size 0.5 (stability limit 0.02) diverges on every move."""
    return -0.5e4 * (params["x"] ** 2).sum()


def runaway_past_six(params, batch):
    """A standard normal that turns into a runaway beyond x = 6 (a chain started there blows up)."""
    x = params["x"]
    return (-0.5 * x**2 + 10.0 * torch.relu(x - 6.0) ** 2).sum()


def _all_finite_on_disk(root: Path) -> int:
    n = 0
    for f in root.glob("chain_*/draws_*.pt"):
        chunk = torch.load(f, weights_only=True)
        assert torch.isfinite(chunk["positions"]).all(), f
        n += chunk["positions"].shape[0]
    return n


# ----------------------------------------------------------------------------- divergence
@pytest.mark.parametrize(
    "algorithm, density",
    [
        (bnnkit.SGLD(0.5), runaway),
        (bnnkit.SGHMC(0.5, friction=1.0), runaway),
        (bnnkit.HMC(step_size=0.5, num_steps=5), stiff),
    ],
    ids=["sgld", "sghmc", "hmc"],
)
@pytest.mark.filterwarnings("ignore::bnnkit.core.errors.StuckChainWarning")  # stuck before it diverges
def test_a_divergent_run_raises_and_keeps_its_finite_draws_on_disk(tmp_path, algorithm, density):
    out = tmp_path / "run"
    init = {"x": torch.full((3,), 0.01)}
    with pytest.raises(DivergenceError, match=r"chain\(s\) \[0\] diverged at step \d+ \(sampling\)") as err:
        bnnkit.sample(
            algorithm,
            density,
            None,
            init=init,
            num_samples=5000,
            chunk_size=20,
            output=str(out),
            progress=False,
        )
    assert err.value.chains == [0] and err.value.step > 20
    assert "step size" in str(err.value) and "Try a step size" in str(err.value)
    kept = _all_finite_on_disk(out)
    assert kept > 0  # the draws before the divergence are there, and all finite
    back = bnnkit.load_samples(out, chains=[0])
    assert back.num_draws == kept and torch.isfinite(back.positions).all()


def test_in_memory_divergence_hands_back_the_draws_before_it():
    with pytest.raises(DivergenceError) as err:
        bnnkit.sample(
            bnnkit.SGLD(0.5), runaway, None, init={"x": torch.ones(3)}, num_samples=5000, progress=False
        )
    positions, stats = err.value.partial[0]
    assert positions.shape[0] > 0 and torch.isfinite(positions).all()
    assert torch.isfinite(stats["log_density"]).all()


def test_warn_mode_drops_the_diverged_chain_and_returns_the_others(tmp_path):
    def init(chain, gen):
        return {"x": torch.tensor([0.0 if chain == 0 else 8.0])}

    example = {"x": torch.zeros(1)}
    with pytest.warns(UserWarning, match=r"chain\(s\) \[1\] diverged"):
        s = bnnkit.sample(
            bnnkit.SGLD(0.05),
            bnnkit.as_target(runaway_past_six, example),
            None,
            init=init,
            num_samples=300,
            num_chains=2,
            progress=False,
            on_divergence="warn",
            output=str(tmp_path / "r"),
        )
    assert s.num_chains == 1 and s.config["diverged_chains"] == [1]
    assert torch.isfinite(s.positions).all()
    assert abs(float(s.positions.mean())) < 0.5  # chain 0 still samples its standard normal
    assert json.loads((tmp_path / "r" / "chain_001" / "diverged.json").read_text())["step"] >= 0


def test_warn_mode_with_vectorised_chains_stops_the_group_and_says_which_chain_diverged():
    def init(chain, gen):
        return {"x": torch.tensor([0.0 if chain < 2 else 8.0])}

    target = bnnkit.as_target(runaway_past_six, {"x": torch.zeros(1)})
    kw = dict(init=init, num_samples=300, progress=False, on_divergence="warn")
    with pytest.warns(UserWarning, match=r"chain\(s\) \[2\] diverged"):
        with pytest.raises(DivergenceError, match=r"no chain is left: \[2\] diverged, \[0, 1\] stopped with"):
            bnnkit.sample(bnnkit.SGLD(0.05), target, None, num_chains=3, chain_method="vectorized", **kw)


def test_a_log_density_that_is_nan_everywhere_is_refused_before_sampling():
    def nan_density(params, batch):
        return (params["x"] * float("nan")).sum()

    with pytest.raises(BnnkitError, match=r"log density is nan at the initial position of chain\(s\) \[0\]"):
        bnnkit.sample(
            bnnkit.NUTS(), nan_density, None, init={"x": torch.zeros(2)}, num_samples=5, progress=False
        )


def test_on_divergence_must_be_raise_or_warn():
    with pytest.raises(BnnkitError, match="on_divergence must be 'raise' or 'warn'"):
        bnnkit.sample(bnnkit.HMC(), PROB.posterior(), DATA, num_samples=2, on_divergence="ignore")


# ----------------------------------------------------------------------------- safe checkpoints
class _Exploit:
    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_checkpoint_that_would_run_code_is_refused(tmp_path):
    out = tmp_path / "run"
    ref = bnnkit.sample(bnnkit.HMC(num_steps=3), PROB.posterior(), DATA, **RUN)
    bnnkit.sample(bnnkit.HMC(num_steps=3), PROB.posterior(), DATA, output=str(out), **RUN)
    chain = out / "chain_000"
    (chain / "done").unlink()
    index = json.loads((chain / "index.json").read_text())
    newest = index["checkpoints"][-1]
    marker = tmp_path / "pwned"
    _Exploit.marker = marker
    torch.save({"state": _Exploit()}, chain / newest["file"])
    newest["sha256"] = storage._sha256(chain / newest["file"])  # the attacker forges the index too
    (chain / "index.json").write_text(json.dumps(index))
    with pytest.warns(UserWarning, match=r"checkpoint_\d+\.pt cannot be read"):
        resumed = bnnkit.sample(bnnkit.HMC(num_steps=3), PROB.posterior(), DATA, output=str(out), **RUN)
    assert not marker.exists()
    assert torch.equal(resumed.positions, ref.positions)  # resumed from the checkpoint before it


def test_a_pre_format_2_checkpoint_gets_a_clear_error(tmp_path):
    out = tmp_path / "run"
    bnnkit.sample(bnnkit.HMC(num_steps=3), PROB.posterior(), DATA, output=str(out), **RUN)
    (out / "chain_000" / "done").unlink()
    torch.save({"state_type": dict}, out / "chain_000" / "checkpoint.pt")
    with pytest.raises(RunDirectoryError, match="can run code when opened.*convert_legacy_run"):
        bnnkit.sample(bnnkit.HMC(num_steps=3), PROB.posterior(), DATA, output=str(out), **RUN)


# ----------------------------------------------------------------------------- damaged chunks
def test_a_damaged_chunk_is_named_on_read_and_regenerated_on_resume(tmp_path):
    out = tmp_path / "run"
    ref = bnnkit.sample(bnnkit.HMC(num_steps=3), PROB.posterior(), DATA, **RUN)
    bnnkit.sample(bnnkit.HMC(num_steps=3), PROB.posterior(), DATA, output=str(out), **RUN)
    damaged = out / "chain_001" / "draws_000002.pt"
    damaged.write_bytes(damaged.read_bytes()[:100])  # cut short, as by a full disk or a bad copy
    s = bnnkit.load_samples(out, chains=[0])  # the intact chain still reads
    assert s.num_draws == 45
    with pytest.raises(RunDirectoryError, match=r"draws_000002\.pt is damaged.*loses its 10 draws.*output="):
        bnnkit.load_samples(out)
    with pytest.warns(UserWarning, match=r"draws_000002\.pt is damaged.*25 stored draws are discarded"):
        resumed = bnnkit.sample(bnnkit.HMC(num_steps=3), PROB.posterior(), DATA, output=str(out), **RUN)
    assert torch.equal(resumed.positions, ref.positions)
    kept = sorted(f.name for f in (out / "chain_001").glob("checkpoint_*.pt"))
    assert len(kept) >= 3  # one per chunk boundary: only the damaged part was recomputed


# ----------------------------------------------------------------------------- kills while writing
@pytest.mark.parametrize("fail_at", [3, 4, 9, 10, 16, 23])
def test_a_kill_in_the_middle_of_a_checkpoint_write_resumes_bit_identical(tmp_path, monkeypatch, fail_at):
    """Each rename (chunk, checkpoint, index) is a point where a kill can land; try several."""
    ref = bnnkit.sample(bnnkit.HMC(num_steps=3), PROB.posterior(), DATA, **RUN)
    out = tmp_path / "run"
    real = storage._replace
    calls = {"n": 0}

    def dying_replace(tmp, path):
        calls["n"] += 1
        if calls["n"] == fail_at:
            raise KeyboardInterrupt  # the process dies with the temporary file written, not renamed
        real(tmp, path)

    monkeypatch.setattr(storage, "_replace", dying_replace)
    with pytest.raises(KeyboardInterrupt):
        bnnkit.sample(bnnkit.HMC(num_steps=3), PROB.posterior(), DATA, output=str(out), **RUN)
    monkeypatch.setattr(storage, "_replace", real)
    for lock in out.glob("chain_*/lock"):
        lock.unlink()  # a killed process leaves its lock; that case has its own test below
    resumed = bnnkit.sample(bnnkit.HMC(num_steps=3), PROB.posterior(), DATA, output=str(out), **RUN)
    assert torch.equal(resumed.positions, ref.positions)


# ----------------------------------------------------------------------------- locking
WRITER = textwrap.dedent(
    """
    import sys, time, torch, bnnkit
    def slow(params, batch):
        time.sleep(0.01)
        return -0.5 * (params["x"] ** 2).sum()
    bnnkit.sample(bnnkit.RandomWalkMH(step_size=1.0), slow, None, init={"x": torch.zeros(2)},
                  num_samples=1500, chunk_size=5, output=sys.argv[1], progress=False, seed=3)
    """
)
LOCK_RUN = dict(init={"x": torch.zeros(2)}, num_samples=1500, chunk_size=5, progress=False, seed=3)


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_a_second_writer_is_refused_and_a_sigkilled_writer_is_taken_over_and_resumed_exactly(tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(out)], env=env)
    try:
        lock = out / "chain_000" / "lock"
        deadline = time.time() + 60
        while (
            not (lock.exists() and len(list(out.glob("chain_000/draws_*.pt"))) >= 3)
            and time.time() < deadline
        ):
            time.sleep(0.05)
        assert lock.exists(), "the writer did not start"
        with pytest.raises(RunDirectoryError, match=rf"being written by process {proc.pid} on"):
            bnnkit.sample(bnnkit.RandomWalkMH(step_size=1.0), slow, None, output=str(out), **LOCK_RUN)
        proc.send_signal(signal.SIGKILL)  # killed wherever it is: mid-step, mid-chunk or mid-checkpoint
        proc.wait(timeout=30)
        assert lock.exists() and not (out / "chain_000" / "done").exists()
        with pytest.warns(UserWarning, match=rf"left by process {proc.pid}, which is gone"):
            resumed = bnnkit.sample(
                bnnkit.RandomWalkMH(step_size=1.0), slow, None, output=str(out), **LOCK_RUN
            )
    finally:
        if proc.poll() is None:
            proc.kill()
    reference = bnnkit.sample(bnnkit.RandomWalkMH(step_size=1.0), slow, None, **LOCK_RUN)
    assert torch.equal(resumed.positions, reference.positions)
    assert not lock.exists()


def slow(params, batch):  # the writer's log density (same name, so the same run configuration)
    return -0.5 * (params["x"] ** 2).sum()


def test_an_output_path_that_is_a_file_is_refused(tmp_path):
    f = tmp_path / "results.txt"
    f.write_text("not a run")
    with pytest.raises(BnnkitError, match="is an existing file, not a directory"):
        bnnkit.sample(bnnkit.HMC(), PROB.posterior(), DATA, num_samples=2, output=str(f), progress=False)


# ----------------------------------------------------------------------------- bad log densities
def test_a_non_scalar_log_density_gets_a_bnnkit_error():
    def per_point(params, batch):
        return -0.5 * params["x"] ** 2

    with pytest.raises(BnnkitError, match=r"returned a tensor of shape \(3,\).*sum them"):
        bnnkit.sample(
            bnnkit.HMC(), per_point, None, init={"x": torch.zeros(3)}, num_samples=2, progress=False
        )


def test_a_log_density_that_ignores_the_parameters_gets_a_bnnkit_error():
    def constant(params, batch):
        return torch.tensor(1.0)

    with pytest.raises(BnnkitError, match="does not depend on the parameters"):
        bnnkit.sample(
            bnnkit.SGLD(0.1), constant, None, init={"x": torch.zeros(3)}, num_samples=2, progress=False
        )


def test_an_empty_init_tensor_gets_a_bnnkit_error():
    with pytest.raises(BnnkitError, match=r"init\['b'\] has no elements"):
        bnnkit.sample(
            bnnkit.HMC(),
            slow,
            None,
            init={"x": torch.zeros(2), "b": torch.zeros(0)},
            num_samples=2,
            progress=False,
        )


def test_integer_targets_for_a_gaussian_likelihood_get_a_bnnkit_error():
    post = bnnkit.Posterior(
        torch.nn.Linear(2, 1), bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0), num_data=10
    )
    with pytest.raises(BnnkitError, match="Gaussian targets must be real numbers; got dtype torch.int64"):
        bnnkit.sample(
            bnnkit.SGLD(1e-3),
            post,
            Minibatches(torch.randn(10, 2), torch.arange(10), batch_size=5),
            num_samples=2,
            progress=False,
        )


def test_a_diverging_vi_optimiser_raises_instead_of_returning_nan():
    prob = linear_problem(n=20, d=2)
    y = prob.y * 1e200  # targets on an absurd scale: their squares overflow float64
    with pytest.raises(BnnkitError, match="ELBO became non-finite in epoch 1; lower lr"):
        BayesByBackprop(lr=10.0, num_epochs=3).fit(prob.posterior(), (prob.X, y), progress=False)
