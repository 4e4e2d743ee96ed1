"""FBNN (functional VI with the spectral Stein gradient estimator) against closed forms."""

import math

import pytest
import torch

import bnnkit
from bnnkit.core.errors import BnnkitError
from bnnkit.vi.fbnn import FBNN
from bnnkit.vi.ssge import ssge_score
from tests.functional.test_fsgmcmc import GP, PHI, D, Y, exact, features, functional_posterior
from tests.helpers import linear_problem


def test_ssge_recovers_the_score_of_a_correlated_gaussian():
    """From 200 samples only; the estimator is rough in the tails (relative error ~0.45 here)."""
    g = torch.Generator().manual_seed(0)
    C = torch.eye(3, dtype=torch.float64) * 0.5 + 0.5 / 3
    x = torch.randn(200, 3, generator=g, dtype=torch.float64) @ torch.linalg.cholesky(C).T
    true = -x @ torch.linalg.inv(C)
    est = ssge_score(x)
    rel = float((est - true).norm() / true.norm())
    cos = float(torch.nn.functional.cosine_similarity(est.flatten(), true.flatten(), dim=0))
    assert rel < 0.6 and cos > 0.85, (rel, cos)
    # the average entropy gradient it implies is what training uses: E[score * eps] = -1/sigma
    z = torch.randn(400, 3, generator=g, dtype=torch.float64)
    sigma = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)
    grad = (ssge_score(z * sigma) * z).mean(0)
    assert torch.allclose(grad * sigma, -torch.ones(3, dtype=torch.float64), atol=0.3), grad * sigma


@pytest.mark.slow  # over 3 s: the default run stays under 3 min
def test_fbnn_reaches_the_mean_field_optimum_of_the_linear_kernel_target():
    """Linear model, linear kernel, M = d fixed measurement points: q(f^X) is an invertible linear
    image of q(w), so the functional KL equals the weight-space KL against prior precision A and
    the optimum is the mean-field optimum of a Gaussian target (mean = posterior mean,
    variance_i = 1 / P_ii).  SSGE's bias shows as ~15% too small variances; tolerance 30%."""
    torch.manual_seed(0)  # the module's initial weights (q's initial mean)
    xm = features(torch.linspace(-1.5, 1.5, D, dtype=torch.float64))
    mean, cov = exact(PHI, Y, xm, GP)
    prec = torch.linalg.inv(cov)
    post = functional_posterior(PHI, Y, xm, GP)
    fit = FBNN(
        lr=0.02,
        num_epochs=300,
        num_function_samples=100,
        include_batch=False,
        injected_noise=0.0,
        lr_decay="cosine",
    )
    res = fit.fit(post, (PHI, Y), progress=False)
    z = (res.mean - mean) / cov.diag().sqrt()
    ratio = res.stddev**2 * prec.diag()
    assert bool((z.abs() < 0.25).all()), z
    assert bool(((ratio > 0.7) & (ratio < 1.3)).all()), ratio
    s = res.sample(50)  # plugs into the same predictive as samples
    assert bnnkit.predict.predict(post, s, PHI[:5]).mean.shape == (5,)


def test_fbnn_bad_input():
    with pytest.raises(BnnkitError, match="num_function_samples"):
        FBNN(num_function_samples=2)
    prob = linear_problem(n=10, d=2)
    with pytest.raises(BnnkitError, match="functional posterior"):
        FBNN(num_epochs=1).fit(prob.posterior(), (prob.X, prob.y), progress=False)


def test_fbnn_on_image_shaped_inputs():
    """The GP sees flat rows, the network its own input shape (as in FunctionalPosterior)."""
    from bnnkit.functional import FunctionalPosterior, GPPrior, MeasurementPoints

    g = torch.Generator().manual_seed(0)
    x = torch.rand(24, 1, 3, 3, generator=g)
    y = torch.randint(0, 2, (24,), generator=g)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 2), torch.nn.Flatten(), torch.nn.Linear(8, 2))
    gp = GPPrior("rbf", input_dim=9, lengthscale=1.0, outputscale=1.0, jitter=1e-3)
    post = FunctionalPosterior(net, bnnkit.Categorical(), gp, MeasurementPoints(4, 4), x)
    res = FBNN(num_epochs=2, batch_size=8, num_function_samples=5).fit(post, (x, y), progress=False)
    assert len(res.history["elbo"]) == 2 and all(math.isfinite(v) for v in res.history["elbo"])
