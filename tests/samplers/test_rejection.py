import math

import pytest
import torch

import bnnkit
from bnnkit.core.errors import BnnkitError
from bnnkit.samplers import GaussianProposal, RejectionSampler
from tests.helpers import assert_gaussian_matches, linear_problem

# few, noisy points: the prior is a workable proposal
PROB = linear_problem(n=6, d=2, sigma=1.0, prior_scale=1.0, seed=3)
DATA = (PROB.X, PROB.y)


# exactness is also checked fast by test_gaussian_proposal_with_a_valid_bound
@pytest.mark.slow
def test_prior_proposal_with_max_likelihood_bound_gives_exact_draws():
    s = bnnkit.sample(RejectionSampler(), PROB.posterior(), DATA, num_samples=1500, seed=0, progress=False)
    n = s.num_draws
    assert_gaussian_matches(s.positions, PROB.mean, PROB.cov, ess_values=torch.full((2,), float(n)).numpy())
    per_draw = float(s.stats["num_proposals"].double().mean())
    assert per_draw > 1.0  # reported proposals per accepted draw
    expected = float((1 / s.stats["num_proposals"].double()).mean())
    assert math.isclose(float(s.stats["accept_prob"].double().mean()), expected, rel_tol=1e-6)


@pytest.mark.slow  # over 3 s: the default run stays under 3 min
def test_gaussian_proposal_with_a_valid_bound():
    # q = N(mean, (1.5 sd)^2) dominates the Gaussian posterior; the tightest k is then
    # max_x p~(x)/q(x), attained at the mode for these concentric Gaussians: compute it exactly.
    post = PROB.posterior()
    target = post.target()
    sd = PROB.cov.diag().sqrt()
    q = GaussianProposal(PROB.mean.clone(), 1.5 * sd.max())
    xs = (
        PROB.mean
        + torch.randn(20000, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * sd
    )
    log_ratio = torch.stack([target.log_prob(x, DATA) for x in xs]) - q.log_prob(xs)
    log_bound = float(log_ratio.max()) + 1.0  # a margin covers the tail of the search
    s = bnnkit.sample(
        RejectionSampler(proposal=q, log_bound=log_bound),
        post,
        DATA,
        num_samples=2000,
        seed=1,
        progress=False,
    )
    assert_gaussian_matches(s.positions, PROB.mean, PROB.cov, ess_values=torch.full((2,), 2000.0).numpy())


def test_custom_proposal_needs_a_bound():
    with pytest.raises(BnnkitError, match="needs log_bound"):
        RejectionSampler(proposal=GaussianProposal(torch.zeros(2), 1.0))


def test_violated_bound_is_detected():
    q = GaussianProposal(PROB.mean.clone(), 1.0)
    with pytest.raises(BnnkitError, match="bound is violated"):
        bnnkit.sample(
            RejectionSampler(proposal=q, log_bound=-1e6),
            PROB.posterior(),
            DATA,
            num_samples=1,
            progress=False,
        )


def test_too_many_proposals_gives_a_clear_error():
    far = linear_problem(n=200, d=2, sigma=0.05, prior_scale=10.0)
    with pytest.raises(BnnkitError, match="no proposal accepted in 50 tries"):
        bnnkit.sample(
            RejectionSampler(max_proposals=50), far.posterior(), (far.X, far.y), num_samples=1, progress=False
        )


def test_same_seed_same_draws():
    a = bnnkit.sample(RejectionSampler(), PROB.posterior(), DATA, num_samples=20, seed=5, progress=False)
    b = bnnkit.sample(RejectionSampler(), PROB.posterior(), DATA, num_samples=20, seed=5, progress=False)
    assert torch.equal(a.positions, b.positions)
