"""PSIS-LOO against leave-one-out predictive densities known in closed form."""

import math

import numpy as np
import pytest
import torch

from bnnkit.diagnostics import psis_loo
from bnnkit.predict.predictive import RegressionPredictive


def _normal_mean(seed: int, n: int = 30, s2: float = 1.0, t2: float = 4.0):
    """y_n ~ N(mu, s2), mu ~ N(0, t2): draws of mu from its posterior [4, 1000], the pointwise
    log-likelihood [4, 1000, n] and the exact elpd_loo = sum_n log N(y_n; m_-n, 1 / P_-n + s2)."""
    g = torch.Generator().manual_seed(seed)
    y = 1.5 + torch.randn(n, generator=g, dtype=torch.float64)
    prec = 1 / t2 + n / s2
    mu = y.sum() / s2 / prec + torch.randn(4, 1000, 1, generator=g, dtype=torch.float64) / math.sqrt(prec)
    ll = -0.5 * ((y - mu) ** 2 / s2 + math.log(2 * math.pi * s2))
    prec_loo = 1 / t2 + (n - 1) / s2
    m_loo = (y.sum() - y) / s2 / prec_loo
    v_loo = 1 / prec_loo + s2
    exact = float((-0.5 * ((y - m_loo) ** 2 / v_loo + math.log(2 * math.pi * v_loo))).sum())
    return ll, exact


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_elpd_loo_matches_the_conjugate_leave_one_out_density(seed):
    ll, exact = _normal_mean(seed)
    r = psis_loo(ll)
    # 4,000 exact draws: over seeds 0-7 the sum is off by 0.00-0.04 (Monte Carlo error); the naive
    # in-sample estimate (log of the mean likelihood) is off by about p_loo ~ 1
    in_sample = float((torch.logsumexp(ll.reshape(-1, ll.shape[-1]), 0) - math.log(4000)).sum())
    assert abs(r["elpd"] - exact) < 0.1
    assert abs(in_sample - exact) > 0.5
    assert 0.5 < r["p_loo"] < 1.5  # one parameter (0.65-1.26 over seeds 0-7)
    assert r["pareto_k_max"] < 0.5 and r["bad_k"] == 0 and r["n"] == 30


def test_a_posterior_that_fits_worse_scores_lower():
    g = torch.Generator().manual_seed(5)
    y = 1.5 + torch.randn(30, generator=g, dtype=torch.float64)

    def ll(centre: float) -> torch.Tensor:  # draws of mu around centre, unit noise
        mu = centre + 0.1 * torch.randn(4, 1000, 1, generator=g, dtype=torch.float64)
        return -0.5 * ((y - mu) ** 2 + math.log(2 * math.pi))

    # 30 rows, each about (1.5 - (-1))^2 / 2 ~ 3 nats worse
    assert psis_loo(ll(1.5))["elpd"] > psis_loo(ll(-1.0))["elpd"] + 30


def test_regression_predictive_gives_the_pointwise_matrix_that_its_log_prob_averages():
    g = torch.Generator().manual_seed(0)
    f = torch.randn(6, 5, generator=g)
    pred = RegressionPredictive(f, torch.full((6, 1), 0.3), torch.full((6,), -math.log(6)))
    y = torch.randn(5, generator=g)
    lp = pred.log_prob_draws(y)
    assert lp.shape == (6, 5)
    assert torch.allclose(torch.logsumexp(lp, 0) - math.log(6), pred.log_prob(y))


def test_bad_log_likelihoods_are_refused_with_what_to_do():
    with pytest.raises(ValueError, match=r"\[chain, draw, N\]"):
        psis_loo(np.zeros((10, 5)))
    bad = np.zeros((2, 10, 5))
    bad[0, 3, 1] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        psis_loo(bad)
