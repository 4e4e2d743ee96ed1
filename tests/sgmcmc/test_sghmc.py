"""SGHMC on conjugate Bayesian linear regression with minibatches (N = 100, M = 10).

Friction C = 10 and 1500 burn-in steps (the momentum relaxes at rate ~C/2 per unit time, so the
burn-in must cover a few time units).  The error shrinks over three step sizes; at the smallest
the mean is within 0.3 posterior sd and the covariance within 25% relative error (Monte-Carlo
part ~8%).  The online gradient-noise estimate must do no worse than B = 0.
"""

import functools
import math

import pytest
import torch

import bnnkit
from bnnkit.core.errors import BnnkitError
from bnnkit.data import Minibatches
from bnnkit.sgmcmc import SGHMC
from tests.helpers import linear_problem, sg_errors

PROB = linear_problem(n=100, d=2, sigma=0.5)
RUN = dict(num_samples=3000, thin=3, num_warmup=1500, num_chains=1, progress=False, seed=1)


def run(alg, **kw):
    stream = Minibatches(PROB.X, PROB.y, batch_size=10)
    return bnnkit.sample(alg, PROB.posterior(num_data=100), stream, **{**RUN, **kw})


@functools.cache
def errors(step_size: float, noise_estimate="zero") -> tuple[float, float]:
    b = 0.0 if noise_estimate == "zero" else noise_estimate
    return sg_errors(run(SGHMC(step_size, friction=10.0, noise_estimate=b)).positions, PROB.mean, PROB.cov)


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_sghmc_error_shrinks_with_step_size_and_is_small_at_the_smallest():
    errs = [errors(eps) for eps in (0.02, 0.01, 0.005)]
    assert errs[0][1] > errs[1][1] > errs[2][1], errs
    mean_z, cov_rel = errs[-1]
    assert mean_z < 0.3 and cov_rel < 0.25, errs


@pytest.mark.slow  # the online estimate itself: test_online_estimate_matches_the_exact_minibatch_gradient_noise
def test_online_noise_estimate_is_no_worse_than_zero():
    zero, online = errors(0.02), errors(0.02, "online")
    assert online[1] <= zero[1], (online, zero)
    assert online[0] < 0.3


def test_online_estimate_matches_the_exact_minibatch_gradient_noise():
    """B = eps V / 2 with V the variance of the N/M-scaled minibatch gradient.  At the posterior
    mean V is known exactly (sampling M of N rows without replacement)."""
    eps, n, m = 0.01, 100, 10
    per_row = PROB.X * ((PROB.y - PROB.X @ PROB.mean) / PROB.sigma**2)[:, None]
    v = n**2 * per_row.var(0, unbiased=False) / m * (n - m) / (n - 1)
    exact_b = float((0.5 * eps * v).mean())
    s = run(SGHMC(eps, friction=10.0, noise_estimate="online"), num_samples=200, thin=5)
    measured = float(s.stats["noise_estimate"].mean())
    assert 0.7 * exact_b < measured < 1.4 * exact_b, (measured, exact_b)
    # here B > C on both coordinates: the injected noise is clipped and the run says so
    assert exact_b > 10.0 and float(s.stats["noise_clipped"].mean()) > 0.9


def test_learning_rate_form_follows_its_documented_update():
    """SGHMC.from_learning_rate(lr, momentum_decay, beta) must run Chen et al.'s eq. 15 exactly."""
    lr, decay, beta = 1e-4, 0.05, 0.01
    alg = SGHMC.from_learning_rate(lr, momentum_decay=decay, beta=beta)
    assert math.isclose(alg.step_size.step_size, 1e-2) and math.isclose(alg.friction, 5.0)
    assert math.isclose(alg.noise_estimate, 1.0)
    post = PROB.posterior(num_data=100)
    target = post.target()
    batch = (PROB.X[:10], PROB.y[:10])
    x0 = torch.tensor([0.3, -0.2], dtype=torch.float64)
    kernel = alg.build(target)
    state, g1 = kernel.init(x0, batch), torch.Generator().manual_seed(7)
    w, v, g2 = x0.clone(), torch.zeros(2, dtype=torch.float64), torch.Generator().manual_seed(7)
    for _ in range(25):
        state, _ = kernel.step(state, batch, g1)
        _, grad = target.value_and_grad(w, batch)
        xi = torch.randn(2, generator=g2, dtype=torch.float64)
        v = (1 - decay) * v + lr * grad + math.sqrt(2 * (decay - beta) * lr) * xi
        w = w + v
    assert torch.allclose(state.position, w, rtol=1e-10, atol=1e-12)


def test_momentum_resampling_and_reproducibility():
    alg = SGHMC(0.01, friction=10.0, resample_momentum_every=10)
    a = run(alg, num_samples=30, num_warmup=0, thin=1)
    b = run(alg, num_samples=30, num_warmup=0, thin=1)
    assert torch.equal(a.positions, b.positions)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: SGHMC(0.0), "step_size"),
        (lambda: SGHMC(1e-3, friction=0.0), "friction"),
        (
            lambda: SGHMC(1e-3, friction=1.0, noise_estimate=1.0),
            r"friction C=1.0 must exceed the noise estimate",
        ),
        (lambda: SGHMC(1e-3, friction=1.0, noise_estimate=2.0), r"must exceed the noise estimate"),
        (lambda: SGHMC(1e-3, noise_estimate=-1.0), "noise_estimate must be >= 0"),
        (lambda: SGHMC(1e-3, noise_estimate="auto"), "'online'"),
        (lambda: SGHMC.from_learning_rate(1e-4, momentum_decay=0.05, beta=0.05), "must exceed"),
        (lambda: SGHMC.from_learning_rate(-1e-4), "lr"),
        (lambda: SGHMC(1e-3, resample_momentum_every=0), "resample_momentum_every"),
    ],
)
def test_bad_hyperparameters(make, message):
    with pytest.raises(BnnkitError, match=message):
        make()


def test_online_noise_needs_two_rows_per_batch():
    stream = Minibatches(PROB.X, PROB.y, batch_size=1)
    with pytest.raises(BnnkitError, match="at least 2 rows"):
        bnnkit.sample(SGHMC(0.01, noise_estimate="online"), PROB.posterior(num_data=100), stream, **RUN)
