"""GP prior for functional SG-MCMC: kernels, log density, K^{-1} solve, jitter retry, pre-training.

Kernel matrices are checked against the textbook formulas written out here (the library only uses
GPyTorch's kernels); ``log_prob`` against ``torch.distributions.MultivariateNormal``; ``alpha``
against a dense solve.  The pre-training test fits data drawn from the GP it should recover.
"""

import json
import math

import gpytorch
import pytest
import torch

from bnnkit.core.errors import BnnkitError
from bnnkit.functional import KERNEL_NAMES, GPPrior, SharedKernelMLL, make_kernel

F64 = torch.float64


def inputs(m=25, d=1, seed=0, scale=2.0):
    g = torch.Generator().manual_seed(seed)
    return scale * torch.randn(m, d, generator=g, dtype=F64)


def sqdist(x):
    return torch.cdist(x, x).square()


# ---------------------------------------------------------------------------- kernels
@pytest.mark.parametrize("spec", [*KERNEL_NAMES, "rbf+linear", "rbf*periodic", "matern32*linear+constant"])
@pytest.mark.parametrize("d", [1, 3])
def test_every_spec_builds_a_symmetric_psd_matrix(spec, d):
    gp = GPPrior(spec, input_dim=d)
    k = gp.covariance(inputs(30, d))
    assert k.shape == (30, 30) and k.dtype == F64
    torch.testing.assert_close(k, k.T)
    eig = torch.linalg.eigvalsh(k)
    assert eig.min() > -1e-10 * eig.max(), (spec, eig.min())


def test_ard_gives_one_lengthscale_per_dimension_and_can_be_switched_off():
    assert len(GPPrior("rbf", input_dim=3).hyperparameters()["lengthscale"]) == 3
    assert isinstance(GPPrior("rbf", input_dim=3, ard=False).hyperparameters()["lengthscale"], float)
    assert isinstance(GPPrior("rbf", input_dim=1).hyperparameters()["lengthscale"], float)
    gp = GPPrior("matern52", input_dim=2, lengthscale=[0.5, 2.0])
    assert gp.hyperparameters()["lengthscale"] == pytest.approx([0.5, 2.0])


def test_single_kernels_match_their_formulas():
    x = inputs(20, 1)
    r2 = sqdist(x)
    r = r2.sqrt()
    ell, s, p, v = 0.7, 1.3, 2.1, 0.4
    expected = {
        "rbf": s * torch.exp(-0.5 * r2 / ell**2),
        "matern12": s * torch.exp(-r / ell),
        "matern32": s * (1 + math.sqrt(3) * r / ell) * torch.exp(-math.sqrt(3) * r / ell),
        "matern52": s * (1 + math.sqrt(5) * r / ell + 5 * r2 / (3 * ell**2)) * torch.exp(-(5**0.5) * r / ell),
        # GPyTorch's parameterisation: the lengthscale enters unsquared.
        "periodic": s * torch.exp(-2 * torch.sin(math.pi * r / p).square() / ell),
    }
    for spec, k in expected.items():
        kw = {"period": p} if spec == "periodic" else {}
        gp = GPPrior(spec, lengthscale=ell, outputscale=s, **kw)
        torch.testing.assert_close(gp.covariance(x), k, msg=spec)
    torch.testing.assert_close(GPPrior("linear", variance=v).covariance(x), v * x @ x.T)
    x3 = inputs(10, 3)
    vs = torch.tensor([0.5, 1.0, 2.0], dtype=F64)
    torch.testing.assert_close(GPPrior("linear", input_dim=3, variance=vs).covariance(x3), (x3 * vs) @ x3.T)


