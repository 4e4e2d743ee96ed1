import math

import pytest
import torch

import bnnkit
from bnnkit.core.errors import BnnkitError
from bnnkit.vi import BayesByBackprop, MeanFieldGaussian, gaussian_kl, monte_carlo_kl
from bnnkit.vi.estimators import ForwardPlan
from bnnkit.vi.local_mlp import LocalELBO, LocalForward, LocalMLP
from bnnkit.vi.optim import FlatAdam
from tests.helpers import linear_problem


@pytest.mark.slow  # over 3 s: the default run stays under 3 min
@pytest.mark.parametrize("estimator", ["reparam", "local", "flipout"])
def test_bbb_reaches_the_closed_form_mean_field_optimum(estimator):
    # For a Gaussian likelihood and prior the mean-field optimum is known exactly:
    # mu = posterior mean, sigma_i^2 = 1 / Lambda_ii (Lambda the posterior precision).
    prob = linear_problem(n=30, d=2)
    fit = BayesByBackprop(lr=0.05, num_epochs=1500, num_mc=4, estimator=estimator, lr_decay="cosine")
    r = fit.fit(prob.posterior(), (prob.X, prob.y), seed=1, progress=False)
    sd_opt = torch.linalg.inv(prob.cov).diag().rsqrt()
    assert torch.allclose(r.mean, prob.mean, atol=0.1 * float(sd_opt.min()))
    assert torch.allclose(r.stddev, sd_opt, rtol=0.05)


def test_mean_field_underestimates_marginal_variance_when_correlated():
    # strongly correlated inputs make the posterior correlated: MF variances 1/Lambda_ii < Sigma_ii
    g = torch.Generator().manual_seed(0)
    x1 = torch.randn(40, generator=g, dtype=torch.float64)
    X = torch.stack([x1, x1 + 0.3 * torch.randn(40, generator=g, dtype=torch.float64)], 1)
    y = X @ torch.tensor([1.0, -1.0], dtype=torch.float64) + 0.5 * torch.randn(
        40, generator=g, dtype=torch.float64
    )
    net = torch.nn.Linear(2, 1, bias=False).double()
    post = bnnkit.Posterior(net, bnnkit.Gaussian(0.5), bnnkit.GaussianPrior(1.0))
    prec = X.T @ X / 0.25 + torch.eye(2, dtype=torch.float64)
    true_var = torch.linalg.inv(prec).diag()
    r = BayesByBackprop(lr=0.05, num_epochs=1500, num_mc=4, lr_decay="cosine").fit(
        post, (X, y), progress=False
    )
    mf_var = r.stddev**2
    assert torch.allclose(mf_var, 1 / prec.diag(), rtol=0.1)
    ratio = mf_var / true_var
    assert (ratio < 0.5).all(), f"expected strong underestimation, got ratios {ratio.tolist()}"


def test_closed_form_kl_equals_monte_carlo_kl():
    g = torch.Generator().manual_seed(0)
    mu = torch.randn(50, generator=g, dtype=torch.float64)
    sigma = torch.rand(50, generator=g, dtype=torch.float64) + 0.1
    s = torch.full((50,), 1.3, dtype=torch.float64)
    exact = gaussian_kl(mu, sigma, s)
    w = mu + sigma * torch.randn(20000, 50, generator=g, dtype=torch.float64)
    q = torch.distributions.Normal(mu, sigma)
    p = torch.distributions.Normal(0.0, s)
    log_q, log_p = q.log_prob(w).sum(-1), p.log_prob(w).sum(-1)
    mc = monte_carlo_kl(log_q, log_p)
    se = (log_q - log_p).std() / math.sqrt(20000)
    assert abs(float(mc - exact)) < 4 * float(se)
    assert torch.allclose(exact, torch.distributions.kl_divergence(q, p).sum())


