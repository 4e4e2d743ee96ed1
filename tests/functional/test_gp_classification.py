"""Laplace evidence of the multi-class GP classifier and the classification fit of a GPPrior."""

import math

import numpy as np
import pytest
import torch

from bnnkit.core.errors import BnnkitError
from bnnkit.functional import GPPrior, fit_classification_gp, laplace_evidence, prior_predictive

F64 = torch.float64


def rbf(x, scale, lengthscale=1.0):
    return scale * torch.exp(-torch.cdist(x, x).square() / (2 * lengthscale**2))


def dense_laplace(k, labels, c, iters=60):
    """The textbook Laplace approximation on the full nC system: Newton f <- (K^-1 + W)^-1 (W f + y - pi)."""
    n = k.shape[0]
    kb = torch.block_diag(*[k] * c)  # class-major: entries c * n + i
    y = torch.nn.functional.one_hot(labels, c).to(F64).T.reshape(-1)
    f = torch.zeros(n * c, dtype=F64)
    eye = torch.eye(n * c, dtype=F64)

    def w_of(f):
        pi = torch.softmax(f.reshape(c, n).T, 1)
        big_pi = torch.cat([torch.diag(pi[:, j]) for j in range(c)], 0)  # [nC, n]
        return pi.T.reshape(-1), torch.diag(pi.T.reshape(-1)) - big_pi @ big_pi.T

    for _ in range(iters):
        pvec, w = w_of(f)
        f = torch.linalg.solve(eye + kb @ w, kb @ (w @ f + y - pvec))
    _, w = w_of(f)
    a = torch.linalg.solve(kb, f)
    log_lik = float((y * f).sum() - torch.logsumexp(f.reshape(c, n).T, 1).sum())
    half_logdet = 0.5 * float(torch.linalg.slogdet(eye + kb @ w)[1])
    return log_lik - 0.5 * float(a @ f) - half_logdet, f.reshape(c, n).T


@pytest.mark.parametrize("scale", [0.3, 3.0, 30.0])
def test_laplace_evidence_matches_the_dense_nC_computation(scale):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(10, 2, generator=g, dtype=F64)
    labels = torch.randint(0, 3, (10,), generator=g)
    k = rbf(x, scale)
    res = laplace_evidence(k, labels, 3)
    ref, mode = dense_laplace(k, labels, 3)
    assert res.log_evidence == pytest.approx(ref, abs=1e-8)
    torch.testing.assert_close(res.mode, mode, atol=1e-7, rtol=0)
    # the mode is the Newton fixed point: f = K (y - pi), and a = K^-1 f = y - pi
    y = torch.nn.functional.one_hot(labels, 3).to(F64)
    torch.testing.assert_close(res.mode, k @ (y - res.probs), atol=1e-8, rtol=0)
    torch.testing.assert_close(res.a, y - res.probs, atol=1e-8, rtol=0)
    assert res.iterations < 30


def test_laplace_evidence_approaches_the_exact_binary_evidence_as_the_scale_shrinks():
    # two points, two classes: p(y | f) depends on g = f_1 - f_0 ~ N(0, 2K) only; the exact evidence
    # is a 2-D Gauss-Hermite quadrature, and the Laplace error shrinks like the prior variance
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    z = torch.tensor(np.stack(np.meshgrid(nodes, nodes, indexing="ij"), -1).reshape(-1, 2), dtype=F64)
    w = torch.tensor(np.outer(weights, weights).reshape(-1), dtype=F64) / (2 * math.pi)
    corr = torch.tensor([[1.0, 0.6], [0.6, 1.0]], dtype=F64)
    gaps = []
    for scale in (0.05, 0.5, 2.0):
        gz = z @ torch.linalg.cholesky(2 * scale * corr).T
        exact = float(torch.log((w * torch.sigmoid(gz).prod(1)).sum()))  # both labels 1
        approx = laplace_evidence(scale * corr, torch.tensor([1, 1]), 2).log_evidence
        gaps.append(abs(approx - exact))
    assert gaps[0] < 1e-3 and gaps[0] < gaps[1] < gaps[2] < 0.05


