"""Cyclical SG-MCMC (Zhang et al. 2020): cosine cycles, draws only in the sampling stage."""

import math

import pytest
import torch

import bnnkit
from bnnkit.core.errors import BnnkitError
from bnnkit.data import Minibatches
from bnnkit.sgmcmc import CosineCycle, CyclicalSGHMC, CyclicalSGLD
from tests.helpers import Interrupted, linear_problem, sg_errors

PROB = linear_problem(n=100, d=2, sigma=0.5)
RUN = dict(num_samples=1500, thin=2, num_warmup=300, num_chains=1, progress=False, seed=1)


def run(alg, **kw):
    stream = Minibatches(PROB.X, PROB.y, batch_size=10)
    return bnnkit.sample(alg, PROB.posterior(num_data=100), stream, **{**RUN, **kw})


def test_cosine_cycle_values_and_stages():
    c = CosineCycle(1e-3, cycle_length=10, exploration=0.6)
    assert c(0) == pytest.approx(1e-3) and c(10) == pytest.approx(1e-3)
    assert c(5) == pytest.approx(0.5e-3)
    assert [c.sampling(t) for t in range(10)] == [False] * 6 + [True] * 4
    assert c.sampling_fraction == pytest.approx(0.4)


@pytest.mark.parametrize(
    "alg",
    [CyclicalSGLD(1e-3, 200, exploration=0.5), CyclicalSGHMC(0.02, 200, exploration=0.5, friction=10.0)],
    ids=["csgld", "csghmc"],
)
@pytest.mark.slow  # over 2.5 s: the default run stays under 3 min
def test_cyclical_samplers_match_the_posterior_within_stated_error(alg):
    """Cycles long enough for the sampling stage to mix; error within 0.3 sd / 30% covariance."""
    s = run(alg)
    mean_z, cov_rel = sg_errors(s.positions, PROB.mean, PROB.cov)
    assert mean_z < 0.3 and cov_rel < 0.3, (mean_z, cov_rel)
    # every kept draw comes from the sampling stage, where eps <= peak * (cos(pi/2) + 1) / 2
    peak = alg.step_size.step_size
    assert float(s.stats["step_size"].max()) <= peak / 2 + 1e-15


@pytest.mark.slow  # over 2.5 s: the default run stays under 3 min
def test_cyclical_psgld_in_vectorised_chains_matches_the_posterior():
    """pSGLD on a cosine cycle (experiments/uci_cyclical_rhat.py's sampler), 2 vectorised chains:
    draws from the sampling stage only, posterior moments within the stated error."""
    from bnnkit.sgmcmc import PreconditionedSGLD

    alg = PreconditionedSGLD(CosineCycle(1e-3, 200, exploration=0.5))
    s = run(alg, num_chains=2, chain_method="vectorized")
    mean_z, cov_rel = sg_errors(s.positions, PROB.mean, PROB.cov)
    assert mean_z < 0.3 and cov_rel < 0.3, (mean_z, cov_rel)
    assert float(s.stats["step_size"].max()) <= 1e-3 / 2 + 1e-15


def test_draw_count_and_thinning_over_sampling_steps_only():
    alg = CyclicalSGLD(1e-3, cycle_length=10, exploration=0.8)  # 2 sampling steps per cycle
    s = run(alg, num_samples=6, num_warmup=0, thin=1)
    eps = s.stats["step_size"][0]
    # sampling steps are t = 8, 9, 18, 19, 28, 29
    expected = torch.tensor([alg.step_size(t) for t in (8, 9, 18, 19, 28, 29)], dtype=eps.dtype)
    assert torch.allclose(eps, expected)


@pytest.mark.parametrize("stop_after", [5, 33, 95])
def test_interrupted_cyclical_run_resumes_bit_identical(tmp_path, stop_after):
    alg = CyclicalSGHMC(0.02, 20, exploration=0.5, friction=10.0)
    kw = dict(num_samples=20, num_warmup=10, thin=2, num_chains=2, chunk_size=7)
    ref = run(alg, **kw)
    out = str(tmp_path / "run")
    with pytest.raises(KeyboardInterrupt):
        run(Interrupted(alg, stop_after), **kw, output=out)
    resumed = run(alg, **kw, output=out)
    assert torch.equal(resumed.positions, ref.positions)
    assert torch.equal(resumed.stats["step_size"], ref.stats["step_size"])


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: CosineCycle(0.0, 10), "step_size"),
        (lambda: CosineCycle(1e-3, 1), "cycle_length"),
        (lambda: CosineCycle(1e-3, 10, exploration=1.0), "exploration"),
    ],
)
def test_bad_schedule(make, message):
    with pytest.raises(BnnkitError, match=message):
        make()


def test_sampling_fraction_sets_the_progress_total():
    assert math.isclose(CyclicalSGLD(1e-3, 10, exploration=0.8).sampling_fraction, 0.2)
