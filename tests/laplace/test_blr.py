"""Conjugate Bayesian linear regression: the Laplace approximation is exact there.

For ``y = X~ w + eps`` (a Linear layer with bias, ``eps ~ N(0, 1/tau)``, prior ``w ~ N(0, I/delta)``)
the posterior is ``N(mu, Lambda^{-1})`` with ``Lambda = tau X~^T X~ + delta I``,
``mu = tau Lambda^{-1} X~^T y``, and the evidence is ``N(y; 0, I/tau + X~ X~^T/delta)``.  The full
GGN is the exact Hessian, and KFAC is exact for one layer under a Gaussian likelihood.
"""

import math

import pytest
import torch

import bnnkit
from bnnkit.laplace import Laplace
from bnnkit.predict import predict

N, D, SIGMA, SCALE = 40, 3, 0.5, 2.0


def problem(n=N, d=D, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    w = torch.linspace(-1, 1, d, dtype=torch.float64)
    y = X @ w + 0.3 + SIGMA * torch.randn(n, generator=g, dtype=torch.float64)
    return X, y


def exact(X, y, sigma=SIGMA, scale=SCALE):
    Xt = torch.cat([X, torch.ones(len(X), 1, dtype=X.dtype)], 1)
    tau, delta = sigma**-2, scale**-2
    lam = tau * Xt.T @ Xt + delta * torch.eye(Xt.shape[1], dtype=X.dtype)
    cov = torch.linalg.inv(lam)
    mu = cov @ (tau * Xt.T @ y)
    return mu, cov


def evidence(X, y, log_delta, log_tau):
    Xt = torch.cat([X, torch.ones(len(X), 1, dtype=X.dtype)], 1)
    K = Xt @ Xt.T / log_delta.exp() + torch.eye(len(X), dtype=X.dtype) / log_tau.exp()
    return torch.distributions.MultivariateNormal(torch.zeros(len(X), dtype=X.dtype), K).log_prob(y)


def posterior(sigma=SIGMA, d=D, **kw):
    return bnnkit.Posterior(
        torch.nn.Linear(d, 1).double(), bnnkit.Gaussian(sigma, **kw), bnnkit.GaussianPrior(SCALE)
    )


def as_map(mu, d=D):
    return {"weight": mu[:d].reshape(1, d), "bias": mu[d:]}


@pytest.mark.parametrize("structure", ["full", "kron"])
def test_full_ggn_and_kfac_are_the_exact_posterior_and_evidence(structure):
    X, y = problem()
    mu, cov = exact(X, y)
    la = Laplace(posterior(), structure=structure).fit((X, y), steps=2000, lr=0.05)
    assert torch.allclose(la.mean, mu, atol=1e-8)
    assert torch.allclose(la.covariance(), cov, atol=1e-12, rtol=1e-9)
    ev = evidence(X, y, torch.tensor(-2 * math.log(SCALE)), torch.tensor(-2 * math.log(SIGMA)))
    assert float(la.log_marginal_likelihood()) == pytest.approx(float(ev), abs=1e-6)


def test_diag_is_the_diagonal_of_the_exact_precision():
    X, y = problem()
    mu, cov = exact(X, y)
    la = Laplace(posterior(), structure="diag").fit((X, y), map=as_map(mu))
    assert torch.allclose(la.covariance().diagonal(), 1 / torch.linalg.inv(cov).diagonal(), rtol=1e-10)


def test_lowrank_is_exact_when_the_rank_covers_the_curvature():
    # 4 rows, 9 weights: the GGN has rank 4, so its top 4 eigenpairs are all of it
    X, y = problem(n=4, d=8)
    mu, cov = exact(X, y)
    la = Laplace(posterior(d=8), structure="lowrank", rank=4).fit((X, y), map=as_map(mu, 8))
    assert torch.allclose(la.covariance(), cov, atol=1e-10)
    ev = evidence(X, y, torch.tensor(-2 * math.log(SCALE)), torch.tensor(-2 * math.log(SIGMA)))
    assert float(la.log_marginal_likelihood()) == pytest.approx(float(ev), abs=1e-8)


def test_marglik_finds_the_closed_form_evidence_maximiser():
    X, y = problem(n=60)
    h = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([h], max_iter=200, line_search_fn="strong_wolfe", tolerance_grad=1e-12)

    def closure():
        opt.zero_grad()
        loss = -evidence(X, y, h[0], h[1])
        loss.backward()
        return loss

    opt.step(closure)
    h = h.detach()
    delta_star, sigma_star = float(h[0].exp()), float((-0.5 * h[1]).exp())
    # MacKay's iteration: tune at the MAP, refit the MAP under the new hyperparameters, repeat
    la = Laplace(posterior(), structure="full").fit((X, y), steps=400, lr=0.05)
    la.optimize_marglik(rounds=8)
    assert float(la.prior_precision) == pytest.approx(delta_star, rel=2e-3)
    assert la.noise == pytest.approx(sigma_star, rel=1e-4)
    # at the maximiser the Laplace evidence is the exact one
    assert float(la.log_marginal_likelihood()) == pytest.approx(float(evidence(X, y, h[0], h[1])), abs=1e-4)


def test_marglik_tunes_the_noise_of_a_learn_noise_likelihood_and_the_draws_carry_it():
    X, y = problem()
    la = Laplace(posterior(sigma=1.0, learn_noise=True), structure="full").fit((X, y), steps=1500, lr=0.05)
    la.optimize_marglik()
    assert 0.35 < la.noise < 0.7  # the data's noise is 0.5
    s = la.sample(50, seed=1)
    col = la.posterior.view.names.index("likelihood.log_precision")
    log_tau = s.positions[..., la.posterior.view.offsets[col]]
    assert torch.allclose(log_tau, torch.tensor(-2 * math.log(la.noise), dtype=torch.float64))
    pred = predict(la.posterior, s, X)
    assert torch.allclose(pred.aleatoric_variance, torch.full_like(pred.mean, la.noise**2))