def test_sums_and_products_are_sums_and_products_of_the_component_matrices():
    x = inputs(20, 2)

    def cov(spec, **kw):
        return GPPrior(spec, input_dim=2, **kw).covariance(x)

    rbf = cov("rbf", lengthscale=0.8, outputscale=1.7)
    lin = cov("linear", variance=0.3)
    per = cov("periodic", lengthscale=0.8, outputscale=1.0, period=1.5)
    m32 = cov("matern32", lengthscale=0.8, outputscale=1.7)
    torch.testing.assert_close(cov("rbf+linear", lengthscale=0.8, outputscale=1.7, variance=0.3), rbf + lin)
    # A product term has one outputscale for the whole product.
    torch.testing.assert_close(cov("rbf*periodic", lengthscale=0.8, outputscale=1.7, period=1.5), rbf * per)
    # '*' binds tighter than '+'; a term with 'linear' takes its scale from the linear variance.
    k = cov("rbf*linear+matern32", lengthscale=0.8, outputscale=1.7, variance=0.3)
    torch.testing.assert_close(k, (rbf / 1.7) * lin + m32)
    # Spaces and case are ignored.
    torch.testing.assert_close(
        cov(" RBF + Linear ", lengthscale=0.8, outputscale=1.7, variance=0.3), rbf + lin
    )
    assert not torch.allclose(rbf + lin, rbf * lin)


@pytest.mark.parametrize("spec", ["rbff", "rbf+", "rbf**linear", "", "gaussian"])
def test_unknown_kernel_spec_lists_the_valid_names(spec):
    with pytest.raises(BnnkitError, match="matern52"):
        make_kernel(spec, 1)


def test_a_kernel_object_is_used_as_is():
    k = gpytorch.kernels.MaternKernel(nu=1.5)
    assert make_kernel(k, 1) is k
    gp = GPPrior(k)
    assert gp.kernel is not k and gp.kernel.lengthscale.dtype == F64  # GPPrior keeps its own float64 copy
    assert k.lengthscale.dtype == torch.float32
    with pytest.raises(BnnkitError, match="ard_num_dims=2"):
        GPPrior(gpytorch.kernels.RBFKernel(ard_num_dims=2), input_dim=3)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(lengthscale=0.0), "lengthscale must be finite and > 0"),
        (dict(lengthscale=-1.0), "lengthscale must be finite and > 0"),
        (dict(outputscale=float("nan")), "outputscale must be finite and > 0"),
        (dict(outputscale=float("inf")), "outputscale must be finite and > 0"),
        (dict(kernel="linear", variance=-2.0), "variance must be finite and > 0"),
        (dict(kernel="periodic", period=0.0), "period must be finite and > 0"),
        (dict(period=1.0), "has no period"),
        (dict(input_dim=2, lengthscale=[1.0, 2.0, 3.0]), "3 values"),
        (dict(jitter=0.0), "jitter"),
        (dict(jitter=1e-3, max_jitter=1e-4), "max_jitter"),
        (dict(mean="linear"), "mean must be one of"),
        (dict(input_dim=0), "input_dim"),
    ],
)
def test_bad_constructor_arguments_raise(kwargs, match):
    with pytest.raises(BnnkitError, match=match):
        GPPrior(**kwargs)


# ---------------------------------------------------------------------------- density and solve
def dense_reference(gp, x):
    chol, delta = gp.cholesky(x)
    k = gp.covariance(x) + delta * torch.eye(x.shape[0], dtype=F64)
    torch.testing.assert_close(chol @ chol.T, k)
    return k, delta


def test_log_prob_matches_multivariate_normal_single_and_multi_output():
    x = inputs(15, 2)
    gp = GPPrior("matern52", input_dim=2, lengthscale=[1.0, 0.5], outputscale=2.0)
    k, delta = dense_reference(gp, x)
    assert delta == pytest.approx(1e-6 * float(gp.covariance(x).diagonal().mean()))
    mvn = torch.distributions.MultivariateNormal(torch.zeros(15, dtype=F64), k)
    g = torch.Generator().manual_seed(1)
    f = torch.randn(15, generator=g, dtype=F64)
    torch.testing.assert_close(gp.log_prob(f, x), mvn.log_prob(f))
    fc = torch.randn(15, 3, generator=g, dtype=F64)
    torch.testing.assert_close(gp.log_prob(fc, x), mvn.log_prob(fc.T).sum())


def test_log_prob_gradient_is_minus_alpha_and_alpha_matches_a_dense_solve():
    x = inputs(12, 1)
    gp = GPPrior("rbf", lengthscale=1.5, outputscale=0.7)
    k, _ = dense_reference(gp, x)
    g = torch.Generator().manual_seed(2)
    for shape in [(12,), (12, 4)]:
        f = torch.randn(*shape, generator=g).requires_grad_(True)  # float32 network outputs
        a = gp.alpha(f, x)
        assert a.shape == f.shape and a.dtype == torch.float32 and not a.requires_grad
        expected = torch.linalg.solve(k, f.detach().double().reshape(12, -1)).reshape(shape)
        torch.testing.assert_close(a.double(), expected, rtol=1e-5, atol=1e-5)
        lp = gp.log_prob(f, x)
        assert lp.dtype == torch.float32
        (grad,) = torch.autograd.grad(lp, f)
        torch.testing.assert_close(grad, -a, rtol=1e-4, atol=1e-4)


