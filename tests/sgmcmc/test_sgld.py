"""SGLD on conjugate Bayesian linear regression with minibatches (N = 100, M = 10).

SGLD has no Metropolis correction, so its draws carry an O(eps) discretisation bias on top of
Monte-Carlo error.  The tests check (a) the error shrinks over three step sizes and (b) at the
smallest one the mean is within 0.3 posterior standard deviations and the covariance within 25%
relative (Frobenius) error; the Monte-Carlo part of that error is about 8% at this run length.
"""

import pytest
import torch

import bnnkit
from bnnkit.data import Minibatches
from bnnkit.samplers.langevin import ULA
from bnnkit.sgmcmc import SGLD, PolynomialDecay
from tests.helpers import linear_problem, sg_errors

PROB = linear_problem(n=100, d=2, sigma=0.5)
RUN = dict(num_samples=3000, thin=3, num_warmup=300, num_chains=1, progress=False, seed=1)


def run(alg, batch_size=10, **kw):
    stream = Minibatches(PROB.X, PROB.y, batch_size=batch_size)
    return bnnkit.sample(alg, PROB.posterior(num_data=100), stream, **{**RUN, **kw})


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_sgld_error_shrinks_with_step_size_and_is_small_at_the_smallest():
    errors = [sg_errors(run(SGLD(eps)).positions, PROB.mean, PROB.cov) for eps in (2e-3, 6e-4, 2e-4)]
    cov_err = [c for _, c in errors]
    assert cov_err[0] > cov_err[1] > cov_err[2], errors
    mean_z, cov_rel = errors[-1]
    assert mean_z < 0.3 and cov_rel < 0.25, errors


@pytest.mark.slow  # over 3 s: the default run stays under 3 min
def test_cold_posterior_shrinks_the_covariance_by_the_temperature():
    s = run(SGLD(2e-4, temperature=0.25))
    mean_z, cov_rel = sg_errors(s.positions, PROB.mean, 0.25 * PROB.cov)
    assert mean_z < 0.3 * 2 and cov_rel < 0.25  # mean error measured in the cold posterior's sd


def test_full_batch_sgld_equals_unadjusted_langevin_bit_for_bit():
    kw = dict(num_samples=50, num_warmup=0, num_chains=2, progress=False, seed=3)
    post = PROB.posterior(num_data=100)
    sgld = bnnkit.sample(SGLD(1e-3), post, Minibatches(PROB.X, PROB.y, batch_size=100), **kw)
    ula = bnnkit.sample(ULA(1e-3), post, (PROB.X, PROB.y), **kw)
    assert torch.equal(sgld.positions, ula.positions)
    assert torch.equal(sgld.stats["log_density"], ula.stats["log_density"])


def test_same_seed_same_chain_and_other_seed_other_chain():
    kw = dict(num_samples=20, num_warmup=5)
    a, b, c = run(SGLD(1e-3), **kw), run(SGLD(1e-3), **kw), run(SGLD(1e-3), **kw, seed=2)
    assert torch.equal(a.positions, b.positions)
    assert not torch.equal(a.positions, c.positions)


def test_polynomial_decay_schedule_drives_the_step_size():
    sched = PolynomialDecay(a=1e-3, b=10.0, gamma=0.55)
    s = run(SGLD(sched), num_samples=20, num_warmup=0, thin=1)
    # draw k comes after step k (the init consumes no step); the info reports the step size used
    expected = torch.tensor([sched(t) for t in range(20)], dtype=torch.float64)
    assert torch.allclose(s.stats["step_size"][0].double(), expected)
    assert sched(0) > sched(100) > sched(10_000) > 0


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: SGLD(0.0), "step_size"),
        (lambda: SGLD(-1e-3), "step_size"),
        (lambda: SGLD(1e-3, temperature=0.0), "temperature"),
        (lambda: SGLD("big"), "step_size must be a positive number or a schedule"),
        (lambda: PolynomialDecay(a=1e-3, gamma=2.0), "gamma"),
    ],
)
def test_bad_hyperparameters(make, message):
    with pytest.raises(bnnkit.core.errors.BnnkitError, match=message):
        make()
