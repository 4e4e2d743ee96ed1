import pytest
import torch

import bnnkit
from bnnkit.core.errors import BnnkitError
from bnnkit.predict import predict
from bnnkit.vi import DeepEnsemble
from tests.helpers import linear_problem


def _assert_independent_gaussian_draws(x, mean, cov, k=4.0):
    """Independent draws vs N(mean, cov): mean within k standard errors sqrt(C_ii / n), each
    covariance entry within k standard errors sqrt((C_ii C_jj + C_ij^2) / n)."""
    n = x.shape[0]
    z = (x.mean(0) - mean).abs() / (cov.diag() / n).sqrt()
    assert (z < k).all(), f"mean off by {z.tolist()} standard errors"
    se = ((cov.diag()[:, None] * cov.diag()[None, :] + cov**2) / n).sqrt()
    zc = (torch.cov(x.T) - cov).abs() / se
    assert (zc < k).all(), (
        f"covariance off by {zc.max().item():.2f} standard errors:\n{torch.cov(x.T)}\n{cov}"
    )


def test_anchored_ensemble_members_are_exact_posterior_draws_for_linear_gaussian():
    # randomise-then-optimise: member optimum w_k = H^-1 (X^T y~_k / s^2 + S^-1 a_k) ~ N(mean, H^-1)
    prob = linear_problem(n=20, d=2)
    ens = DeepEnsemble(
        num_members=300, lr=0.1, num_epochs=300, anchored=True, init="prior", lr_decay="cosine"
    )
    s = ens.fit(prob.posterior(), (prob.X, prob.y), seed=0, progress=False)
    assert s.positions.shape == (1, 300, 2)
    # every member is at its optimum: half as many epochs again (same anchors and noise) moves none of them
    longer = DeepEnsemble(**{**ens.config(), "num_epochs": 450}).fit(
        prob.posterior(), (prob.X, prob.y), seed=0, progress=False
    )
    assert ((s.flat() - longer.flat()).abs() < 1e-3 * prob.cov.diag().sqrt()).all()
    _assert_independent_gaussian_draws(s.flat(), prob.mean, prob.cov)
    # the plug-in predictive matches the exact one (mean within MC error, variance within 15%)
    Xs = torch.tensor([[0.5, 0.0], [1.0, -2.0], [3.0, 3.0]], dtype=torch.float64)
    pred = predict(prob.posterior(), s, Xs)
    m, v = prob.predictive(Xs)
    assert ((pred.mean - m).abs() < 4 * ((v - prob.sigma**2) / 300).sqrt()).all()
    assert torch.allclose(pred.variance, v, rtol=0.15)


def test_plain_ensemble_collapses_to_the_map_on_a_convex_problem():
    # every member reaches the same optimum (here MAP = posterior mean): no spread at all
    prob = linear_problem(n=20, d=2)
    post = prob.posterior()
    s = DeepEnsemble(num_members=20, lr=0.1, num_epochs=300, init="prior", lr_decay="cosine").fit(
        post, (prob.X, prob.y), seed=0, progress=False
    )
    draws = s.flat()
    sd = prob.cov.diag().sqrt()
    assert ((draws - prob.mean).abs() < 1e-2 * sd).all()
    init_spread = torch.stack([post.sample_prior(torch.Generator().manual_seed(k)) for k in range(20)]).std(0)
    assert (draws.std(0) < 1e-3 * init_spread).all() and (draws.std(0) < 1e-2 * sd).all()
    # log_density is the exact full-data log posterior of each member
    exact = torch.stack([post.log_prob_flat(w, (prob.X, prob.y)) for w in draws])
    assert torch.allclose(s.stats["log_density"][0], exact)
    pred = predict(post, s, prob.X[:5])
    assert (pred.epistemic_variance < 1e-6 * prob.sigma**2).all()