def test_mean_and_input_shapes():
    gp = GPPrior("rbf")
    x1 = torch.linspace(-1, 1, 7)
    m = gp.mean(x1)  # a 1-D tensor is accepted when input_dim == 1
    assert m.shape == (7,) and m.dtype == F64 and (m == 0).all()
    torch.testing.assert_close(gp.covariance(x1), gp.covariance(x1.reshape(-1, 1)))
    with pytest.raises(BnnkitError, match="built for input_dim=1, got inputs with 2 columns"):
        gp.covariance(torch.zeros(4, 2))
    with pytest.raises(BnnkitError, match="2-D"):
        GPPrior("rbf", input_dim=2).mean(torch.zeros(4))
    with pytest.raises(BnnkitError, match="2-D"):
        gp.covariance(torch.zeros(2, 3, 1))
    with pytest.raises(BnnkitError, match="f has 5 rows but there are 7 measurement points"):
        gp.alpha(torch.zeros(5), x1)
    with pytest.raises(BnnkitError, match="f has 6 rows"):
        gp.log_prob(torch.zeros(6, 2), x1)


# ---------------------------------------------------------------------------- jitter
def test_cholesky_retries_with_a_larger_jitter_on_duplicated_dense_points():
    # 50 points on [0, 1] twice over, lengthscale 1: K has exact duplicates and numerical rank ~10,
    # so a relative jitter of 1e-20 fails and the retry doubles it until K + delta I factorises.
    x = torch.linspace(0, 1, 50, dtype=F64).repeat(2).reshape(-1, 1)
    gp = GPPrior("rbf", lengthscale=1.0, outputscale=2.0, jitter=1e-20)
    chol, delta = gp.cholesky(x)
    assert delta > 100 * 1e-20 * 2.0
    assert delta <= 1e-2 * 2.0
    k = gp.covariance(x) + delta * torch.eye(100, dtype=F64)
    assert torch.isfinite(chol).all()
    torch.testing.assert_close(chol @ chol.T, k)
    # The jitter goes onto the diagonal in place, each try from the original diagonal: the factor
    # is bitwise that of the dense sum, and K itself is not left altered between calls.
    assert torch.equal(chol, torch.linalg.cholesky(k))
    assert torch.equal(gp.cholesky(x)[0], chol)
    # The default relative jitter (1e-6) factorises at once.
    assert GPPrior("rbf", lengthscale=1.0, outputscale=2.0).cholesky(x)[1] == pytest.approx(2e-6)


def test_hopeless_cholesky_cases_raise():
    x = torch.linspace(0, 1, 50, dtype=F64).repeat(2).reshape(-1, 1)
    tight = GPPrior("rbf", lengthscale=1.0, jitter=1e-20, max_jitter=1e-19)
    with pytest.raises(BnnkitError, match="duplicate or too-dense measurement points"):
        tight.cholesky(x)
    with pytest.raises(BnnkitError, match="duplicate or too-dense"):
        tight.alpha(torch.zeros(100), x)
    bad = x.clone()
    bad[3, 0] = float("nan")
    with pytest.raises(BnnkitError, match="NaN"):
        GPPrior("rbf").cholesky(bad)
    with pytest.raises(BnnkitError, match="prior variance is zero"):
        GPPrior("linear").cholesky(torch.zeros(4, 1))


# ---------------------------------------------------------------------------- pre-training
def draw_gp(n, lengthscale, outputscale, noise, seed, columns=1, half_width=10.0):
    g = torch.Generator().manual_seed(seed)
    x = half_width * (2 * torch.rand(n, 1, generator=g, dtype=F64) - 1)
    k = GPPrior("rbf", lengthscale=lengthscale, outputscale=outputscale).covariance(x)
    chol = torch.linalg.cholesky(k + 1e-9 * torch.eye(n, dtype=F64))
    f = chol @ torch.randn(n, columns, generator=g, dtype=F64)
    y = f + math.sqrt(noise) * torch.randn(n, columns, generator=g, dtype=F64)
    return x, (y[:, 0] if columns == 1 else y), k


