"""The cheap functional prior (``prior_form=Vecchia(...)``, bnnkit/functional/vecchia.py).

Checks, from exact to statistical:

- with every earlier point as a neighbour and every factor per step, the Vecchia log density and
  its gradient are the exact form's at the same (fixed) points, to rounding;
- its dense covariance is then ``K + delta I``, and the KL divergence from the exact marginal
  does not grow as the neighbour sets grow (they are nested);
- the per-step estimate from a few factors is unbiased for the full Vecchia gradient;
- on the linear model / linear kernel problem of test_fsgmcmc (docs/fsgmcmc_design.md 8.1), the
  cheap form's fSGHMC and fSGLD draws agree with the exact form's within Monte-Carlo error.
"""

import pytest
import torch

import bnnkit
from bnnkit.core.errors import BnnkitError
from bnnkit.diagnostics import ess
from bnnkit.functional import FSGHMC, FSGLD, FunctionalPosterior, GPPrior, Vecchia, VecchiaFactors
from tests.functional.test_fsgmcmc import COV, GP, MEAN, PHI, SIGMA, XM, D, Y


def small_mlp_problem(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(30, 3, generator=g, dtype=torch.float64)
    y = torch.randn(30, generator=g, dtype=torch.float64)
    gp = GPPrior("rbf", input_dim=3, lengthscale=1.5, outputscale=1.0)
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(3, 6), torch.nn.Tanh(), torch.nn.Linear(6, 2)).double()
    return x, y, gp, net


def posterior(net, gp, pool, x, form):
    return FunctionalPosterior(net, bnnkit.Categorical(), gp, pool, x, prior_form=form)


def kl_exact_to(cov_v: torch.Tensor, k: torch.Tensor) -> float:
    n = k.shape[0]
    return float(
        0.5 * (torch.trace(torch.linalg.solve(cov_v, k)) - n + torch.logdet(cov_v) - torch.logdet(k))
    )


def test_all_neighbours_and_all_factors_is_the_exact_form():
    x, _, gp, net = small_mlp_problem()
    yc = torch.randint(2, (30,), generator=torch.Generator().manual_seed(1))
    pool = x[:15]
    exact = posterior(net, gp, pool, x, "exact")
    vec = posterior(net, gp, pool, x, Vecchia(neighbours=14, factors_per_step=15))
    w = exact.initial_position("module")
    v1, g1 = exact.value_and_grad_flat(w, (x, yc))
    v2, g2 = vec.value_and_grad_flat(w, (x, yc))
    # The same target: stochastic steps then differ only in the (absent) subsampling.
    v3, g3 = vec.stochastic_grad(w, (x, yc), torch.Generator().manual_seed(0))
    assert torch.allclose(v1, v2, rtol=1e-10) and torch.allclose(v1, v3, rtol=1e-10)
    assert torch.allclose(g1, g2, rtol=1e-8, atol=1e-10) and torch.allclose(g1, g3, rtol=1e-8, atol=1e-10)


def test_covariance_is_exact_with_all_neighbours_and_kl_shrinks_with_more():
    x, _, gp, _ = small_mlp_problem()
    pool = x[:20]
    kls = []
    for k in (1, 3, 8, 19):
        vf = VecchiaFactors(gp, pool, Vecchia(neighbours=k))
        kmat = gp.covariance(vf.points) + vf.delta * torch.eye(20, dtype=torch.float64)
        kls.append(kl_exact_to(vf.covariance(), kmat))
    assert kls[-1] < 1e-8, kls
    assert all(a >= b - 1e-9 for a, b in zip(kls, kls[1:])), kls


def test_subsampled_factors_give_an_unbiased_gradient():
    x, _, gp, net = small_mlp_problem()
    yc = torch.randint(2, (30,), generator=torch.Generator().manual_seed(1))
    vec = posterior(net, gp, x, x, Vecchia(neighbours=4, factors_per_step=3))
    w = vec.initial_position("module")
    full_v, full_g = vec.value_and_grad_flat(w, (x, yc))
    gen = torch.Generator().manual_seed(0)
    draws = [vec.stochastic_grad(w, (x, yc), gen) for _ in range(3000)]
    vals = torch.stack([d[0] for d in draws])
    grads = torch.stack([d[1] for d in draws])
    z = (grads.mean(0) - full_g).abs() / (grads.std(0) / len(draws) ** 0.5).clamp_min(1e-12)
    # Roughly 80 coordinates: max |z| of 80 standard normals is below 4.5 with probability > 0.999.
    assert float(z.max()) < 4.5, float(z.max())
    assert abs(float(vals.mean() - full_v)) < 4 * float(vals.std()) / len(draws) ** 0.5


def test_vectorized_chains_share_the_factors_and_match_one_chain():
    x, _, gp, net = small_mlp_problem()
    yc = torch.randint(2, (30,), generator=torch.Generator().manual_seed(1))
    vec = posterior(net, gp, x, x, Vecchia(neighbours=4, factors_per_step=3))
    w = vec.initial_position("module")
    lp, g = vec.vectorized_stochastic_grad(
        torch.stack([w, w + 0.1]), (x, yc), torch.Generator().manual_seed(3), False
    )
    lp0, g0 = vec.stochastic_grad(w, (x, yc), torch.Generator().manual_seed(3))
    lp1, g1 = vec.stochastic_grad(w + 0.1, (x, yc), torch.Generator().manual_seed(3))
    assert torch.allclose(g[0], g0, atol=1e-10) and torch.allclose(g[1], g1, atol=1e-10)
    assert torch.allclose(lp, torch.stack([lp0, lp1]), atol=1e-10)