def _grad_samples(estimator, reps=300, general=False):
    # general=True: local reparameterisation by the route of any model, not the MLP one
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).double()
    post = bnnkit.Posterior(net, bnnkit.Gaussian(0.5), bnnkit.GaussianPrior(1.0))
    g = torch.Generator().manual_seed(1)
    X = torch.randn(64, 3, generator=g, dtype=torch.float64)
    y = torch.randn(64, generator=g, dtype=torch.float64)
    q = MeanFieldGaussian(post, init_sigma=0.3)
    gen = torch.Generator().manual_seed(2)
    plan = ForwardPlan(post, estimator)
    assert (plan.mlp is not None) == (estimator == "local")
    if general:
        plan.mlp = None
    grads = []
    for _ in range(reps):
        ll = post.likelihood.log_prob(plan(q.mu, q.sigma, X, gen), y, {})
        gm, gr = torch.autograd.grad(ll, [q.mu, q.rho])
        grads.append(torch.cat([gm, gr]))
    return torch.stack(grads)


def test_local_reparameterisation_and_flipout_same_expected_gradient_lower_variance():
    # first-layer weights: there the per-example estimators decorrelate the minibatch
    base = _grad_samples("reparam")
    sl = slice(0, 24)  # 0.weight of mu
    for est, general in (("local", False), ("local", True), ("flipout", False)):
        other = _grad_samples(est, general=general)
        diff = (other.mean(0) - base.mean(0))[sl]
        se = ((other.var(0) + base.var(0)) / other.shape[0]).sqrt()[sl]
        assert (diff.abs() < 5 * se).all(), est
        ratio = float(other.var(0)[sl].sum() / base.var(0)[sl].sum())
        assert ratio < 0.8, f"{est}: gradient variance ratio {ratio:.2f} vs reparam"


def test_blundell_kl_weights_sum_to_one():
    for b in (1, 5, 100):
        w = BayesByBackprop(kl_weighting="blundell")._kl_weights(b)
        assert abs(sum(w) - 1) < 1e-9 and w == sorted(w, reverse=True)


@pytest.mark.parametrize("estimator", ["reparam", "local"])
def test_scale_mixture_prior_uses_monte_carlo_kl_and_trains(estimator):
    prob = linear_problem(n=30, d=2)
    post = bnnkit.Posterior(prob.module, bnnkit.Gaussian(0.5), bnnkit.ScaleMixturePrior(0.5, 1.0, 0.1))
    fit = BayesByBackprop(lr=0.05, num_epochs=300, num_mc=2, estimator=estimator)
    r = fit.fit(post, (prob.X, prob.y), progress=False)
    assert all(math.isfinite(v) for v in r.history["elbo"])
    assert torch.allclose(r.mean, prob.mean, atol=0.1)


def test_samples_plug_into_the_samples_interface_and_minibatches_work():
    prob = linear_problem(n=40, d=2)
    r = BayesByBackprop(lr=0.05, num_epochs=50, batch_size=16, kl_weighting="blundell").fit(
        prob.posterior(), (prob.X, prob.y), progress=False, validation=(prob.X[:10], prob.y[:10])
    )
    s = r.sample(30, seed=0)
    assert s.positions.shape == (1, 30, 2) and s.params["weight"].shape == (1, 30, 1, 2)
    assert len(r.history["val_nll"]) == 50
    assert torch.equal(s.positions, r.sample(30, seed=0).positions)


def test_bad_input():
    with pytest.raises(BnnkitError, match="num_mc .* must be an integer >= 1"):
        BayesByBackprop(num_mc=0)
    with pytest.raises(BnnkitError, match="estimator must be one of"):
        BayesByBackprop(estimator="magic")
    with pytest.raises(BnnkitError, match="compile=True needs estimator='local'"):
        BayesByBackprop(compile=True)
    cnn = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.Flatten(), torch.nn.Linear(8, 1))
    cnn_post = bnnkit.Posterior(cnn, bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0))
    with pytest.raises(BnnkitError, match="compile=True needs a plain MLP"):
        BayesByBackprop(estimator="local", compile=True).plan(cnn_post)
    with pytest.raises(BnnkitError, match="has no parameters"):
        bnnkit.Posterior(torch.nn.ReLU(), bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0))
    with pytest.raises(BnnkitError, match="prior scale must be a positive"):
        bnnkit.GaussianPrior(0.0)
    prob = linear_problem(n=10, d=2)
    with pytest.raises(BnnkitError, match="batch_size 20 exceeds the 10 rows"):
        BayesByBackprop(batch_size=20).fit(prob.posterior(), (prob.X, prob.y), progress=False)
    learnt = bnnkit.Posterior(prob.module, bnnkit.Gaussian(1.0, learn_noise=True), bnnkit.GaussianPrior(1.0))
    with pytest.raises(BnnkitError, match="network weights only"):
        BayesByBackprop().fit(learnt, (prob.X, prob.y), progress=False)


