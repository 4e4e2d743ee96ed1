"""Every classic sampler against conjugate Bayesian linear regression (an ``nn.Linear``).

Posterior mean within 4 Monte-Carlo standard errors (ESS from ArviZ; for importance sampling the
weight ESS), covariance entries within 5 standard errors of a Gaussian sample covariance
(``sqrt((C_ii C_jj + C_ij^2) / n_eff)``), and the same for the posterior predictive mean and
variance at test points.  The covariance tolerance follows from the sampling distribution of a
sample covariance, so it tightens as the chains get longer instead of being a fixed percentage.
"""

import numpy as np
import pytest
import torch

import bnnkit
from bnnkit.diagnostics import ess, weight_ess
from bnnkit.predict import predict
from bnnkit.samplers import (
    GaussianProposal,
    ImportanceSampler,
    MetropolisHastings,
    MetropolisWithinGibbs,
    RejectionSampler,
)
from bnnkit.samplers.metropolis import GaussianRandomWalk
from tests.helpers import assert_gaussian_matches, linear_problem

PROB = linear_problem(n=8, d=2, sigma=1.0, prior_scale=1.0, seed=3)
DATA = (PROB.X, PROB.y)
XS = torch.tensor([[1.0, -1.0], [0.5, 2.0]], dtype=torch.float64)

SAMPLERS = {
    "hmc": (bnnkit.HMC(step_size=0.3, num_steps=5), dict(num_samples=1500, num_warmup=300, num_chains=2)),
    "nuts": (bnnkit.NUTS(), dict(num_samples=800, num_warmup=300, num_chains=2)),
    "rwmh": (bnnkit.RandomWalkMH(), dict(num_samples=4000, num_warmup=500, num_chains=2)),
    "mh": (MetropolisHastings(GaussianRandomWalk(0.5)), dict(num_samples=4000, num_warmup=200, num_chains=2)),
    "gibbs": (MetropolisWithinGibbs(blocks=[[0], [1]]), dict(num_samples=3000, num_warmup=300, num_chains=2)),
    "rejection": (RejectionSampler(), dict(num_samples=1000)),
    "importance": (
        ImportanceSampler(GaussianProposal(PROB.mean.clone(), 1.5 * PROB.cov.diag().sqrt())),
        dict(num_samples=4000),
    ),
}


# rejection: covered fast by tests/samplers/test_rejection.py::test_prior_proposal_with_max_likelihood_bound_gives_exact_draws
# (the same default sampler, exact draws checked)
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n == "rejection" else n for n in SAMPLERS]
)
@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_sampler_recovers_conjugate_posterior_and_predictive(name):
    algo, kw = SAMPLERS[name]
    post = PROB.posterior()
    s = bnnkit.sample(algo, post, DATA, seed=11, progress=False, **kw)
    f = s.flat() @ XS.T  # noiseless predictive draws at the test points
    if s.log_weights is not None:
        w = s.weights
        n_eff = weight_ess(s.log_weights)
        e_theta = np.full(2, n_eff)
        e_f = np.full(2, n_eff)
        e_f2 = e_f
    else:
        w = None
        e_theta = ess(s.positions)
        f3 = f.reshape(s.num_chains, s.num_draws, -1)
        e_f = ess(f3)
        e_f2 = ess((f3 - f3.mean((0, 1))) ** 2)
    assert_gaussian_matches(s.positions, PROB.mean, PROB.cov, ess_values=e_theta, weights=w)

    pred = predict(post, s, XS)
    m_exact, v_exact = PROB.predictive(XS)
    epi_exact = v_exact - PROB.sigma**2
    e_f = torch.as_tensor(e_f)
    assert ((pred.mean - m_exact).abs() < 4 * (epi_exact / e_f).sqrt()).all(), name
    # sample variance of f has relative standard error sqrt(2 / n_eff), n_eff of the squared deviations
    e_f2 = torch.as_tensor(e_f2)
    assert ((pred.epistemic_variance / epi_exact - 1).abs() < 5 * (2 / e_f2).sqrt()).all(), name
    assert torch.allclose(pred.aleatoric_variance, torch.full_like(m_exact, PROB.sigma**2))
