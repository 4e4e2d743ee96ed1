import warnings

import pytest
import torch

import bnnkit
from bnnkit.predict import predict
from bnnkit.samplers import GaussianProposal, ImportanceSampler, importance_summary
from tests.helpers import assert_gaussian_matches, linear_problem

PROB = linear_problem(n=6, d=2, sigma=1.0, prior_scale=1.0, seed=3)
DATA = (PROB.X, PROB.y)


@pytest.mark.slow  # over 3 s: the default run stays under 3 min
def test_prior_proposal_weighted_moments_match_the_posterior():
    s = bnnkit.sample(ImportanceSampler(), PROB.posterior(), DATA, num_samples=20000, seed=0, progress=False)
    summ = importance_summary(s)
    assert 0.05 < summ["ess_fraction"] < 1
    e = torch.full((2,), summ["ess"]).numpy()
    assert_gaussian_matches(s.positions, PROB.mean, PROB.cov, weights=summ["weights"], ess_values=e)
    # the weighted predictive matches the exact predictive
    Xs = torch.tensor([[1.0, -1.0]], dtype=torch.float64)
    pred = predict(PROB.posterior(), s, Xs)
    m, v = PROB.predictive(Xs)
    assert abs(float(pred.mean - m)) < 4 * float(((v - 1.0) / summ["ess"]).sqrt())


def test_gaussian_proposal_near_the_posterior_has_high_weight_ess():
    q = GaussianProposal(PROB.mean.clone(), 1.3 * PROB.cov.diag().sqrt())
    s = bnnkit.sample(
        ImportanceSampler(proposal=q), PROB.posterior(), DATA, num_samples=5000, seed=1, progress=False
    )
    summ = importance_summary(s)
    assert summ["ess_fraction"] > 0.5
    assert_gaussian_matches(
        s.positions,
        PROB.mean,
        PROB.cov,
        weights=summ["weights"],
        ess_values=torch.full((2,), summ["ess"]).numpy(),
    )


def test_degenerate_weights_warn_and_good_weights_do_not():
    bad = GaussianProposal(PROB.mean + 3.0, 0.05)
    with pytest.warns(UserWarning, match="importance weights are degenerate"):
        bnnkit.sample(
            ImportanceSampler(proposal=bad), PROB.posterior(), DATA, num_samples=2000, seed=0, progress=False
        )
    good = GaussianProposal(PROB.mean.clone(), 1.3 * PROB.cov.diag().sqrt())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = bnnkit.sample(
            ImportanceSampler(proposal=good), PROB.posterior(), DATA, num_samples=500, seed=0, progress=False
        )
        importance_summary(s)
