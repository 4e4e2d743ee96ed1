import dataclasses

import pytest
import torch

import bnnkit
from bnnkit.core.errors import BnnkitError
from tests.helpers import linear_problem

PROB = linear_problem(n=20, d=2)
DATA = (PROB.X, PROB.y)


@dataclasses.dataclass(frozen=True)
class InterruptedHMC(bnnkit.HMC):
    """HMC whose step raises KeyboardInterrupt after ``stop_after`` steps (a simulated crash)."""

    stop_after: int = 0

    def config(self):
        cfg = super().config()
        cfg.pop("stop_after")
        return cfg

    def build(self, target):
        kernel = super().build(target)
        calls = {"n": 0}

        def step(state, batch, gen):
            calls["n"] += 1
            if calls["n"] > self.stop_after:
                raise KeyboardInterrupt
            return kernel.step(state, batch, gen)

        return kernel._replace(step=step)


RUN = dict(num_samples=45, num_warmup=30, thin=2, num_chains=2, seed=5, progress=False, chunk_size=10)


@pytest.mark.parametrize("stop_after", [7, 30, 55, 119, 150])
def test_interrupted_run_resumes_bit_identical(tmp_path, stop_after):
    reference = bnnkit.sample(bnnkit.HMC(num_steps=3), PROB.posterior(), DATA, **RUN)
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        bnnkit.sample(
            InterruptedHMC(num_steps=3, stop_after=stop_after), PROB.posterior(), DATA, output=str(out), **RUN
        )
    resumed = bnnkit.sample(bnnkit.HMC(num_steps=3), PROB.posterior(), DATA, output=str(out), **RUN)
    assert torch.equal(resumed.positions, reference.positions)
    for k in reference.stats:
        assert torch.equal(resumed.stats[k], reference.stats[k]), k


def test_streamed_run_equals_in_memory_run_and_is_readable_again(tmp_path):
    a = bnnkit.sample(bnnkit.HMC(num_steps=3), PROB.posterior(), DATA, **RUN)
    b = bnnkit.sample(bnnkit.HMC(num_steps=3), PROB.posterior(), DATA, output=str(tmp_path / "r"), **RUN)
    assert torch.equal(a.positions, b.positions)
    assert len(list((tmp_path / "r" / "chain_000").glob("draws_*.pt"))) == 5  # 45 draws in chunks of 10
    again = bnnkit.sample(bnnkit.HMC(num_steps=3), PROB.posterior(), DATA, output=str(tmp_path / "r"), **RUN)
    assert torch.equal(again.positions, a.positions)


def test_output_path_with_other_configuration_is_refused(tmp_path):
    bnnkit.sample(bnnkit.HMC(num_steps=3), PROB.posterior(), DATA, output=str(tmp_path / "r"), **RUN)
    with pytest.raises(BnnkitError, match="another configuration.*num_samples"):
        bnnkit.sample(
            bnnkit.HMC(num_steps=3),
            PROB.posterior(),
            DATA,
            output=str(tmp_path / "r"),
            **{**RUN, "num_samples": 46},
        )
    with pytest.raises(BnnkitError, match="another configuration.*algorithm"):
        bnnkit.sample(bnnkit.HMC(num_steps=4), PROB.posterior(), DATA, output=str(tmp_path / "r"), **RUN)


def test_output_path_that_is_not_a_run_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(BnnkitError, match="not a bnnkit run directory"):
        bnnkit.sample(bnnkit.HMC(), PROB.posterior(), DATA, output=str(tmp_path), **RUN)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_shapes_thinning_and_stats():
    s = bnnkit.sample(bnnkit.HMC(num_steps=2), PROB.posterior(), DATA, **RUN)
    assert s.positions.shape == (2, 45, 2)
    assert s.params["weight"].shape == (2, 45, 1, 2)
    for k in ("log_density", "accept_prob", "step_size", "diverging", "energy"):
        assert s.stats[k].shape == (2, 45)
    # chains differ (independent generators and prior initialisation)
    assert not torch.equal(s.positions[0], s.positions[1])


def test_arviz_export_gives_rhat_and_ess():
    s = bnnkit.sample(
        bnnkit.HMC(num_steps=5),
        PROB.posterior(),
        DATA,
        num_samples=300,
        num_warmup=300,
        num_chains=2,
        seed=0,
        progress=False,
    )
    import arviz as az

    idata = s.to_arviz()
    assert set(idata.posterior.data_vars) == {"weight"}
    assert "lp" in idata.sample_stats and "diverging" in idata.sample_stats
    rhat = az.rhat(idata)["weight"].values
    assert (rhat < 1.05).all()
    assert (az.ess(idata)["weight"].values > 50).all()


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_plain_log_density_over_a_dict():
    def log_density(p, batch):
        return -0.5 * ((p["mu"] - 3.0) ** 2).sum() - 0.5 * (p["z"] ** 2).sum() / 4.0

    init = {"mu": torch.zeros(2, dtype=torch.float64), "z": torch.zeros((), dtype=torch.float64)}
    s = bnnkit.sample(
        bnnkit.HMC(num_steps=5),
        log_density,
        None,
        init=init,
        num_samples=2000,
        num_warmup=300,
        seed=1,
        progress=False,
    )
    assert abs(float(s.params["mu"].mean()) - 3.0) < 0.15
    assert abs(float(s.params["z"].var()) - 4.0) < 0.8


def test_progress_bar_runs(capsys):
    bnnkit.sample(
        bnnkit.HMC(num_steps=2), PROB.posterior(), DATA, num_samples=5, num_warmup=5, seed=0, progress=True
    )
    assert "chain 1/1" in capsys.readouterr().err


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_samples": 0}, "num_samples must be an integer >= 1"),
        ({"thin": 0}, "thin must be an integer >= 1"),
        ({"num_chains": 0}, "num_chains must be an integer >= 1"),
        ({"num_warmup": -1}, "num_warmup must be an integer >= 0"),
    ],
)
def test_bad_run_arguments(kwargs, message):
    with pytest.raises(BnnkitError, match=message):
        bnnkit.sample(bnnkit.HMC(), PROB.posterior(), DATA, **{**dict(progress=False), **kwargs})


def test_plain_log_density_needs_init():
    with pytest.raises(BnnkitError, match="needs init"):
        bnnkit.sample(bnnkit.HMC(), lambda p, b: -(p["x"] ** 2).sum(), None, progress=False)
