import pytest
import torch
from torch import nn

import bnnkit
from bnnkit.core.errors import BnnkitError
from bnnkit.predict import (
    ClassificationPredictive,
    RegressionPredictive,
    accuracy,
    brier_score,
    expected_calibration_error,
    rmse,
)
from bnnkit.vi import MCDropout
from tests.helpers import linear_problem


def _toy(n=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, generator=g) * 2 - 1
    y = torch.sin(3 * x[:, 0]) + 0.1 * torch.randn(n, generator=g)
    return x, y


def _mlp(seed=0):
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(1, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))
    return MCDropout.wrap(net, 0.1)


def test_regression_predictive_uncertainty_grows_away_from_the_data_and_is_seeded():
    x, y = _toy()
    net = _mlp()
    before = [p.detach().clone() for p in net.parameters()]
    r = MCDropout(p=0.1, lr=1e-2, num_epochs=150).fit(
        net, (x, y), likelihood=bnnkit.Gaussian(0.1), progress=False
    )
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters())), "the given module was modified"
    pred = r.predict(x, num_samples=100, seed=0)
    assert isinstance(pred, RegressionPredictive) and pred.mean.shape == (40,)
    assert (pred.epistemic_variance > 0).all()
    assert torch.allclose(pred.aleatoric_variance, torch.full((40,), 0.01))
    assert rmse(pred.mean, y) < 0.2 and pred.nll(y) < 0.0
    far = r.predict(torch.tensor([[-6.0], [6.0]]), num_samples=100, seed=0)
    assert far.epistemic_variance.mean() > 3 * pred.epistemic_variance.mean()
    again = r.predict(x, num_samples=100, seed=0)
    assert torch.equal(again.f, pred.f)
    other = r.predict(x, num_samples=100, seed=1)
    assert not torch.allclose(other.f, pred.f)
    # dropout is on at test time: the draws differ from each other and from the plain eval forward
    assert pred.f.std(0).min() > 0
    with torch.no_grad():
        plain = r.module(x).squeeze(-1)
    assert not torch.allclose(plain, pred.f[0])


def test_weight_decay_mapping_gives_the_closed_form_dropout_optimum_for_a_linear_model():
    # f(x) = w^T (z * x) / (1 - p), z_j ~ Bernoulli(1 - p): E_z[(y - f)^2] = (y - w^T x)^2 + p/(1-p) sum_j w_j^2 x_j^2,
    # so the MC-dropout objective with lambda = (1-p) / (N s^2) is minimised by
    # (tau X^T X + tau p/(1-p) diag(X^T X) + (1-p)/s^2 I) w = tau X^T y.
    prob = linear_problem(n=30, d=2)
    p, s, tau = 0.5, 0.1, 1 / prob.sigma**2
    G = prob.X.T @ prob.X
    A = (
        tau * G
        + tau * p / (1 - p) * torch.diag(G.diag())
        + (1 - p) / s**2 * torch.eye(2, dtype=torch.float64)
    )
    w_star = torch.linalg.solve(A, tau * prob.X.T @ prob.y)
    net = nn.Sequential(nn.Dropout(p), nn.Linear(2, 1, bias=False)).double().eval()
    post = bnnkit.Posterior(net, bnnkit.Gaussian(prob.sigma), bnnkit.GaussianPrior(s))
    r = MCDropout(p=p, lr=0.02, num_epochs=1000, lr_decay="cosine").fit(
        post, (prob.X, prob.y), progress=False
    )
    w = r.module[1].weight.detach()[0]
    assert torch.allclose(w, w_star, atol=0.015), (w, w_star)
    # an explicit weight decay overrides the prior's: weight_decay=0: no prior term at all
    r2 = MCDropout(p=p, lr=0.02, num_epochs=1000, weight_decay=0.0, lr_decay="cosine").fit(
        post, (prob.X, prob.y), progress=False
    )
    A2 = A - (1 - p) / s**2 * torch.eye(2, dtype=torch.float64)
    w2 = torch.linalg.solve(A2, tau * prob.X.T @ prob.y)
    assert (w2 - w_star).abs().min() > 0.05
    assert torch.allclose(r2.module[1].weight.detach()[0], w2, atol=0.015)


def test_classification_predictive_works_with_the_metrics():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(60, 2, generator=g)
    y = (x[:, 0] + x[:, 1] > 0).long()
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Dropout(0.2), nn.Linear(16, 2))
    r = MCDropout(p=None, lr=0.05, num_epochs=40, batch_size=30).fit(
        net, (x, y), likelihood=bnnkit.Categorical(), progress=False
    )
    assert r.config["dropout_rate"] == pytest.approx(0.2)
    pred = r.predict(x, num_samples=50, seed=0)
    assert isinstance(pred, ClassificationPredictive) and pred.probs.shape == (60, 2)
    assert torch.allclose(pred.probs.sum(-1), torch.ones(60))
    assert accuracy(pred.probs, y) > 0.9
    ece, _ = expected_calibration_error(pred.probs, y)
    assert 0 <= ece < 0.3 and brier_score(pred.probs, y) < 0.3


def test_bad_input():
    x, y = _toy(10)
    no_dropout = nn.Sequential(nn.Linear(1, 8), nn.ReLU(), nn.Linear(8, 1))
    with pytest.raises(BnnkitError, match="contains no dropout layer.*MCDropout.wrap"):
        MCDropout().fit(no_dropout, (x, y), likelihood=bnnkit.Gaussian(0.1), progress=False)
    for p in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(BnnkitError, match="strictly between 0 and 1"):
            MCDropout(p=p)
        with pytest.raises(BnnkitError, match="strictly between 0 and 1"):
            MCDropout.wrap(no_dropout, p)
    with pytest.raises(BnnkitError, match="needs likelihood="):
        MCDropout().fit(_mlp(), (x, y), progress=False)
    with pytest.raises(BnnkitError, match="has 1 nn.Linear"):
        MCDropout.wrap(nn.Linear(1, 1))
    laplace = bnnkit.Posterior(_mlp().eval(), bnnkit.Gaussian(0.1), bnnkit.LaplacePrior(1.0))
    with pytest.raises(BnnkitError, match="Pass weight_decay="):
        MCDropout().fit(laplace, (x, y), progress=False)
    with pytest.raises(BnnkitError, match="batch_size 20 exceeds"):
        MCDropout(batch_size=20).fit(_mlp(), (x, y), likelihood=bnnkit.Gaussian(0.1), progress=False)
