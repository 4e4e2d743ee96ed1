import math

import torch
from torch.distributions import Laplace, Normal

import bnnkit
from bnnkit.core.flat import FlatView

NET = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
VIEW = FlatView({k: v.detach() for k, v in NET.named_parameters()})
G = torch.Generator().manual_seed(0)


def test_per_layer_gaussian_prior_matches_torch():
    prior = bnnkit.GaussianPrior(1.0, scales={"2.": 0.1, "0.bias": 2.0}).bind(VIEW)
    w = torch.randn(VIEW.size, generator=G)
    p = VIEW.unravel(w)
    ref = sum(
        Normal(0.0, {"0.weight": 1.0, "0.bias": 2.0, "2.weight": 0.1, "2.bias": 0.1}[n]).log_prob(t).sum()
        for n, t in p.items()
    )
    assert torch.allclose(prior.log_prob(w, {}), ref, atol=1e-5)
    lp, g = prior.value_and_grad(w)
    assert torch.allclose(lp, ref, atol=1e-5)
    wg = w.clone().requires_grad_(True)
    (g_ref,) = torch.autograd.grad(prior.log_prob(wg, {}), wg)
    assert torch.allclose(g, g_ref)


def test_fan_in_prior_scales_each_layers_weights_by_its_inputs():
    conv = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 5), torch.nn.Flatten(), torch.nn.Linear(4, 2))
    assert bnnkit.GaussianPrior.fan_in(conv, 2.0).scales == {"0.weight": 2.0 / 75**0.5, "2.weight": 1.0}
    prior = bnnkit.GaussianPrior.fan_in(NET, 1.5).bind(VIEW)
    w = torch.randn(VIEW.size, generator=G)
    sd = {"0.weight": 1.5 / 2**0.5, "0.bias": 1.5, "2.weight": 1.5 / 3**0.5, "2.bias": 1.5}
    ref = sum(Normal(0.0, sd[n]).log_prob(t).sum() for n, t in VIEW.unravel(w).items())
    assert torch.allclose(prior.log_prob(w, {}), ref, atol=1e-5)


def test_prior_draws_have_the_declared_scales():
    prior = bnnkit.GaussianPrior(1.0, scales={"2.": 0.1}).bind(VIEW)
    draws = torch.stack([prior.sample(G) for _ in range(4000)])
    sd = draws.std(0)
    s2 = VIEW.slice("2.weight")
    assert abs(float(sd[s2].mean()) - 0.1) < 0.01
    assert abs(float(sd[VIEW.slice("0.weight")].mean()) - 1.0) < 0.05


def test_laplace_prior_matches_torch_and_its_draws():
    prior = bnnkit.LaplacePrior(0.5).bind(VIEW)
    w = torch.randn(VIEW.size, generator=G)
    assert torch.allclose(prior.log_prob(w, {}), Laplace(0.0, 0.5).log_prob(w).sum(), atol=1e-5)
    draws = torch.cat([prior.sample(G) for _ in range(2000)])
    assert abs(float(draws.abs().mean()) - 0.5) < 0.02  # E|w| = b


def test_scale_mixture_prior_density_and_draws():
    pi, s1, s2 = 0.25, 1.0, math.exp(-3)
    prior = bnnkit.ScaleMixturePrior(pi, s1, s2).bind(VIEW)
    w = torch.randn(VIEW.size, generator=G)
    ref = torch.log(pi * Normal(0, s1).log_prob(w).exp() + (1 - pi) * Normal(0, s2).log_prob(w).exp()).sum()
    assert torch.allclose(prior.log_prob(w, {}), ref, atol=1e-4)
    draws = torch.cat([prior.sample(G) for _ in range(3000)])
    var = pi * s1**2 + (1 - pi) * s2**2
    assert abs(float(draws.var()) / var - 1) < 0.1


def test_learnt_prior_precision_density():
    prior = bnnkit.GaussianPrior(1.0, learn_precision=True, precision_prior=(2.0, 1.0)).bind(VIEW)
    w = torch.randn(VIEW.size, generator=G)
    lam = torch.tensor(3.0)
    got = prior.log_prob(w, {"log_precision": lam.log()})
    assert torch.allclose(got, Normal(0.0, lam.rsqrt()).log_prob(w).sum(), atol=1e-5)
