"""Functional SG-MCMC against the exact Gaussian target of docs/fsgmcmc_design.md section 8.1.

Linear model ``f(x) = phi^T theta`` (an ``nn.Linear(3, 1, bias=False)`` on features
``phi = [1, u, u^2]``), Gaussian likelihood, linear kernel ``k(x, x') = sigma_w^2 phi^T phi'``.
The prior term is exactly quadratic: ``-log N(Phi_M theta; 0, K) = theta^T A theta / 2 + c`` with
``A = Phi_M^T (sigma_w^2 Phi_M Phi_M^T + delta I)^-1 Phi_M``, so the target is Gaussian with
precision ``Phi^T Phi / sigma^2 + A``.  We test against ``A`` (with the jitter actually used), not
``I / sigma_w^2``, so jitter cannot cause false failures.
"""

import math

import pytest
import torch

import bnnkit
from bnnkit.core.errors import BnnkitError
from bnnkit.data import Minibatches
from bnnkit.functional import GPPrior, MeasurementPoints
from bnnkit.functional.algorithms import FSGHMC, FSGLD
from bnnkit.functional.posterior import FunctionalPosterior
from tests.helpers import assert_gaussian_matches, linear_problem, sg_errors, whitened_cov_error

SIGMA, N, D = 0.5, 50, 3


def features(u: torch.Tensor) -> torch.Tensor:
    return torch.stack([torch.ones_like(u), u, u * u], -1)


def problem(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    phi = features(torch.randn(N, generator=g, dtype=torch.float64))
    theta = torch.tensor([0.5, -1.0, 0.3], dtype=torch.float64)
    y = phi @ theta + SIGMA * torch.randn(N, generator=g, dtype=torch.float64)
    xm = features(torch.linspace(-2, 2, 2 * D, dtype=torch.float64))  # fixed X_M, M = 2d
    gp = GPPrior("linear", input_dim=D, variance=1.0)
    return phi, y, xm, gp


def exact(phi, y, xm, gp):
    _, delta = gp.cholesky(xm)
    a = xm.T @ torch.linalg.solve(xm @ xm.T + delta * torch.eye(xm.shape[0], dtype=xm.dtype), xm)
    prec = phi.T @ phi / SIGMA**2 + a
    cov = torch.linalg.inv(prec)
    return cov @ phi.T @ y / SIGMA**2, cov


def functional_posterior(phi, y, xm, gp, measurement=None):
    module = torch.nn.Linear(D, 1, bias=False).double()
    return FunctionalPosterior(
        module, bnnkit.Gaussian(SIGMA), gp, xm if measurement is None else measurement, phi
    )


PHI, Y, XM, GP = problem()
MEAN, COV = exact(PHI, Y, XM, GP)


# covered fast by test_gradient_is_the_derivative_of_the_log_density_on_a_small_mlp (the log density
# and its gradient) and test_fsg_mcmc_matches_the_exact_target_and_bias_shrinks (the exact target)
@pytest.mark.slow
def test_hmc_on_the_fixed_point_target_is_exact():
    """HMC is exact for any target: this checks the functional log density and its gradient."""
    post = functional_posterior(PHI, Y, XM, GP)
    s = bnnkit.sample(
        bnnkit.HMC(step_size=0.05, num_steps=10),
        post,
        (PHI, Y),
        num_samples=800,
        num_warmup=300,
        num_chains=2,
        progress=False,
        seed=0,
    )
    assert_gaussian_matches(s.positions, MEAN, COV)


@pytest.mark.parametrize(
    "alg, thins",
    [
        ((FSGLD(2e-3), FSGLD(6e-4)), (5, 10)),
        ((FSGHMC(0.05, friction=10.0), FSGHMC(0.02, friction=10.0)), (5, 10)),
    ],
    ids=["fsgld", "fsghmc"],
)
@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_fsg_mcmc_matches_the_exact_target_and_bias_shrinks(alg, thins):
    """Full batch (no gradient noise): the error is the O(eps) discretisation bias plus Monte-Carlo
    error.  Measured along the stiffest direction (whitened covariance), where the bias shows:
    it must fall at the smaller step to within 30% (Monte-Carlo part ~10% at 1000 draws)."""
    post = functional_posterior(PHI, Y, XM, GP)
    errs = []
    for a, thin in zip(alg, thins):
        s = bnnkit.sample(
            a,
            post,
            (PHI, Y),
            num_samples=1000,
            thin=thin,
            num_warmup=500,
            num_chains=1,
            progress=False,
            seed=1,
        )
        errs.append((sg_errors(s.positions, MEAN, COV)[0], whitened_cov_error(s.positions, COV)))
    assert errs[0][1] > 2 * errs[1][1], errs
    assert errs[1][0] < 0.3 and errs[1][1] < 0.3, errs


# the sampler code is the fixed-point one checked fast above; drawing fresh points per step is
# checked fast by test_measurement_points_are_reproducible_from_the_chain_generator
@pytest.mark.slow
def test_fresh_measurement_points_give_the_weight_prior_posterior():
    """M >= d full-rank points redrawn every step: E[A] ~ I / sigma_w^2, so the target is the
    textbook posterior with an N(0, I) weight prior (plus minibatch noise here)."""
    post = functional_posterior(PHI, Y, None, GP, MeasurementPoints(num_from_data=6, num_uniform=6))
    prec = PHI.T @ PHI / SIGMA**2 + torch.eye(D, dtype=torch.float64)
    cov = torch.linalg.inv(prec)
    mean = cov @ PHI.T @ Y / SIGMA**2
    s = bnnkit.sample(
        FSGHMC(0.01, friction=10.0),
        post,
        Minibatches(PHI, Y, batch_size=25),
        num_samples=1000,
        thin=10,
        num_warmup=500,
        num_chains=1,
        progress=False,
        seed=2,
    )
    mean_z = sg_errors(s.positions, mean, cov)[0]
    cov_err = whitened_cov_error(s.positions, cov)
    assert mean_z < 0.3 and cov_err < 0.3, (mean_z, cov_err)


def test_gradient_is_the_derivative_of_the_log_density_on_a_small_mlp():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 5), torch.nn.Tanh(), torch.nn.Linear(5, 1)).double()
    x = torch.randn(12, 2, dtype=torch.float64)
    y = torch.randn(12, dtype=torch.float64)
    xm = torch.randn(7, 2, dtype=torch.float64)
    gp = GPPrior("rbf", input_dim=2, lengthscale=1.0, outputscale=1.0)
    post = FunctionalPosterior(net, bnnkit.Gaussian(0.3), gp, xm, x, num_data=40)
    w = post.initial_position("module")
    batch = (x[:6], y[:6])
    value, grad = post.value_and_grad_flat(w, batch)
    # reference: the same density written out with gp.log_prob (autograd through f_M)
    wg = w.clone().requires_grad_(True)
    params = post.split(wg)[0]
    ll = bnnkit.Gaussian(0.3).log_prob(post.forward(params, batch[0]), batch[1], {}) * (40 / 6)
    ref = ll + gp.log_prob(post.forward(params, xm).squeeze(-1), xm)
    (ref_grad,) = torch.autograd.grad(ref, wg)
    assert torch.allclose(value, ref.detach(), rtol=1e-10)
    assert torch.allclose(grad, ref_grad, rtol=1e-8, atol=1e-10)
    # and a central finite difference along a random direction
    v = torch.randn_like(w)
    h = 1e-5
    fd = (post.log_prob_flat(w + h * v, batch) - post.log_prob_flat(w - h * v, batch)) / (2 * h)
    assert math.isclose(float(fd), float(grad @ v), rel_tol=1e-6)


