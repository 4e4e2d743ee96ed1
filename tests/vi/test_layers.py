import pytest
import torch
import torch.nn.functional as F
from torch import nn

import bnnkit
from bnnkit.core.errors import BnnkitError
from bnnkit.predict import RegressionPredictive
from bnnkit.vi import (
    BayesianConv2d,
    BayesianLinear,
    elbo_loss,
    fit_bayesian_layers,
    gaussian_kl,
    kl_divergence,
    predict_bayesian_layers,
    set_generator,
)
from tests.helpers import linear_problem


def _randomise(layer, seed=0, sigma_range=(0.1, 0.6)):
    g = torch.Generator().manual_seed(seed)
    lo, hi = sigma_range
    with torch.no_grad():
        for mu, rho in ((layer.weight_mu, layer.weight_rho), (layer.bias_mu, layer.bias_rho)):
            if mu is None:
                continue
            mu.copy_(torch.randn(mu.shape, generator=g, dtype=mu.dtype))
            sigma = lo + (hi - lo) * torch.rand(mu.shape, generator=g, dtype=mu.dtype)
            rho.copy_(torch.log(torch.expm1(sigma)))


def test_elbo_training_reaches_the_closed_form_mean_field_optimum():
    # Gaussian likelihood and prior: the mean-field optimum is mu = posterior mean, sigma_i^2 = 1 / Lambda_ii
    prob = linear_problem(n=30, d=2)
    layer = BayesianLinear(2, 1, bias=False, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    hist = fit_bayesian_layers(
        layer,
        (prob.X, prob.y),
        bnnkit.Gaussian(prob.sigma),
        lr=0.05,
        num_epochs=800,
        num_mc=4,
        lr_decay="cosine",
        seed=1,
        progress=False,
    )
    sd_opt = torch.linalg.inv(prob.cov).diag().rsqrt()
    assert torch.allclose(layer.weight_mu.detach()[0], prob.mean, atol=0.1 * float(sd_opt.min()))
    assert torch.allclose(layer.weight_sigma.detach()[0], sd_opt, rtol=0.05)
    assert len(hist["loss"]) == 800 and not layer.training
    assert hist["loss"][-1] < hist["loss"][0]


def test_kl_is_the_closed_form_gaussian_kl():
    lin = BayesianLinear(3, 2, prior_scale=0.7, dtype=torch.float64)
    conv = BayesianConv2d(2, 3, 3, prior_scale=1.3, dtype=torch.float64)
    _randomise(lin, 0)
    _randomise(conv, 1)
    for layer in (lin, conv):
        s = torch.tensor(layer.prior_scale, dtype=torch.float64)
        expected = gaussian_kl(layer.weight_mu, layer.weight_sigma, s) + gaussian_kl(
            layer.bias_mu, layer.bias_sigma, s
        )
        assert torch.allclose(layer.kl(), expected)
        q = torch.distributions.Normal(layer.weight_mu, layer.weight_sigma)
        qb = torch.distributions.Normal(layer.bias_mu, layer.bias_sigma)
        p = torch.distributions.Normal(0.0, s)
        ref = torch.distributions.kl_divergence(q, p).sum() + torch.distributions.kl_divergence(qb, p).sum()
        assert torch.allclose(layer.kl(), ref)
    model = nn.Sequential(conv, nn.Flatten(), nn.ReLU(), lin)
    assert torch.allclose(kl_divergence(model), lin.kl() + conv.kl())
    # elbo_loss: -(1/M) log p(y_B | f) + kl_weight * KL / N
    out, y = torch.randn(4, 2, dtype=torch.float64), torch.tensor([0, 1, 1, 0])
    ll = bnnkit.Categorical().log_prob(out, y, {})
    loss = elbo_loss(model, out, y, bnnkit.Categorical(), num_data=40, kl_weight=0.5)
    assert torch.allclose(loss, -ll / 4 + 0.5 * kl_divergence(model) / 40)
    loss.backward()
    assert lin.weight_rho.grad is not None and conv.weight_mu.grad is not None


def test_conv_local_reparameterisation_has_the_marginals_of_explicit_weight_draws():
    conv = BayesianConv2d(2, 3, 3, padding=1, stride=1, dtype=torch.float64)
    _randomise(conv, 2)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 2, 4, 4, generator=g, dtype=torch.float64)
    S = 4000
    conv.generator = torch.Generator().manual_seed(4)
    conv.train()
    with torch.no_grad():
        local = conv(x.repeat(S, 1, 1, 1)).reshape(S, 2, 3, 4, 4)
        # S explicit weight draws at once, the convolution written as a product with the input patches
        wgen = torch.Generator().manual_seed(5)
        w = conv.weight_mu + conv.weight_sigma * torch.randn(S, 3, 2, 3, 3, generator=wgen, dtype=x.dtype)
        b = conv.bias_mu + conv.bias_sigma * torch.randn(S, 3, generator=wgen, dtype=x.dtype)
        patches = F.unfold(x, 3, padding=1)  # [2, 2 * 3 * 3, 16]
        explicit = torch.einsum("sck,bkl->sbcl", w.reshape(S, 3, 18), patches) + b[:, None, :, None]
        explicit = explicit.reshape(S, 2, 3, 4, 4)
        w0, b0 = conv.sample_weights(wgen)  # the same product reproduces conv2d
        assert torch.allclose(
            F.conv2d(x, w0, b0, padding=1),
            (torch.einsum("ck,bkl->bcl", w0.reshape(3, 18), patches) + b0[None, :, None]).reshape(2, 3, 4, 4),
        )
    # exact marginals: mean = conv(x, mu_W) + mu_b, variance = conv(x^2, sigma_W^2) + sigma_b^2
    with torch.no_grad():
        mean = F.conv2d(x, conv.weight_mu, conv.bias_mu, padding=1)
        var = F.conv2d(x * x, conv.weight_sigma**2, conv.bias_sigma**2, padding=1)
    for draws in (local, explicit):
        z_mean = (draws.mean(0) - mean).abs() / (var / S).sqrt()
        z_var = (draws.var(0) - var).abs() / (var * (2 / S) ** 0.5)
        assert z_mean.max() < 4.5 and z_var.max() < 4.5, (z_mean.max(), z_var.max())
    # the local estimate draws independently per output position: no spatial correlation, unlike weights
    c_local = torch.corrcoef(local[:, 0, 0, 1:3, 1].reshape(S, 2).T)[0, 1]
    c_expl = torch.corrcoef(explicit[:, 0, 0, 1:3, 1].reshape(S, 2).T)[0, 1]
    assert abs(float(c_local)) < 0.1 < abs(float(c_expl))


