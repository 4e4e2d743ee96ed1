"""Bad inputs and faults around runs: resuming another posterior, foreign files, failed writes,
stuck chains, Ctrl-C, and data as users hold it.

Each case asserts the error or warning class and that the message names the problem.
"""

from __future__ import annotations

import errno
import os
import warnings

import numpy as np
import pytest
import torch

import bnnkit
import bnnkit.core.storage as storage
from bnnkit.core.errors import BnnkitError, StuckChainWarning
from bnnkit.core.storage import RunDirectoryError, RunWriteError, fingerprint_differences
from bnnkit.data import LoaderStream, Minibatches
from tests.helpers import linear_problem

PROB = linear_problem(n=20, d=2)
DATA = (PROB.X, PROB.y)
RUN = dict(num_samples=20, num_warmup=10, num_chains=2, seed=5, progress=False, chunk_size=5)
DEAD_PID = 4_000_000  # above pid_max: no process has it


def hmc():
    return bnnkit.HMC(num_steps=3)


def run(out=None, data=DATA, post=None, **kw):
    return bnnkit.sample(
        hmc(), post or PROB.posterior(), data, output=None if out is None else str(out), **{**RUN, **kw}
    )


def mlp_posterior(activation: type[torch.nn.Module]) -> bnnkit.Posterior:
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(2, 4), activation(), torch.nn.Linear(4, 1)).double()
    return bnnkit.Posterior(module, bnnkit.Gaussian(0.5), bnnkit.GaussianPrior(1.0))


def interrupted(out, after: int, **kw):
    """Start a run into ``out`` and stop it with Ctrl-C after ``after`` steps."""

    class Interrupted(bnnkit.HMC):
        def build(self, target):
            kernel = super().build(target)
            calls = {"n": 0}

            def step(state, batch, gen):
                calls["n"] += 1
                if calls["n"] > after:
                    raise KeyboardInterrupt
                return kernel.step(state, batch, gen)

            return kernel._replace(step=step)

    with pytest.raises(KeyboardInterrupt):
        bnnkit.sample(Interrupted(num_steps=3), PROB.posterior(), DATA, output=str(out), **{**RUN, **kw})


def no_tmp_files(out) -> bool:
    return not list(out.rglob("*.tmp"))


# ----------------------------------------------------------------------------- resume of another posterior
def test_resume_with_other_data_values_is_refused(tmp_path):
    run(tmp_path / "r")
    other = (PROB.X + 0.01, PROB.y)
    with pytest.raises(BnnkitError, match=r"the data differ.*new output path.*delete"):
        run(tmp_path / "r", data=other)


def test_resume_with_more_rows_of_data_is_refused(tmp_path):
    run(tmp_path / "r")
    more = (torch.cat([PROB.X, PROB.X[:3]]), torch.cat([PROB.y, PROB.y[:3]]))
    with pytest.raises(BnnkitError, match="the data differ"):
        run(tmp_path / "r", data=more)


def test_resume_with_another_activation_of_the_same_shapes_is_refused(tmp_path):
    bnnkit.sample(hmc(), mlp_posterior(torch.nn.Tanh), DATA, output=str(tmp_path / "r"), **RUN)
    with pytest.raises(BnnkitError, match=r"the log density differs.*activation") as err:
        bnnkit.sample(hmc(), mlp_posterior(torch.nn.ReLU), DATA, output=str(tmp_path / "r"), **RUN)
    assert "the data differ" not in str(err.value) and "initial values of chains 0, 1 differ" not in str(
        err.value
    )


def _density(scale: float):
    def logp(params, batch):  # the same name each time: only the values tell them apart
        return -0.5 * ((params["x"] / scale) ** 2).sum()

    return logp


def test_resume_with_another_log_density_callable_of_the_same_name_is_refused(tmp_path):
    kw = dict(init={"x": torch.ones(3)}, num_samples=20, chunk_size=5, progress=False)
    bnnkit.sample(hmc(), _density(1.0), None, output=str(tmp_path / "r"), **kw)
    with pytest.raises(BnnkitError, match=r"the log density differs.*log-density function"):
        bnnkit.sample(hmc(), _density(2.0), None, output=str(tmp_path / "r"), **kw)


