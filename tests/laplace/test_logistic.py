"""Logistic regression against grid quadrature (tests/reference_logistic.py).

The Laplace Gaussian is centred at the mode, not the posterior mean, and has the curvature there,
so on 30 points it is close but not exact: the MAP within 0.25 posterior sd of the mean, the
variances within 25%, and the predictive probabilities (probit or MC link, or sampled) within 0.03.
"""

import pytest
import torch

from bnnkit.laplace import Laplace
from tests.reference_logistic import logistic_reference

REF = logistic_reference()


@pytest.fixture(scope="module")
def la():
    return Laplace(REF.posterior(), structure="full").fit((REF.X, REF.y), steps=1500, lr=0.05)


def test_laplace_posterior_is_close_to_the_quadrature_posterior(la):
    # the module's parameters are (weight [1, 1], bias [1]), the reference's (w, b)
    sd = REF.cov.diagonal().sqrt()
    assert ((la.mean - REF.mean).abs() / sd).max() < 0.25
    assert torch.allclose(la.covariance().diagonal(), REF.cov.diagonal(), rtol=0.25)


@pytest.mark.parametrize("link", ["probit", "mc"])
def test_glm_predictive_matches_the_exact_predictive(la, link):
    pred = la.predict(REF.x_test[:, None], link=link, num_samples=20000, seed=1)
    assert pred.probs.shape == (4, 2)
    assert torch.allclose(pred.probs[:, 1], REF.p_test, atol=0.03)


def test_sampled_predictive_matches_the_exact_predictive(la):
    pred = la.predict(REF.x_test[:, None], method="sample", num_samples=4000, seed=2)
    assert torch.allclose(pred.probs[:, 1], REF.p_test, atol=0.03)


def test_marglik_prior_precision_is_finite_and_raises_the_evidence(la):
    before = float(la.log_marginal_likelihood())
    tuned = (
        Laplace(REF.posterior(), structure="full").fit((REF.X, REF.y), map=la.map_params).optimize_marglik()
    )
    assert float(tuned.log_marginal_likelihood()) >= before
    assert 0 < float(tuned.prior_precision) < 100