def test_pretraining_recovers_known_hyperparameters():
    """Data from GP(0, 1.5 RBF(0.6)) + N(0, 0.05) at 200 inputs on [-10, 10] (~33 lengthscales).

    Tolerance 30%: this is finite-sample variability of the MLE, not optimiser error.  Over seeds
    0-9 the fitted/true ratios had standard deviations of 4% (lengthscale), 12% (outputscale, the
    least identified: ~1/sqrt(number of lengthscales) relative) and 9% (noise), and 200 Adam steps
    at lr 0.1 matched a 1500-step fit to three digits.  The fit must also be at least as good as the
    true hyperparameters in marginal likelihood, which a stalled optimiser would fail.
    """
    x, y, k_true = draw_gp(200, 0.6, 1.5, 0.05, seed=0)
    gp = GPPrior("rbf")
    fitted = gp.fit(x, y, num_steps=200, lr=0.1, progress=False)
    assert fitted["lengthscale"] == pytest.approx(0.6, rel=0.3)
    assert fitted["outputscale"] == pytest.approx(1.5, rel=0.3)
    assert fitted["noise_variance"] == pytest.approx(0.05, rel=0.3)
    assert gp.noise_variance == fitted["noise_variance"] and gp.fitted is fitted
    truth = torch.distributions.MultivariateNormal(
        torch.zeros(200, dtype=F64), k_true + 0.05 * torch.eye(200, dtype=F64)
    )
    true_loss = -float(truth.log_prob(y - y.mean())) / 200  # mean="zero" fits centred targets
    assert fitted["loss"] <= true_loss + 1e-6, (fitted["loss"], true_loss)
    # Frozen, and the fitted noise is not part of K.
    assert all(not p.requires_grad for p in gp.kernel.parameters())
    xm = x[:10]
    same = GPPrior("rbf", lengthscale=fitted["lengthscale"], outputscale=fitted["outputscale"])
    k_fit = same.covariance(xm)
    torch.testing.assert_close(gp.covariance(xm), k_fit)
    json.dumps(gp.config())
    assert gp.config()["fitted"]["lengthscale"] == fitted["lengthscale"]


def test_repeated_rows_do_not_collapse_the_fitted_noise():
    # Exact repeats of (x, y) make the marginal likelihood unbounded as the noise goes to 0 (the
    # wine-quality-red failure: noise 1e-4).  The fit drops them: with every row repeated it
    # returns exactly the fit of the distinct rows, with a noise near the true 0.3^2.
    g = torch.Generator().manual_seed(3)
    x = torch.rand(60, 2, generator=g, dtype=F64) * 4
    y = torch.sin(x[:, 0]) + 0.3 * torch.randn(60, generator=g, dtype=F64)
    plain = GPPrior("rbf", input_dim=2).fit(x, y, num_steps=100, progress=False)
    doubled = GPPrior("rbf", input_dim=2).fit(
        torch.cat([x, x]), torch.cat([y, y]), num_steps=100, progress=False
    )
    assert doubled["num_points"] == 60
    assert doubled["noise_variance"] == pytest.approx(plain["noise_variance"], rel=1e-9)
    assert 0.3**2 / 3 < plain["noise_variance"] < 3 * 0.3**2
    # Repeated inputs with different targets are evidence about the noise and stay.
    y2 = torch.cat([y, y + 0.3 * torch.randn(60, generator=g, dtype=F64)])
    assert (
        GPPrior("rbf", input_dim=2).fit(torch.cat([x, x]), y2, num_steps=5, progress=False)["num_points"]
        == 120
    )