def test_resume_with_other_init_values_is_refused(tmp_path):
    kw = dict(num_samples=20, chunk_size=5, progress=False)
    bnnkit.sample(hmc(), _density(1.0), None, init={"x": torch.ones(3)}, output=str(tmp_path / "r"), **kw)
    with pytest.raises(BnnkitError, match=r"initial values of chain 0 differ"):
        bnnkit.sample(
            hmc(), _density(1.0), None, init={"x": torch.full((3,), 2.0)}, output=str(tmp_path / "r"), **kw
        )


def test_resume_with_an_init_function_giving_other_values_is_refused(tmp_path):
    def init(scale):
        return lambda chain, gen: {
            n: scale * torch.randn(p.shape, generator=gen, dtype=p.dtype)
            for n, p in PROB.module.named_parameters()
        }

    run(tmp_path / "r", init=init(0.1))
    with pytest.raises(BnnkitError, match=r"initial values of chains 0, 1 differ"):
        run(tmp_path / "r", init=init(0.2))


def test_resume_with_another_module_weights_and_init_module_is_refused(tmp_path):
    run(tmp_path / "r", init="module")
    post = PROB.posterior()
    with torch.no_grad():
        post.module.weight.add_(0.5)
    try:
        with pytest.raises(BnnkitError, match=r"initial values of chains 0, 1 differ.*init='module'"):
            run(tmp_path / "r", post=post, init="module")
    finally:
        with torch.no_grad():
            post.module.weight.sub_(0.5)


def test_resume_of_a_minibatch_run_on_other_rows_is_refused(tmp_path):
    sgld = dict(num_samples=20, seed=1, progress=False, chunk_size=5)
    post = PROB.posterior(num_data=20)
    bnnkit.sample(
        bnnkit.SGLD(1e-3), post, Minibatches(*DATA, batch_size=5), output=str(tmp_path / "r"), **sgld
    )
    other = Minibatches(PROB.X.flip(0), PROB.y.flip(0), batch_size=5)
    with pytest.raises(BnnkitError, match="the data differ.*minibatch stream"):
        bnnkit.sample(bnnkit.SGLD(1e-3), post, other, output=str(tmp_path / "r"), **sgld)


def test_resume_of_a_minibatch_run_with_another_batch_size_is_refused(tmp_path):
    sgld = dict(num_samples=20, seed=1, progress=False, chunk_size=5)
    post = PROB.posterior(num_data=20)
    bnnkit.sample(
        bnnkit.SGLD(1e-3), post, Minibatches(*DATA, batch_size=5), output=str(tmp_path / "r"), **sgld
    )
    with pytest.raises(BnnkitError, match="the data differ.*batch size"):
        bnnkit.sample(
            bnnkit.SGLD(1e-3), post, Minibatches(*DATA, batch_size=4), output=str(tmp_path / "r"), **sgld
        )


def test_resume_of_a_dataloader_run_on_other_data_is_refused(tmp_path):
    post = PROB.posterior(num_data=20)
    sgld = dict(num_samples=10, seed=1, progress=False, chunk_size=5)

    def loader(x):
        ds = torch.utils.data.TensorDataset(x, PROB.y)
        return torch.utils.data.DataLoader(
            ds, batch_size=5, shuffle=True, generator=torch.Generator().manual_seed(0)
        )

    bnnkit.sample(bnnkit.SGLD(1e-3), post, loader(PROB.X), output=str(tmp_path / "r"), **sgld)
    bnnkit.sample(bnnkit.SGLD(1e-3), post, loader(PROB.X), output=str(tmp_path / "r"), **sgld)  # same: fine
    with pytest.raises(BnnkitError, match="the data differ"):
        bnnkit.sample(bnnkit.SGLD(1e-3), post, loader(PROB.X * 2), output=str(tmp_path / "r"), **sgld)