def _gp_labels(scale, n=150, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = 2 * torch.randn(n, 2, generator=g, dtype=F64)
    f = torch.linalg.cholesky(rbf(x, scale) + 1e-8 * torch.eye(n, dtype=F64)) @ torch.randn(
        n, 3, generator=g, dtype=F64
    )
    return x, torch.multinomial(torch.softmax(f, 1), 1, generator=g).squeeze(1)


def test_fit_recovers_the_outputscale_of_a_gp_draw_and_freezes_the_prior():
    fitted = {}
    for scale in (1.0, 9.0):
        x, labels = _gp_labels(scale)
        gp = GPPrior("rbf", input_dim=2, ard=False)
        fit = fit_classification_gp(gp, x, labels, 3, refine=1)
        fitted[scale] = fit["outputscale"]
        assert scale / 3 <= fit["outputscale"] <= 3 * scale  # the order of magnitude (true lengthscale 1)
        assert 0.3 <= fit["lengthscale"] <= 3.0
        assert fit["fit"] == "classification" and fit["num_points"] == 150 and fit["num_outputs"] == 3
        assert fit["log_evidence"] == max(v for _, _, v in fit["grid"])
        assert gp.fitted is fit and gp.noise_variance is None
        assert not any(p.requires_grad for p in gp.kernel.parameters())
        assert float(gp.kernel.outputscale) == pytest.approx(fit["outputscale"])
    assert fitted[1.0] < fitted[9.0]


def test_the_classification_fit_has_a_higher_evidence_than_the_regression_fit_on_one_hot_targets():
    # three separated classes: regression on one-hot targets fits their variance (2/9), the
    # classification evidence wants logits of several units
    g = torch.Generator().manual_seed(3)
    labels = torch.arange(90) % 3
    centres = torch.tensor([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]], dtype=F64)
    x = centres[labels] + 0.7 * torch.randn(90, 2, generator=g, dtype=F64)
    reg = GPPrior("rbf", input_dim=2, ard=False)
    reg.fit(x, torch.nn.functional.one_hot(labels, 3).to(F64), num_steps=60, progress=False)
    reg_k = reg.covariance(x)
    cls = GPPrior("rbf", input_dim=2, ard=False)
    fit = fit_classification_gp(cls, x, labels, 3, refine=1)
    assert fit["outputscale"] > 10 * float(reg.kernel.outputscale)
    reg_evidence = laplace_evidence(reg_k, labels, 3).log_evidence
    assert fit["log_evidence_total"] > reg_evidence + 10
    assert fit["log_evidence_total"] == pytest.approx(
        laplace_evidence(cls.covariance(x), labels, 3).log_evidence
    )


def test_subset_comes_from_the_generator_only():
    x, labels = _gp_labels(4.0, n=80)
    state = torch.get_rng_state()
    fits = [
        fit_classification_gp(
            GPPrior("rbf", input_dim=2, ard=False), x, labels, 3, max_points=40, refine=0, generator=gen
        )
        for gen in (torch.Generator().manual_seed(5), torch.Generator().manual_seed(5), None)
    ]
    assert torch.equal(torch.get_rng_state(), state)
    assert fits[0]["grid"] == fits[1]["grid"] and fits[0]["num_points"] == 40


def test_prior_predictive_entropy_follows_the_outputscale():
    x = torch.randn(30, 2, generator=torch.Generator().manual_seed(0), dtype=F64)
    out = {}
    for scale in (0.06, 100.0):
        gp = GPPrior("rbf", input_dim=2, ard=False, outputscale=scale, lengthscale=1.0)
        pp = prior_predictive(gp, x, 10, num_draws=50, generator=torch.Generator().manual_seed(1))
        assert pp["max_prob"].shape == pp["entropy"].shape == (50, 30) and pp["logits"].shape == (50, 30, 10)
        assert (pp["entropy"] <= math.log(10) + 1e-12).all() and (pp["max_prob"] >= 0.1 - 1e-12).all()
        out[scale] = pp
    assert float(out[0.06]["entropy"].mean()) > 0.97 * math.log(10)  # nearly uniform: under-confident
    assert float(out[100.0]["max_prob"].median()) > 0.9
    again = prior_predictive(
        GPPrior("rbf", input_dim=2, ard=False, outputscale=0.06, lengthscale=1.0),
        x,
        10,
        num_draws=50,
        generator=torch.Generator().manual_seed(1),
    )
    torch.testing.assert_close(again["logits"], out[0.06]["logits"], rtol=0, atol=0)


def test_bad_input_raises_clear_errors():
    x = torch.randn(6, 2, dtype=F64)
    labels = torch.tensor([0, 1, 2, 0, 1, 2])
    gp = GPPrior("rbf", input_dim=2, ard=False)
    with pytest.raises(BnnkitError, match="integer class indices"):
        fit_classification_gp(gp, x, labels.double(), 3)
    with pytest.raises(BnnkitError, match="one label per row"):
        fit_classification_gp(gp, x, labels[:5], 3)
    with pytest.raises(BnnkitError, match=r"labels must lie in 0\.\.1"):
        fit_classification_gp(gp, x, labels, 2)
    with pytest.raises(BnnkitError, match="num_classes must be an integer >= 2"):
        fit_classification_gp(gp, x, labels, 1)
    with pytest.raises(BnnkitError, match="3 columns"):
        fit_classification_gp(gp, torch.randn(6, 3), labels, 3)
    with pytest.raises(BnnkitError, match="scaled kernel"):
        fit_classification_gp(GPPrior("rbf+linear", input_dim=2), x, labels, 3)
    with pytest.raises(BnnkitError, match="must be a bnnkit.functional.GPPrior"):
        fit_classification_gp("rbf", x, labels, 3)
    with pytest.raises(BnnkitError, match="at least one value"):
        fit_classification_gp(gp, x, labels, 3, outputscale_log2=())
    with pytest.raises(BnnkitError, match="square kernel matrix"):
        laplace_evidence(torch.ones(3, 2, dtype=F64), labels[:3], 3)
    with pytest.raises(BnnkitError, match="NaN or inf"):
        laplace_evidence(torch.full((2, 2), math.nan, dtype=F64), labels[:2], 3)