def test_bad_prior_form():
    x, _, gp, net = small_mlp_problem()
    with pytest.raises(BnnkitError, match="prior_form"):
        posterior(net, gp, x, x, "inducing")
    with pytest.raises(BnnkitError, match="neighbours"):
        Vecchia(neighbours=0)


def _linear_draws(alg, form) -> torch.Tensor:
    module = torch.nn.Linear(D, 1, bias=False).double()
    post = FunctionalPosterior(module, bnnkit.Gaussian(SIGMA), GP, XM, PHI, prior_form=form)
    s = bnnkit.sample(alg, post, (PHI, Y), num_samples=1000, thin=5, num_warmup=500, progress=False, seed=1)
    return s.positions


# the Vecchia energy and gradient equal the exact ones at full neighbours (fast tests above); the MC comparison of draws runs with the slow tests
@pytest.mark.slow
@pytest.mark.parametrize("alg", [FSGHMC(0.02, friction=10.0), FSGLD(6e-4)], ids=["fsghmc", "fsgld"])
def test_cheap_form_draws_agree_with_the_exact_form(alg):
    """Linear model, linear kernel (rank 3), pool of M = 6 points: 3 neighbours make the Vecchia
    density the exact marginal up to the jitter, so the targets agree, while each step uses 2 of
    the 6 factors (subsampling noise).  Means and variances of the two chains must agree within
    4 combined Monte-Carlo standard errors (ESS-based), and each must match the closed form."""
    cheap = _linear_draws(alg, Vecchia(neighbours=3, factors_per_step=2))
    exact = _linear_draws(alg, "exact")
    stats = []
    for d in (cheap, exact):
        e = torch.as_tensor(ess(d), dtype=torch.float64).reshape(-1)
        flat = d.reshape(-1, D)
        m, v = flat.mean(0), flat.var(0)
        stats.append((m, v, (v / e).sqrt(), v * (2 / e).sqrt()))
    (m1, v1, sm1, sv1), (m2, v2, sm2, sv2) = stats
    z_mean = (m1 - m2).abs() / (sm1**2 + sm2**2).sqrt()
    z_var = (v1 - v2).abs() / (sv1**2 + sv2**2).sqrt()
    assert float(z_mean.max()) < 4 and float(z_var.max()) < 4, (z_mean, z_var)
    # Both against the exact target (the O(eps) bias is ~5% of a standard deviation here).
    for m, v, sm, sv in stats:
        assert float(((m - MEAN).abs() / sm).max()) < 4.5
        assert float(((v - COV.diag()).abs() / sv).max()) < 4.5


def test_several_pools_average_the_exact_pool_energies():
    """``pools=R``: R draws of the measurement spec, each factorised alone; with all neighbours
    the density is the average of the exact GP log densities at the R pools (the fixed R-sample
    version of the fresh-draw target), and the few-factor estimate stays unbiased."""
    from bnnkit.functional import MeasurementPoints

    x, _, gp, net = small_mlp_problem()
    yc = torch.randint(2, (30,), generator=torch.Generator().manual_seed(1))
    spec = MeasurementPoints(num_from_data=8, num_uniform=0)
    vec = posterior(net, gp, spec, x, Vecchia(neighbours=7, factors_per_step=4, pools=3))
    assert vec.vecchia.num_pools == 3 and vec.vecchia.num_points == 24
    w = vec.initial_position("module")
    v_vec, g_vec = vec.value_and_grad_flat(w, (x, yc))
    exact = []
    for r in range(3):
        pool = spec.bind(x).sample(x, torch.Generator().manual_seed(r))
        exact.append(posterior(net, gp, pool, x, "exact").value_and_grad_flat(w, (x, yc)))
    # The likelihood term is in each exact value once: average the values, then compare.
    assert torch.allclose(v_vec, sum(v for v, _ in exact) / 3, rtol=1e-10)
    assert torch.allclose(g_vec, sum(g for _, g in exact) / 3, rtol=1e-8, atol=1e-10)
    gen = torch.Generator().manual_seed(0)
    grads = torch.stack([vec.stochastic_grad(w, (x, yc), gen)[1] for _ in range(3000)])
    z = (grads.mean(0) - g_vec).abs() / (grads.std(0) / 3000**0.5).clamp_min(1e-12)
    assert float(z.max()) < 4.5, float(z.max())
    # A fixed point set is a single pool whatever ``pools`` says.
    assert posterior(net, gp, x[:8], x, Vecchia(pools=3)).vecchia.num_pools == 1


def test_image_shaped_inputs_take_the_pool_rows_in_their_own_shape():
    """The pool is kept as flat rows for the GP and given back to the network in the input shape
    (e.g. ``[1, 4, 4]`` images), as the exact form does with ``X_M``."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(20, 1, 4, 4, generator=g, dtype=torch.float64)
    yc = torch.randint(3, (20,), generator=g)
    gp = GPPrior("rbf", input_dim=16, ard=False, lengthscale=4.0, outputscale=1.0)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3)).double()
    pool = x[:7].reshape(7, -1)
    exact = FunctionalPosterior(net, bnnkit.Categorical(), gp, pool, x, prior_form="exact")
    vec = FunctionalPosterior(net, bnnkit.Categorical(), gp, pool, x, prior_form=Vecchia(6, 7))
    w = exact.initial_position("module")
    v1, g1 = exact.value_and_grad_flat(w, (x, yc))
    v2, g2 = vec.stochastic_grad(w, (x, yc), torch.Generator().manual_seed(0))
    assert torch.allclose(v1, v2, rtol=1e-10) and torch.allclose(g1, g2, rtol=1e-8, atol=1e-10)
    s = bnnkit.sample(FSGHMC(1e-3, friction=10.0), vec, (x, yc), num_samples=5, num_warmup=5, progress=False)
    assert torch.isfinite(s.positions).all()