def test_compiled_step_agrees_with_eager():
    # same generator draws -> same loss terms and gradients (float64, rounding only); and fits agree
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).double()
    g = torch.Generator().manual_seed(1)
    X = torch.randn(16, 3, generator=g, dtype=torch.float64)
    y = torch.randn(16, generator=g, dtype=torch.float64)
    post = bnnkit.Posterior(net, bnnkit.Gaussian(0.5), bnnkit.GaussianPrior(1.0), num_data=16)
    out = {}
    for compile in (False, True):
        bbb = BayesByBackprop(estimator="local", num_mc=2, compile=compile)
        q = MeanFieldGaussian(post, init_sigma=0.3)
        ll, kl = bbb.loss_and_grad(bbb.plan(post), q, (X[:8], y[:8]), torch.Generator().manual_seed(3), 0.25)
        out[compile] = (ll, kl, q.mu.grad, q.rho.grad)
    for a, b in zip(out[False], out[True]):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-12)
    fits = [
        BayesByBackprop(lr=0.01, num_epochs=3, batch_size=8, num_mc=2, estimator="local", compile=c).fit(
            post, (X, y), seed=4, progress=False
        )
        for c in (False, True)
    ]
    assert torch.allclose(fits[0].mean, fits[1].mean, rtol=1e-8, atol=1e-10)
    assert torch.allclose(fits[0].stddev, fits[1].stddev, rtol=1e-8, atol=1e-10)


def _mlp(*mods):
    torch.manual_seed(0)
    return torch.nn.Sequential(*mods).double()


@pytest.mark.parametrize(
    "net, bayesian",
    [
        (lambda: _mlp(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)), None),
        (  # ReLU, a layer without bias, a fixed bias, a nested Sequential, a final activation
            lambda: _mlp(
                torch.nn.Linear(3, 8),
                torch.nn.ReLU(),
                torch.nn.Sequential(torch.nn.Linear(8, 8, bias=False), torch.nn.Sigmoid()),
                torch.nn.Linear(8, 2),
                torch.nn.Tanh(),
            ),
            lambda n: n != "3.bias",
        ),
        (
            lambda: _mlp(torch.nn.Linear(3, 8), torch.nn.GELU(), torch.nn.Identity(), torch.nn.Linear(8, 2)),
            None,
        ),
        (lambda: torch.nn.Linear(3, 2).double(), None),
        (lambda: _mlp(torch.nn.Tanh(), torch.nn.Linear(3, 4), torch.nn.SiLU(), torch.nn.Linear(4, 2)), None),
    ],
)
def test_mlp_route_backward_matches_autograd(net, bayesian):
    post = bnnkit.Posterior(net(), bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.3), bayesian=bayesian)
    mlp = LocalMLP.build(post)
    assert mlp is not None
    g = torch.Generator().manual_seed(0)
    d = post.d_net
    mu = torch.randn(d, generator=g, dtype=torch.float64, requires_grad=True)
    rho = torch.randn(d, generator=g, dtype=torch.float64, requires_grad=True)
    x = torch.randn(5, 3, generator=g, dtype=torch.float64)
    eps = mlp.noise(5, g, mu)
    w = torch.randn(5, 2, generator=g, dtype=torch.float64)
    sigma = torch.nn.functional.softplus(rho)
    ref_out = mlp.functional(mu, sigma * sigma, x, eps)
    s = torch.full((d,), 1.3, dtype=torch.float64)
    ref_kl = gaussian_kl(mu, sigma, s)
    ref_f = torch.autograd.grad((ref_out * w).sum(), [mu, rho], retain_graph=True)
    ref = torch.autograd.grad((ref_out * w).sum() + 0.7 * ref_kl, [mu, rho])
    out = LocalForward.apply(mlp, mu, torch.nn.functional.softplus(rho), x, eps)
    assert torch.allclose(out, ref_out, rtol=1e-12, atol=1e-12)
    got = torch.autograd.grad((out * w).sum(), [mu, rho])
    assert all(torch.allclose(a, b, rtol=1e-10, atol=1e-12) for a, b in zip(got, ref_f))
    inv_var = 1 / (s * s)
    out, kl = LocalELBO.apply(mlp, mu, rho, x, eps, inv_var, 0.5 * inv_var, s.log().sum() - 0.5 * d)
    assert torch.allclose(kl, ref_kl, rtol=1e-12)
    got = torch.autograd.grad((out * w).sum() + 0.7 * kl, [mu, rho])
    assert all(torch.allclose(a, b, rtol=1e-10, atol=1e-12) for a, b in zip(got, ref))