def test_eval_mode_is_deterministic_unless_sampling_and_predictive_is_seeded():
    torch.manual_seed(0)
    model = nn.Sequential(BayesianLinear(1, 16), nn.Tanh(), BayesianLinear(16, 1))
    for m in model:
        if isinstance(m, BayesianLinear):
            _randomise(m, 0, (0.05, 0.2))
    x = torch.linspace(-1, 1, 7, dtype=torch.float32)[:, None].double()
    model.double()
    model.train()
    with pytest.raises(BnnkitError, match="has no generator"):
        model(x)
    assert set_generator(model, torch.Generator().manual_seed(0)) == 2
    assert not torch.allclose(model(x), model(x))
    model.eval()
    a, b = model(x), model(x)
    assert torch.equal(a, b)
    with torch.no_grad():
        h = torch.tanh(F.linear(x, model[0].weight_mu, model[0].bias_mu))
        assert torch.allclose(a, F.linear(h, model[2].weight_mu, model[2].bias_mu))
    model[0].sample = True
    assert not torch.allclose(model(x), model(x))
    model[0].sample = False
    pred = predict_bayesian_layers(model, x, bnnkit.Gaussian(0.1), num_samples=50, seed=0)
    assert isinstance(pred, RegressionPredictive) and pred.f.shape == (50, 7)
    assert (pred.epistemic_variance > 0).all()
    assert torch.equal(
        pred.f, predict_bayesian_layers(model, x, bnnkit.Gaussian(0.1), num_samples=50, seed=0).f
    )
    assert not torch.allclose(pred.f, predict_bayesian_layers(model, x, bnnkit.Gaussian(0.1), 50, seed=1).f)
    assert not model.training and not model[0].sample  # restored


def test_minibatch_training_of_a_small_bayesian_network():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(64, 1, generator=g) * 2 - 1
    y = torch.sin(3 * x[:, 0]) + 0.1 * torch.randn(64, generator=g)
    torch.manual_seed(0)
    model = nn.Sequential(BayesianLinear(1, 32), nn.ReLU(), BayesianLinear(32, 1))
    hist = fit_bayesian_layers(
        model, (x, y), bnnkit.Gaussian(0.1), lr=0.02, num_epochs=60, batch_size=32, progress=False
    )
    assert len(hist["kl"]) == 60 and all(torch.isfinite(torch.tensor(hist["loss"])))
    pred = predict_bayesian_layers(model, x, bnnkit.Gaussian(0.1), num_samples=30)
    assert bnnkit.predict.rmse(pred.mean, y) < 0.3


def test_bad_input():
    for s in (0.0, -1.0, float("inf")):
        with pytest.raises(BnnkitError, match="prior_scale must be a positive"):
            BayesianLinear(2, 1, prior_scale=s)
        with pytest.raises(BnnkitError, match="prior_scale must be a positive"):
            BayesianConv2d(1, 1, 3, prior_scale=s)
    with pytest.raises(BnnkitError, match="init_sigma must be a positive"):
        BayesianLinear(2, 1, init_sigma=0.0)
    with pytest.raises(BnnkitError, match="in_features must be an integer >= 1"):
        BayesianLinear(0, 1)
    with pytest.raises(BnnkitError, match="divisible by groups"):
        BayesianConv2d(3, 4, 3, groups=2)
    with pytest.raises(BnnkitError, match="contains no BayesianLinear"):
        kl_divergence(nn.Linear(2, 1))
    layer = BayesianLinear(2, 1)
    with pytest.raises(BnnkitError, match="the batch has 5 rows but num_data is 3"):
        elbo_loss(layer, torch.zeros(5, 1), torch.zeros(5), bnnkit.Gaussian(1.0), num_data=3)
    with pytest.raises(BnnkitError, match="batch_size 20 exceeds"):
        fit_bayesian_layers(layer, (torch.zeros(5, 2), torch.zeros(5)), bnnkit.Gaussian(1.0), batch_size=20)
