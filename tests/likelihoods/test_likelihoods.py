import math

import torch
from torch.distributions import Bernoulli as TBernoulli
from torch.distributions import Categorical as TCategorical
from torch.distributions import Gamma, Normal

import bnnkit

G = torch.Generator().manual_seed(0)


def test_gaussian_fixed_noise_matches_torch_distributions():
    f, y = torch.randn(7, 1, generator=G), torch.randn(7, generator=G)
    got = bnnkit.Gaussian(0.3).log_prob(f, y, {})
    assert torch.allclose(got, Normal(f.squeeze(-1), 0.3).log_prob(y).sum())


def test_gaussian_learnt_noise_and_its_gamma_prior():
    lik = bnnkit.Gaussian(0.5, learn_noise=True, precision_prior=(2.0, 3.0))
    assert torch.allclose(lik.extra_params()["log_precision"], torch.tensor(math.log(4.0)))
    f, y = torch.randn(5, generator=G), torch.randn(5, generator=G)
    log_tau = torch.tensor(0.7)
    got = lik.log_prob(f, y, {"log_precision": log_tau})
    assert torch.allclose(got, Normal(f, log_tau.exp().rsqrt()).log_prob(y).sum())
    # Gamma(2, 3) density of tau plus log|d tau / d log tau| = log tau
    ref = Gamma(2.0, 3.0).log_prob(log_tau.exp()) + log_tau
    diff = lik.extra_log_prior({"log_precision": log_tau}) - ref
    diff2 = lik.extra_log_prior({"log_precision": torch.tensor(-0.4)}) - (
        Gamma(2.0, 3.0).log_prob(torch.tensor(-0.4).exp()) - 0.4
    )
    assert torch.allclose(diff, diff2, atol=1e-6)  # equal up to the normalising constant


def test_gaussian_upper_bound_is_attained_at_zero_residual():
    y = torch.randn(6, generator=G)
    lik = bnnkit.Gaussian(0.2)
    assert torch.allclose(lik.log_prob(y, y, {}), lik.log_prob_upper_bound(y))


def test_bernoulli_and_categorical_match_torch_distributions():
    logits = torch.randn(6, generator=G)
    y = (torch.rand(6, generator=G) > 0.5).float()
    assert torch.allclose(
        bnnkit.Bernoulli().log_prob(logits, y, {}), TBernoulli(logits=logits).log_prob(y).sum()
    )
    logits = torch.randn(6, 4, generator=G)
    labels = torch.randint(0, 4, (6,), generator=G)
    got = bnnkit.Categorical().log_prob(logits, labels, {})
    assert torch.allclose(got, TCategorical(logits=logits).log_prob(labels).sum())