def test_an_interrupted_run_resumed_on_other_data_is_refused_before_mixing_chains(tmp_path):
    out = tmp_path / "r"
    interrupted(out, after=25)  # chain 0 half done, chain 1 not started
    with pytest.raises(BnnkitError, match="the data differ"):
        run(out, data=(PROB.X, PROB.y + 1.0))
    assert not (out / "chain_001" / "draws_000000.pt").exists()  # nothing of the other posterior written


def test_the_same_call_with_equal_copies_of_the_data_resumes(tmp_path):
    ref = run()
    interrupted(tmp_path / "r", after=25)
    resumed = run(tmp_path / "r", data=(PROB.X.clone(), PROB.y.clone()))
    assert torch.equal(resumed.positions, ref.positions)


def test_fingerprints_differing_by_float_rounding_are_the_same_run():
    fp = {
        "version": 1,
        "dtype": "torch.float32",
        "data": "a",
        "init": ["i"],
        "function": [[-1234.5, 10.0, 0.3]],
    }
    rounded = {**fp, "function": [[-1234.5 * (1 + 2e-7), 10.0 * (1 - 1e-6), 0.3 + 1e-7]]}
    assert fingerprint_differences(fp, rounded) == []
    other = {**fp, "function": [[-1290.0, 12.0, 0.1]]}
    assert "log density differs" in fingerprint_differences(fp, other)[0]


def test_a_kill_during_the_fingerprints_first_write_resumes_bit_identical(tmp_path, monkeypatch):
    ref = run()
    out = tmp_path / "r"
    real = storage._replace

    def dying(tmp, path):
        if path.name == "config.json":
            raise KeyboardInterrupt  # killed with config.json (and its fingerprint) not yet in place
        real(tmp, path)

    monkeypatch.setattr(storage, "_replace", dying)
    with pytest.raises(KeyboardInterrupt):
        run(out)
    monkeypatch.setattr(storage, "_replace", real)
    (out / f"config.json.{DEAD_PID}.tmp").write_text("")  # as a SIGKILL at that point leaves it
    resumed = run(out)
    assert torch.equal(resumed.positions, ref.positions)
    assert "fingerprint" in (out / "config.json").read_text()
    assert no_tmp_files(out)


# ----------------------------------------------------------------------------- foreign and temporary files
def test_a_chain_without_its_index_is_refused_on_read_and_read_only_when_asked(tmp_path):
    out = tmp_path / "r"
    ref = run(out).positions
    (out / "chain_001" / "index.json").unlink()
    with pytest.raises(RunDirectoryError, match=r"chain_001.*no index\.json.*unchecked=True"):
        bnnkit.load_samples(out)
    unchecked = bnnkit.load_samples(out, unchecked=True)
    assert torch.equal(unchecked.positions, ref)


def test_a_foreign_chunk_without_index_is_never_read_as_the_runs_own(tmp_path):
    out, other = tmp_path / "r", tmp_path / "other"
    ref = run()
    run(out)
    run(other, seed=99)
    (out / "chain_000" / "index.json").unlink()
    (out / "chain_000" / "draws_000001.pt").write_bytes(
        (other / "chain_000" / "draws_000001.pt").read_bytes()
    )
    with pytest.raises(RunDirectoryError, match="no index.json"):
        bnnkit.load_samples(out, chains=[0])
    with pytest.warns(UserWarning, match=r"index\.json is missing"):
        resumed = run(out)  # the chain is regenerated, the foreign chunk dropped
    assert torch.equal(resumed.positions, ref.positions)
    assert torch.equal(bnnkit.load_samples(out).positions, ref.positions)


