import math

import torch

import bnnkit
from bnnkit.predict import network_outputs, predict
from tests.helpers import linear_problem


def _exact_draws(prob, n=20000, seed=0):
    g = torch.Generator().manual_seed(seed)
    L = torch.linalg.cholesky(prob.cov)
    return prob.mean + torch.randn(n, prob.mean.numel(), generator=g, dtype=torch.float64) @ L.T


def test_regression_predictive_matches_the_exact_gaussian_predictive():
    prob = linear_problem(n=30, d=2)
    draws = _exact_draws(prob)
    Xs = torch.tensor([[0.0, 0.0], [1.0, -2.0], [3.0, 3.0]], dtype=torch.float64)
    pred = predict(prob.posterior(), draws, Xs)
    m, v = prob.predictive(Xs)
    epi = v - prob.sigma**2
    n = draws.shape[0]
    assert (pred.mean - m).abs().max() < 4 * float((epi / n).sqrt().max())
    assert torch.allclose(pred.variance, v, rtol=0.03)
    assert torch.allclose(pred.aleatoric_variance, torch.full_like(v, prob.sigma**2))
    y = torch.tensor([0.1, -1.0, 2.0], dtype=torch.float64)
    exact_nll = float(-torch.distributions.Normal(m, v.sqrt()).log_prob(y).mean())
    assert abs(pred.nll(y) - exact_nll) < 0.02
    lo, hi = pred.interval(0.95)
    assert torch.allclose(hi - lo, 2 * 1.959964 * pred.stddev, rtol=1e-5)


def test_weighted_duplicates_equal_unweighted():
    prob = linear_problem(n=20, d=2)
    draws = _exact_draws(prob, n=50)
    Xs = torch.randn(4, 2, dtype=torch.float64)
    y = torch.randn(4, dtype=torch.float64)
    a = predict(prob.posterior(), draws, Xs)
    b = predict(prob.posterior(), torch.cat([draws, draws]), Xs, weights=torch.full((100,), 0.5))
    assert torch.allclose(a.mean, b.mean) and torch.allclose(a.variance, b.variance)
    assert math.isclose(a.nll(y), b.nll(y), rel_tol=1e-9)


def test_importance_weights_from_samples_are_used():
    prob = linear_problem(n=20, d=2)
    draws = _exact_draws(prob, n=3).reshape(1, 3, 2)
    stats = {"log_weight": torch.log(torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64))}
    s = bnnkit.Samples(draws, stats, prob.posterior().view)
    Xs = torch.randn(2, 2, dtype=torch.float64)
    pred = predict(prob.posterior(), s, Xs)
    assert torch.allclose(pred.mean, Xs @ draws[0, 0])


def test_classification_averages_probabilities():
    net = torch.nn.Linear(1, 3, bias=False).double()
    post = bnnkit.Posterior(net, bnnkit.Categorical(), bnnkit.GaussianPrior(1.0))
    draws = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 2.0]], dtype=torch.float64)
    X = torch.tensor([[1.0]], dtype=torch.float64)
    pred = predict(post, draws, X)
    p1 = torch.softmax(torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64), 0)
    p2 = torch.softmax(torch.tensor([0.0, 0.0, 2.0], dtype=torch.float64), 0)
    assert torch.allclose(pred.probs[0], (p1 + p2) / 2)
    assert math.isclose(pred.nll(torch.tensor([2])), -math.log(float((p1[2] + p2[2]) / 2)))
    bern = bnnkit.Posterior(
        torch.nn.Linear(1, 1, bias=False).double(), bnnkit.Bernoulli(), bnnkit.GaussianPrior(1.0)
    )
    pb = predict(bern, torch.tensor([[0.0], [100.0]], dtype=torch.float64), X)
    assert torch.allclose(pb.probs, torch.tensor([[0.25, 0.75]], dtype=torch.float64))


def test_learnt_noise_enters_the_aleatoric_variance_per_draw():
    prob = linear_problem(n=20, d=2)
    post = bnnkit.Posterior(prob.module, bnnkit.Gaussian(1.0, learn_noise=True), bnnkit.GaussianPrior(1.0))
    draws = torch.tensor([[0.0, 0.0, math.log(4.0)], [0.0, 0.0, math.log(0.25)]], dtype=torch.float64)
    pred = predict(post, draws, torch.zeros(1, 2, dtype=torch.float64))
    assert torch.allclose(pred.aleatoric_variance, torch.tensor([(0.25 + 4.0) / 2], dtype=torch.float64))


def test_network_outputs_vmap_agrees_with_a_loop():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 5), torch.nn.Tanh(), torch.nn.Linear(5, 1))
    post = bnnkit.Posterior(net, bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0))
    draws = torch.randn(7, post.view.size)
    X = torch.randn(4, 2)
    out = network_outputs(post, draws, X, chunk=3)
    loop = torch.stack([post.forward(post.split(x)[0], X) for x in draws])
    assert torch.allclose(out, loop, atol=1e-6)


def test_large_inputs_are_predicted_in_small_calls_with_the_outputs_of_one_call(monkeypatch):
    from bnnkit.predict import predictive

    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, 3, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(48, 4)
    )
    post = bnnkit.Posterior(net, bnnkit.Categorical(), bnnkit.GaussianPrior(1.0))
    draws, X = torch.randn(11, post.view.size), torch.randn(20, 1, 6, 6)
    one_call = network_outputs(post, draws, X, max_pairs=10_000)
    calls = []
    real = torch.func.vmap
    monkeypatch.setattr(
        torch.func,
        "vmap",
        lambda f, **kw: lambda d, r: calls.append(d.shape[0] * r.shape[0]) or real(f, **kw)(d, r),
    )
    monkeypatch.setattr(predictive, "INPUT_BUDGET", 36 * 16)  # 16 pairs of a 36-number image a call
    out = network_outputs(post, draws, X)
    assert torch.allclose(out, one_call, atol=1e-6) and out.shape == (11, 20, 4)
    assert max(calls) <= 16 and len(calls) >= 11 * 20 // 16  # two draws x eight rows a call


def test_predict_shows_a_progress_bar_over_the_draws_only_when_asked(capsys):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 5), torch.nn.Tanh(), torch.nn.Linear(5, 1))
    post = bnnkit.Posterior(net, bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0))
    draws, X = torch.randn(7, post.view.size), torch.randn(4, 2)
    quiet = predict(post, draws, X)
    assert "predicting" not in capsys.readouterr().err
    shown = predict(post, draws, X, progress=True)
    assert "predicting" in capsys.readouterr().err
    assert torch.equal(quiet.mean, shown.mean)