def test_shared_kernel_mll_equals_gpytorch_exact_mll_and_independent_gps():
    x, y, _ = draw_gp(40, 0.8, 1.0, 0.1, seed=3, columns=3)
    kernel = make_kernel("rbf", 1).double()
    lik = gpytorch.likelihoods.GaussianLikelihood().double()
    lik.noise = 0.1

    class Single(gpytorch.models.ExactGP):
        def forward(self, z):
            return gpytorch.distributions.MultivariateNormal(torch.zeros(z.shape[0], dtype=F64), kernel(z))

    from bnnkit.functional.gp_prior import _SharedKernelGP

    shared = _SharedKernelGP(x, y, lik, kernel, constant_mean=False)
    mll = SharedKernelMLL(lik, shared)
    with torch.no_grad():
        total = mll(shared(x), y)
        per_column = []
        for c in range(3):
            single = Single(x, y[:, c], lik)
            ref = gpytorch.mlls.ExactMarginalLogLikelihood(lik, single)
            per_column.append(ref(single(x), y[:, c]))
            torch.testing.assert_close(mll(shared(x), y[:, c : c + 1]), per_column[-1])
        k = kernel(x).to_dense() + 0.1 * torch.eye(40, dtype=F64)
        mvn = torch.distributions.MultivariateNormal(torch.zeros(40, dtype=F64), k)
    torch.testing.assert_close(total, sum(per_column))
    torch.testing.assert_close(total, mvn.log_prob(y.T).sum() / 40)


def test_multi_output_fit_with_constant_mean():
    x, y, _ = draw_gp(120, 0.6, 1.0, 0.05, seed=4, columns=2)
    offsets = torch.tensor([3.0, -1.0], dtype=F64)
    gp = GPPrior("rbf", mean="constant")
    fitted = gp.fit(x, y + offsets, num_steps=150, lr=0.1, progress=False)
    assert fitted["num_outputs"] == 2
    assert fitted["lengthscale"] == pytest.approx(0.6, rel=0.3)
    # GLS constant-mean estimate: sd ~ sqrt(s l sqrt(2 pi) / range) ~ 0.3 here.
    assert fitted["mean_constant"] == pytest.approx(offsets.tolist(), abs=1.0)
    xm = x[:8]
    m = gp.mean(xm)
    assert m.shape == (8, 2)
    torch.testing.assert_close(m[0], torch.tensor(fitted["mean_constant"], dtype=F64))
    f = torch.randn(8, 2, generator=torch.Generator().manual_seed(5), dtype=F64)
    chol, delta = gp.cholesky(xm)
    k = gp.covariance(xm) + delta * torch.eye(8, dtype=F64)
    torch.testing.assert_close(gp.alpha(f, xm), torch.linalg.solve(k, f - m))
    with pytest.raises(BnnkitError, match="fitted for 2 outputs"):
        gp.alpha(torch.zeros(8, 3), xm)
    json.dumps(gp.config())


def test_fit_subsamples_reproducibly_and_shows_progress(capsys):
    x, y, _ = draw_gp(60, 1.0, 1.0, 0.1, seed=6)

    def fit(seed, progress=False):
        return GPPrior("rbf").fit(
            x, y, num_steps=5, max_points=20, generator=torch.Generator().manual_seed(seed), progress=progress
        )

    a, b, c = fit(0), fit(0), fit(1)
    assert a["num_points"] == 20
    assert a == b and a != c
    fit(0, progress=True)
    assert "gp prior fit" in capsys.readouterr().err
    # no generator: the subset is seeded, not taken from the global RNG (whose seed differs per process)
    torch.manual_seed(1)
    d1 = GPPrior("rbf").fit(x, y, num_steps=5, max_points=20, progress=False)
    torch.manual_seed(2)
    d2 = GPPrior("rbf").fit(x, y, num_steps=5, max_points=20, progress=False)
    assert d1 == d2 == a
    gp = GPPrior("rbf", lengthscale=0.9)  # an explicit value is the starting point
    gp.fit(x, y, num_steps=1, lr=1e-6, progress=False)
    assert gp.hyperparameters()["lengthscale"] == pytest.approx(0.9, rel=1e-3)
    with pytest.raises(BnnkitError, match="N = 60 rows"):
        GPPrior("rbf").fit(x, y[:10], progress=False)
    with pytest.raises(BnnkitError, match="num_steps"):
        GPPrior("rbf").fit(x, y, num_steps=0, progress=False)
    with pytest.raises(BnnkitError, match="built for input_dim=2"):
        GPPrior("rbf", input_dim=2).fit(x, y, progress=False)