def test_temporary_files_of_a_killed_writer_do_not_survive_a_resume(tmp_path):
    ref = run()
    out = tmp_path / "r"
    interrupted(out, after=25)
    for name in (
        f"draws_000003.pt.{DEAD_PID}.tmp",
        f"checkpoint_000000025.pt.{os.getpid()}.tmp",
        "index.json.7.tmp",
    ):
        (out / "chain_000" / name).write_bytes(b"")  # as a SIGKILL mid-write leaves them
    (out / "chain_001").mkdir(exist_ok=True)
    (out / "chain_001" / f"draws_000000.pt.{DEAD_PID}.tmp").write_bytes(b"")
    resumed = run(out)
    assert torch.equal(resumed.positions, ref.positions)
    assert no_tmp_files(out), list(out.rglob("*.tmp"))


# ----------------------------------------------------------------------------- failed writes
def _fail_once(monkeypatch, when, exc):
    real = torch.save
    calls = {"n": 0}

    def save(obj, f, *a, **k):
        if when(str(f)):
            calls["n"] += 1
            if calls["n"] == 1:
                raise exc
        return real(obj, f, *a, **k)

    monkeypatch.setattr(storage.torch, "save", save)


@pytest.mark.parametrize(
    "file, exc",
    [
        ("draws_000002.pt", OSError(errno.ENOSPC, "No space left on device")),
        ("checkpoint_000000020.pt", OSError(errno.ENOSPC, "No space left on device")),
        (
            "draws_000001.pt",
            RuntimeError("[enforce fail at inline_container.cc:595] . unexpected pos 64 vs 0"),
        ),
    ],
    ids=["chunk-enospc", "checkpoint-enospc", "chunk-zip-writer"],
)
def test_a_failed_write_stops_with_the_file_named_and_the_same_call_resumes_bit_identical(
    tmp_path, monkeypatch, file, exc
):
    ref = run()
    out = tmp_path / "r"
    _fail_once(monkeypatch, lambda f: os.path.basename(f).startswith(file), exc)
    with pytest.raises(
        RunWriteError, match=rf"could not write .*{file}.*free disk space.*rerun the same call"
    ) as err:
        run(out)
    assert err.value.path.name == file
    assert no_tmp_files(out)
    resumed = run(out)
    assert torch.equal(resumed.positions, ref.positions)
    for k in ref.stats:
        assert torch.equal(resumed.stats[k], ref.stats[k]), k