def test_mlp_route_only_for_plain_mlps():
    def build(net, **kw):
        return LocalMLP.build(bnnkit.Posterior(net, bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0), **kw))

    assert (
        build(torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.ELU(), torch.nn.Linear(4, 1))) is not None
    )
    assert (
        build(torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.Flatten(), torch.nn.Linear(8, 1)))
        is None
    )
    assert (
        build(torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.LayerNorm(4), torch.nn.Linear(4, 1)))
        is None
    )
    assert (
        build(torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Softmax(-1), torch.nn.Linear(4, 1))) is None
    )
    fixed_middle = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))
    assert build(fixed_middle, bayesian=["0.", "2."]) is None

    class Residual(torch.nn.Sequential):
        def forward(self, x):
            return x + super().forward(x)

    assert build(Residual(torch.nn.Linear(2, 2))) is None
    shared = torch.nn.Linear(2, 2)
    assert build(torch.nn.Sequential(shared, torch.nn.Tanh(), shared)) is None
    hooked = torch.nn.Sequential(torch.nn.Linear(2, 1))
    hooked.register_forward_hook(lambda m, i, o: 2 * o)
    assert build(hooked) is None


def test_flat_adam_matches_torch_fused_adam():
    g = torch.Generator().manual_seed(0)
    a = [torch.randn(50, generator=g, requires_grad=True) for _ in range(2)]
    b = [t.detach().clone().requires_grad_(True) for t in a]
    opt_a, opt_b = torch.optim.Adam(a, lr=0.01, fused=True), FlatAdam(b, lr=0.01)
    sched = [torch.optim.lr_scheduler.CosineAnnealingLR(o, 20) for o in (opt_a, opt_b)]
    for _ in range(20):
        grads = [torch.randn(50, generator=g) for _ in range(2)]
        for ta, tb, gr in zip(a, b, grads):
            ta.grad, tb.grad = gr.clone(), gr.clone()
        opt_a.step()
        opt_b.step()
        for s in sched:
            s.step()
    assert all(torch.equal(ta, tb) for ta, tb in zip(a, b))


def test_reparameterised_draws_run_as_one_batched_forward():
    """num_mc draws of plain reparameterisation: one vmap forward equals one forward per draw."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    post = bnnkit.Posterior(net, bnnkit.Gaussian(0.5), bnnkit.GaussianPrior(1.0), num_data=20)
    plan, q = ForwardPlan(post, "reparam"), MeanFieldGaussian(post, 0.1)
    x = torch.randn(5, 3)
    out = plan.batched(q.mu, q.sigma, x, torch.Generator().manual_seed(1), 4)
    eps = torch.randn((4, q.mu.numel()), generator=torch.Generator().manual_seed(1))
    w = (q.mu + q.sigma * eps).detach()
    for s in range(4):
        torch.testing.assert_close(out[s], post.forward(post.split(w[s])[0], x))