def test_fit_on_a_subset_keeps_the_start_that_predicts_unseen_rows_best(monkeypatch):
    """With ``max_points`` rows left over, a second fit starts from the median distance; the fit
    with the lower predictive NLL on those rows is kept (checked against gpytorch's predictive)."""
    x, y, _ = draw_gp(90, 0.6, 1.0, 0.05, seed=3)

    def fit(gp, n=90):
        return gp.fit(x[:n], y[:n], num_steps=20, max_points=30, progress=False)

    gp = GPPrior("rbf")
    f = fit(gp)
    first, second = f["starts"]
    assert first["lengthscale_start"] < second["lengthscale_start"]  # the pick, then the median
    kept = min(f["starts"], key=lambda s: s["heldout_nll"])
    assert f["noise_variance"] == kept["noise_variance"] and f["loss"] == kept["loss"]
    assert gp.hyperparameters() == kept["hyperparameters"]

    # the held-out NLL of the kept fit, from gpytorch's own predictive distribution
    perm = torch.randperm(90, generator=torch.Generator().manual_seed(0))
    xs, ys = x[perm[:30]].reshape(-1, 1), y[perm[:30]]
    xh, yh = x[perm[30:60]].reshape(-1, 1), y[perm[30:60]]

    class Exact(gpytorch.models.ExactGP):
        def forward(self, z):
            return gpytorch.distributions.MultivariateNormal(torch.zeros(len(z), dtype=F64), gp.kernel(z))

    lik = gpytorch.likelihoods.GaussianLikelihood().double()
    lik.noise = f["noise_variance"]
    model = Exact(xs, ys - ys.mean(), lik).double().eval()
    lik.eval()
    with torch.no_grad():
        pred = lik(model(xh))
        nll = -torch.distributions.Normal(pred.mean + ys.mean(), pred.variance.sqrt()).log_prob(yh).mean()
    assert float(nll) == pytest.approx(kept["heldout_nll"], rel=1e-6)

    # whichever start wins, its hyperparameters are the ones the prior keeps
    for scores, winner in (([2.0, 1.0], 1), ([1.0, 2.0], 0), ([1.0, 1.0], 0)):
        it = iter(scores)
        monkeypatch.setattr(GPPrior, "_heldout_nll", lambda self, *a, it=it: next(it))
        gp = GPPrior("rbf")
        f = fit(gp)
        assert gp.hyperparameters() == f["starts"][winner]["hyperparameters"]
        assert f["noise_variance"] == f["starts"][winner]["noise_variance"]
    monkeypatch.undo()

    # fewer than max_points rows left over, or an explicit lengthscale (the user's start): one start
    assert fit(GPPrior("rbf"), n=59)["starts"] is None
    assert fit(GPPrior("rbf", lengthscale=0.5))["starts"] is None


def test_the_marginal_likelihoods_closed_form_gradient_is_gpytorchs():
    """SharedKernelMLL's hand-written backward against gpytorch's own (autograd through its
    Cholesky-based ``inv_quad_logdet``): the loss and the gradient of every hyperparameter."""
    from bnnkit.functional.gp_fit import _SharedKernelGP

    x, y, _ = draw_gp(60, 0.7, 1.3, 0.1, seed=6, columns=2)
    x = torch.cat([x, torch.randn(60, 2, generator=torch.Generator().manual_seed(1), dtype=F64)], 1)
    grads = []
    for closed in (True, False):
        kernel = make_kernel("rbf", 3).double()
        lik = gpytorch.likelihoods.GaussianLikelihood().double()
        lik.noise = 0.2
        model = _SharedKernelGP(x, y, lik, kernel, constant_mean=True)
        mll = SharedKernelMLL(lik, model)
        if closed:
            loss = mll(model(x), y)
        else:  # gpytorch's path: autograd through its inv_quad_logdet
            out = lik(model(x))
            diff = y - out.mean.unsqueeze(-1) - model.constants(2, y)
            iq, ld = out.lazy_covariance_matrix.inv_quad_logdet(inv_quad_rhs=diff, logdet=True)
            loss = -0.5 * (iq + 2 * ld + 60 * 2 * math.log(2 * math.pi)) / 60
        params = [p for _, p in sorted(model.named_parameters())]
        grads.append((loss.detach(), torch.autograd.grad(loss, params)))
    torch.testing.assert_close(grads[0][0], grads[1][0], rtol=1e-10, atol=1e-12)
    for a, b in zip(grads[0][1], grads[1][1]):
        assert float(b.abs().max()) > 0
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-10)