def test_an_output_folder_that_cannot_be_created_gets_one_clear_error(tmp_path):
    (tmp_path / "notes.txt").write_text("a file, not a folder")
    with pytest.raises(
        RunWriteError, match=r"cannot create the output directory .*notes\.txt/r.*folder you can write"
    ):
        run(tmp_path / "notes.txt" / "r")


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes to read-only folders")
def test_a_read_only_output_folder_gets_one_clear_error(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(
            RunWriteError, match="cannot create the output directory.*folder you can write to"
        ):
            run(locked / "r")
    finally:
        locked.chmod(0o700)


# ----------------------------------------------------------------------------- stuck chains
def stiff(params, batch):
    return -0.5e6 * (params["x"] ** 2).sum()


@pytest.mark.parametrize(
    "algorithm",
    [
        bnnkit.HMC(step_size=0.5, num_steps=3),
        bnnkit.NUTS(step_size=0.5, max_tree_depth=3),
        bnnkit.RandomWalkMH(5.0),
    ],
    ids=["hmc", "nuts", "rwmh"],
)
def test_a_chain_that_accepts_nothing_is_reported_with_what_to_try(algorithm):
    with pytest.warns(
        StuckChainWarning, match=r"chain 0 is stuck: it accepted no proposal.*step size.*warm-up"
    ):
        s = bnnkit.sample(
            algorithm,
            stiff,
            None,
            init={"x": torch.full((2,), 0.01)},
            num_samples=40,
            progress=False,
            on_divergence="warn",
        )
    assert (s.positions[0] == s.positions[0, 0]).all()  # the one repeated draw the warning is about


def test_vectorised_chains_name_the_stuck_chain_after_a_window_of_rejections():
    with pytest.warns(StuckChainWarning, match=r"chain [01] is stuck.*100 sampling transitions") as rec:
        bnnkit.sample(
            bnnkit.HMC(step_size=0.5, num_steps=3),
            stiff,
            None,
            init={"x": torch.full((2,), 0.01)},
            num_samples=120,
            num_chains=2,
            progress=False,
            chain_method="vectorized",
            on_divergence="warn",
        )
    assert {str(w.message).split(" is stuck")[0] for w in rec if w.category is StuckChainWarning} == {
        "chain 0",
        "chain 1",
    }


def test_healthy_chains_and_sg_mcmc_are_not_reported_stuck():
    with warnings.catch_warnings():
        warnings.simplefilter("error", StuckChainWarning)
        run(num_samples=40)
        post = PROB.posterior(num_data=20)
        bnnkit.sample(
            bnnkit.SGLD(1e-3), post, Minibatches(*DATA, batch_size=5), num_samples=150, progress=False
        )
        # Fewer than 20 transitions say too little to call a chain stuck.
        bnnkit.sample(
            bnnkit.HMC(step_size=0.5, num_steps=3),
            stiff,
            None,
            init={"x": torch.full((2,), 0.01)},
            num_samples=10,
            progress=False,
        )


# ----------------------------------------------------------------------------- Ctrl-C and resume messages
def test_ctrl_c_with_output_says_the_draws_are_safe_and_how_to_resume(tmp_path, capsys):
    out = tmp_path / "r"
    interrupted(out, after=25)
    err = capsys.readouterr().err
    assert f"safe in {out}" in err and "rerun the same bnnkit.sample call to resume" in err
    run(out)
    err = capsys.readouterr().err
    assert f"resuming chain 0 of {out} at draw 15 of 20" in err


def test_ctrl_c_without_output_says_how_to_make_runs_resumable(capsys):
    class Interrupted(bnnkit.HMC):
        def build(self, target):
            kernel = super().build(target)

            def step(state, batch, gen):
                raise KeyboardInterrupt

            return kernel._replace(step=step)

    with pytest.raises(KeyboardInterrupt):
        bnnkit.sample(Interrupted(num_steps=3), PROB.posterior(), DATA, num_samples=5, progress=False)
    assert "Pass output=DIR to bnnkit.sample to make runs resumable" in capsys.readouterr().err


def test_a_finished_run_called_again_says_its_draws_are_reused(tmp_path, capsys):
    run(tmp_path / "r")
    capsys.readouterr()
    run(tmp_path / "r")
    assert "every chain of" in capsys.readouterr().err


# ----------------------------------------------------------------------------- data as users hold it
def test_a_dataloader_is_taken_as_a_loader_stream():
    post = PROB.posterior(num_data=20)
    ds = torch.utils.data.TensorDataset(*DATA)

    def loader():
        return torch.utils.data.DataLoader(
            ds, batch_size=5, shuffle=True, generator=torch.Generator().manual_seed(3)
        )

    kw = dict(num_samples=15, seed=2, progress=False)
    direct = bnnkit.sample(bnnkit.SGLD(1e-3), post, loader(), **kw)
    wrapped = bnnkit.sample(bnnkit.SGLD(1e-3), post, LoaderStream(loader()), **kw)
    assert torch.equal(direct.positions, wrapped.positions)


def test_numpy_arrays_are_taken_as_tensors_in_the_models_dtype():
    ref = run(num_chains=1)
    arrays = run(data=(PROB.X.numpy(), PROB.y.numpy()), num_chains=1)
    assert torch.equal(arrays.positions, ref.positions)
    post = mlp_posterior(torch.nn.Tanh).__class__(
        torch.nn.Linear(2, 1), bnnkit.Gaussian(0.5), bnnkit.GaussianPrior(1.0)
    )  # a float32 network, float64 arrays
    s = bnnkit.sample(hmc(), post, (np.asarray(PROB.X), np.asarray(PROB.y)), num_samples=5, progress=False)
    assert s.positions.dtype == torch.float32