def test_minibatches_are_scaled_by_n_over_m():
    # a strong prior makes the scaling visible: likelihood weighted by M/N instead of 1 would move
    # the optimum about two posterior standard deviations
    prob = linear_problem(n=20, d=2, prior_scale=0.2)
    s = DeepEnsemble(
        num_members=10, lr=0.05, num_epochs=100, batch_size=8, init="prior", lr_decay="cosine"
    ).fit(prob.posterior(), (prob.X, prob.y), seed=0, progress=False)
    sd = prob.cov.diag().sqrt()
    assert ((s.flat() - prob.mean).abs() < 0.3 * sd).all()


class _Branchy(torch.nn.Module):
    """Data-dependent control flow: torch.func.vmap cannot trace it (exercises the member loop)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))

    def forward(self, x):
        h = self.lin(x)
        return h if bool(h.abs().sum() >= 0) else -h


def test_minibatch_module_init_members_differ_reproducible_and_loop_equals_vmap():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    X = torch.randn(40, 2, generator=g, dtype=torch.float64)
    y = torch.tanh(X @ torch.tensor([1.0, -2.0], dtype=torch.float64))
    branchy = _Branchy().double()
    plain = branchy.lin
    ens = DeepEnsemble(num_members=4, lr=0.02, num_epochs=10, batch_size=16)
    runs = []
    for module in (plain, plain, branchy):
        post = bnnkit.Posterior(module, bnnkit.Gaussian(0.3), bnnkit.GaussianPrior(1.0))
        runs.append(ens.fit(post, (X, y), seed=3, progress=False))
    a, b, c = runs
    assert a.positions.shape == (1, 4, 33) and len(a.config["history"]["loss"]) == 10
    assert torch.equal(a.positions, b.positions)
    assert torch.allclose(a.positions, c.positions, atol=1e-10)
    assert (torch.pdist(a.flat()) > 0.1).all(), "members from different inits should differ"
    # the module itself is never modified
    assert torch.equal(dict(plain.named_parameters())["0.weight"], branchy.lin[0].weight)
    other = ens.fit(
        bnnkit.Posterior(plain, bnnkit.Gaussian(0.3), bnnkit.GaussianPrior(1.0)),
        (X, y),
        seed=4,
        progress=False,
    )
    assert not torch.allclose(other.positions, a.positions)
    pred = predict(bnnkit.Posterior(plain, bnnkit.Gaussian(0.3), bnnkit.GaussianPrior(1.0)), a, X[:3])
    assert pred.mean.shape == (3,)


def test_bad_input():
    prob = linear_problem(n=10, d=2)
    data = (prob.X, prob.y)
    with pytest.raises(BnnkitError, match="num_members must be an integer >= 1"):
        DeepEnsemble(num_members=0)
    with pytest.raises(BnnkitError, match="init must be one of"):
        DeepEnsemble(init="zeros")
    with pytest.raises(BnnkitError, match="batch_size 20 exceeds the 10 rows"):
        DeepEnsemble(batch_size=20).fit(prob.posterior(), data, progress=False)
    laplace = bnnkit.Posterior(prob.module, bnnkit.Gaussian(0.5), bnnkit.LaplacePrior(1.0))
    with pytest.raises(BnnkitError, match="Gaussian prior with fixed scales.*LaplacePrior"):
        DeepEnsemble(anchored=True).fit(laplace, data, progress=False)
    learnt_prior = bnnkit.Posterior(
        prob.module, bnnkit.Gaussian(0.5), bnnkit.GaussianPrior(1.0, learn_precision=True)
    )
    with pytest.raises(BnnkitError, match="learnt precision"):
        DeepEnsemble(anchored=True).fit(learnt_prior, data, progress=False)
    learnt_noise = bnnkit.Posterior(
        prob.module, bnnkit.Gaussian(0.5, learn_noise=True), bnnkit.GaussianPrior(1.0)
    )
    with pytest.raises(BnnkitError, match="learnt noise"):
        DeepEnsemble(anchored=True).fit(learnt_noise, data, progress=False)
    bern = bnnkit.Posterior(prob.module, bnnkit.Bernoulli(), bnnkit.GaussianPrior(1.0))
    with pytest.raises(BnnkitError, match="Bernoulli likelihood"):
        DeepEnsemble(anchored=True).fit(bern, (prob.X, (prob.y > 0).double()), progress=False)