def test_multi_output_gets_one_gp_per_logit():
    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3)).double()
    x = torch.randn(10, 2, dtype=torch.float64)
    y = torch.randint(0, 3, (10,))
    xm = torch.randn(5, 2, dtype=torch.float64)
    gp = GPPrior("matern52", input_dim=2, lengthscale=1.0, outputscale=2.0)
    post = FunctionalPosterior(net, bnnkit.Categorical(), gp, xm, x)
    w = post.initial_position("module")
    value, grad = post.value_and_grad_flat(w, (x, y))
    wg = w.clone().requires_grad_(True)
    params = post.split(wg)[0]
    f_m = post.forward(params, xm)  # [5, 3]
    ref = bnnkit.Categorical().log_prob(post.forward(params, x), y, {}) + sum(
        gp.log_prob(f_m[:, c], xm) for c in range(3)
    )
    (ref_grad,) = torch.autograd.grad(ref, wg)
    assert torch.allclose(value, ref.detach(), rtol=1e-10)
    assert torch.allclose(grad, ref_grad, rtol=1e-8, atol=1e-10)


CUDA = pytest.param(
    "cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]
)


@pytest.mark.parametrize("device", ["cpu", CUDA])
@pytest.mark.parametrize("chain_batched", [True, False])
def test_vectorized_chains_take_the_hand_written_pass_with_one_chains_gradient(
    chain_batched, device, monkeypatch
):
    """The default recipe's functional posterior (an MLP, a learnt noise under a Gamma prior, a
    weight term, fresh measurement points): K chains' value and gradient by the hand-batched pass
    equal each chain's autograd gradient at the same points."""
    from bnnkit.core.mlp import StackedMLP

    torch.manual_seed(2)
    net = (
        torch.nn.Sequential(torch.nn.Linear(2, 5), torch.nn.Tanh(), torch.nn.Linear(5, 1)).double().to(device)
    )
    x = torch.randn(20, 2, dtype=torch.float64).to(device)
    y = torch.randn(20, dtype=torch.float64).to(device)
    gp = GPPrior("rbf", input_dim=2, lengthscale=1.0, outputscale=1.0).to(device)
    lik = bnnkit.Gaussian(0.4, learn_noise=True, precision_prior=(2.0, 0.3))
    points = MeasurementPoints(num_from_data=3, num_uniform=4)
    post = FunctionalPosterior(net, lik, gp, points, x, weight_scale=2.0)
    calls = []
    real = StackedMLP.value_and_grad
    monkeypatch.setattr(StackedMLP, "value_and_grad", lambda self, *a: calls.append(1) or real(self, *a))
    k = 3
    w = post.initial_position("module") + 0.3 * torch.randn(k, post.view.size, dtype=torch.float64).to(device)
    rows = torch.stack([torch.randperm(20)[:8] for _ in range(k)]).to(device)
    batch = (x[rows], y[rows]) if chain_batched else (x[rows[0]], y[rows[0]])
    lp, g = post.vectorized_stochastic_grad(w, batch, torch.Generator(device).manual_seed(4), chain_batched)
    assert calls == [1]
    for c in range(k):
        one = (x[rows[c]], y[rows[c]]) if chain_batched else batch
        lp_c, g_c = post.stochastic_grad(w[c], one, torch.Generator(device).manual_seed(4))
        torch.testing.assert_close(lp[c], lp_c, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(g[c], g_c, rtol=1e-10, atol=1e-10)
    assert g[:, -1].abs().min() > 0  # the noise moves


def test_prior_term_is_not_scaled_by_n():
    """Duplicating the data (N -> 2N, same minibatch) doubles the likelihood gradient and leaves
    the functional prior's gradient unchanged."""
    w = torch.tensor([0.2, -0.4, 0.1], dtype=torch.float64)
    p1 = functional_posterior(PHI, Y, XM, GP)
    p2 = functional_posterior(torch.cat([PHI, PHI]), torch.cat([Y, Y]), XM, GP)
    batch = (PHI[:10], Y[:10])
    _, g1 = p1.value_and_grad_flat(w, batch)
    _, g2 = p2.value_and_grad_flat(w, batch)
    lik1 = PHI[:10].T @ (Y[:10] - PHI[:10] @ w) / SIGMA**2 * (N / 10)
    assert torch.allclose(g2 - g1, lik1, rtol=1e-10)  # the extra N/n share, prior term cancels


def test_measurement_points_are_reproducible_from_the_chain_generator():
    post = functional_posterior(PHI, Y, None, GP, MeasurementPoints(num_from_data=6, num_uniform=6))
    kw = dict(num_samples=10, num_warmup=0, progress=False, seed=5)
    a = bnnkit.sample(FSGLD(1e-4), post, Minibatches(PHI, Y, batch_size=10), **kw)
    b = bnnkit.sample(FSGLD(1e-4), post, Minibatches(PHI, Y, batch_size=10), **kw)
    assert torch.equal(a.positions, b.positions)


def test_functional_samplers_need_a_functional_posterior():
    prob = linear_problem(n=10, d=2)
    with pytest.raises(BnnkitError, match="FunctionalPosterior"):
        bnnkit.sample(
            FSGLD(1e-3), prob.posterior(num_data=10), (prob.X, prob.y), num_samples=2, progress=False
        )


def test_bad_functional_posterior_input():
    with pytest.raises(BnnkitError, match="train_inputs"):
        FunctionalPosterior(torch.nn.Linear(3, 1), bnnkit.Gaussian(1.0), GP, XM, torch.zeros(0, 3))
    post = functional_posterior(PHI, Y, XM, GP)
    with pytest.raises(BnnkitError):
        post.value_and_grad_flat(torch.zeros(3, dtype=torch.float64), (PHI[:, :2], Y))


def test_interrupted_fsghmc_run_resumes_bit_identical(tmp_path):
    """Fresh measurement points come from the chain's generator, which is checkpointed."""
    from tests.helpers import Interrupted

    post = functional_posterior(PHI, Y, None, GP, MeasurementPoints(num_from_data=6, num_uniform=6))
    kw = dict(num_samples=12, num_warmup=6, thin=2, num_chains=2, seed=7, progress=False, chunk_size=5)
    alg = FSGHMC(0.01, friction=10.0)
    ref = bnnkit.sample(alg, post, Minibatches(PHI, Y, batch_size=10), **kw)
    out = str(tmp_path / "run")
    with pytest.raises(KeyboardInterrupt):
        bnnkit.sample(Interrupted(alg, 23), post, Minibatches(PHI, Y, batch_size=10), output=out, **kw)
    resumed = bnnkit.sample(alg, post, Minibatches(PHI, Y, batch_size=10), output=out, **kw)
    assert torch.equal(resumed.positions, ref.positions)


@pytest.mark.parametrize("algorithm", [bnnkit.SGHMC(0.01, friction=10.0), bnnkit.HMC(), bnnkit.NUTS()])
def test_fused_samplers_refuse_a_functional_posterior(algorithm):
    """The fused paths need the exact gradient; a GP prior's is stochastic: a clear error, no run."""
    post = functional_posterior(PHI, Y, None, GP, MeasurementPoints(num_from_data=6, num_uniform=6))
    data = Minibatches(PHI, Y, batch_size=25) if isinstance(algorithm, bnnkit.SGHMC) else (PHI, Y)
    with pytest.raises(BnnkitError, match="needs the exact gradient.*step at a time"):
        bnnkit.sample(algorithm, post, data, num_samples=2, fused=True, progress=False)
