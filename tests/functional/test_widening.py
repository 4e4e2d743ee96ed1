"""GPPrior.predict / latent_variance against exact GP regression written out by hand, and the
predictive widening that adds the latent variance to every draw."""

import math

import torch

from bnnkit import Gaussian, GaussianPrior, Posterior
from bnnkit.functional import GPPrior
from bnnkit.functional.widening import MAX_INDUCING, PriorWidening
from bnnkit.predict import predict


def _gp(noise=0.1):
    gp = GPPrior("rbf", input_dim=2, lengthscale=[0.7, 1.3], outputscale=1.5)
    gp.noise_variance = noise
    return gp


def _rbf(a, b, ls, os):
    d = (a[:, None, :] - b[None, :, :]) / torch.tensor(ls, dtype=torch.float64)
    return os * torch.exp(-0.5 * (d**2).sum(-1))


def test_predict_and_latent_variance_are_exact_gp_regression():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(30, 2, generator=g, dtype=torch.float64) * 4 - 2
    y = torch.sin(x[:, 0]) + 0.3 * torch.randn(30, generator=g, dtype=torch.float64)
    xn = torch.rand(7, 2, generator=g, dtype=torch.float64) * 8 - 4
    gp = _gp()
    k = _rbf(x, x, [0.7, 1.3], 1.5) + 0.1 * torch.eye(30, dtype=torch.float64)
    kn = _rbf(xn, x, [0.7, 1.3], 1.5)
    m = y.mean()  # mean="zero" centres the targets
    mean = m + kn @ torch.linalg.solve(k, y - m)
    latent = 1.5 - (kn @ torch.linalg.solve(k, kn.T)).diagonal()
    got_mean, got_var = gp.predict(x, y, xn)
    torch.testing.assert_close(got_mean, mean)
    torch.testing.assert_close(got_var, latent + 0.1)
    torch.testing.assert_close(gp.latent_variance(x, xn), latent)
    # all rows as inducing inputs: the DTC form is exact, up to the jitter on K_ZZ
    torch.testing.assert_close(PriorWidening(gp, x)(xn), latent, atol=1e-4, rtol=0)


def test_the_widening_adds_its_variance_to_every_draw_and_survives_its_state():
    g = torch.Generator().manual_seed(1)
    x = torch.rand(40, 2, generator=g) * 4 - 2
    net = torch.nn.Linear(2, 1)
    post = Posterior(net, Gaussian(0.2), GaussianPrior(1.0))
    draws = torch.randn(6, post.view.size, generator=g)
    xn = torch.cat([x[:3], x[:3] + 5.0])
    plain = predict(post, draws, xn)
    post.predictive_widening = PriorWidening(_gp(), x)
    wide = predict(post, draws, xn)
    v = post.predictive_widening(xn)
    torch.testing.assert_close(wide.noise_var - plain.noise_var, v.float().expand_as(wide.noise_var))
    torch.testing.assert_close(wide.mean, plain.mean)
    assert float(v[3:].min()) > 1.0 > 0.2 > float(v[:3].max())  # at the data small, far away the prior's
    back = PriorWidening.from_state_dict(post.predictive_widening.state_dict())
    torch.testing.assert_close(back(xn), v)


def test_many_rows_take_the_dtc_form_close_to_exact_and_never_the_subset_alone(monkeypatch):
    import bnnkit.functional.widening as widening

    monkeypatch.setattr(widening, "MAX_INDUCING", 60)  # 300 rows: the DTC path, as on 2,000+ rows
    g = torch.Generator().manual_seed(2)
    x = torch.rand(300, 2, generator=g, dtype=torch.float64) * 4 - 2
    xn = torch.cat([x[:20], x[:5] + 10.0])
    gp = _gp()
    a, b = PriorWidening(gp, x, seed=3), PriorWidening(gp, x, seed=3)
    assert a.inducing.shape == (60, 2) and torch.equal(a.inducing, b.inducing)
    exact = gp.latent_variance(x, xn)
    subset_alone = gp.latent_variance(a.inducing, xn)
    err_dtc = (a(xn) - exact)[:20].abs().mean()
    err_subset = (subset_alone - exact)[:20].abs().mean()
    assert err_dtc < 0.2 * err_subset  # at the rows the subset leaves out, DTC stays near exact
    torch.testing.assert_close(a(xn)[20:], exact[20:], atol=1e-3, rtol=1e-2)  # far away: the prior
    assert not math.isnan(float(a(xn).sum())) and MAX_INDUCING == 2000


def test_an_unfitted_gp_prior_gets_a_clear_error():
    import pytest

    from bnnkit.core.errors import BnnkitError

    gp = GPPrior("rbf", input_dim=2)  # no fit: no noise variance
    widening = PriorWidening(gp, torch.zeros(5, 2))
    with pytest.raises(BnnkitError, match="needs a fitted GP prior"):
        widening(torch.zeros(3, 2))
