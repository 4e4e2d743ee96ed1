import math

import pytest
import torch

import bnnkit
from bnnkit.diagnostics import ess
from bnnkit.samplers.adaptation import window_schedule
from tests.helpers import assert_gaussian_matches, linear_problem


# covered fast by tests/samplers/test_conjugate_all.py::test_sampler_recovers_conjugate_posterior_and_predictive[hmc]
@pytest.mark.slow
def test_hmc_matches_conjugate_linear_regression():
    prob = linear_problem(n=30, d=3)
    s = bnnkit.sample(
        bnnkit.HMC(step_size=0.05, num_steps=8),
        prob.posterior(),
        (prob.X, prob.y),
        num_samples=1500,
        num_warmup=400,
        num_chains=2,
        seed=3,
        progress=False,
    )
    assert_gaussian_matches(s.positions, prob.mean, prob.cov)
    # predictive mean and variance at test points: mean of f_s and var(f_s) + sigma^2
    Xs = torch.tensor([[0.5, -1.0, 2.0], [3.0, 0.0, 0.0]], dtype=torch.float64)
    f = s.flat() @ Xs.T
    m_exact, v_exact = prob.predictive(Xs)
    e = torch.as_tensor(ess(f.reshape(2, -1, 2)))
    assert ((f.mean(0) - m_exact).abs() < 4 * ((v_exact - prob.sigma**2) / e).sqrt()).all()
    v = f.var(0) + prob.sigma**2
    epi = v_exact - prob.sigma**2
    assert ((v - v_exact).abs() < 5 * epi * (2 / e).sqrt()).all()


def test_hmc_adapts_step_size_towards_target_acceptance():
    prob = linear_problem(n=30, d=2)
    s = bnnkit.sample(
        bnnkit.HMC(step_size=1.0, num_steps=3, target_accept=0.8),
        prob.posterior(),
        (prob.X, prob.y),
        num_samples=500,
        num_warmup=500,
        seed=0,
        progress=False,
    )
    # in 2-D the acceptance stays near 1 until close to the stability edge, so the averaged
    # dual-averaging step lands a little below it: acceptance above target, step size reduced
    assert 0.65 < s.acceptance_rate() < 0.99
    eps = s.stats["step_size"]
    assert 0.2 < float(eps[0, 0]) < 1.0
    assert torch.all(eps == eps[0, 0]), "step size must be frozen after warm-up"


def test_mass_matrix_adapts_to_posterior_scales():
    # badly scaled Gaussian: sds 100 and 0.01; the adapted inverse mass should track the variances
    sds = torch.tensor([100.0, 0.01], dtype=torch.float64)

    def log_density(p, batch):
        return -0.5 * ((p["x"] / sds) ** 2).sum()

    init = {"x": torch.zeros(2, dtype=torch.float64)}
    algo = bnnkit.HMC(step_size=0.001, num_steps=10)
    kernel = algo.build(bnnkit.as_target(log_density, init))
    gen = torch.Generator().manual_seed(0)
    state = kernel.init(init["x"], None)
    a = kernel.adaptation.init(state, 1000)
    for _ in range(1000):
        state, info = kernel.step(state, None, gen)
        a, state = kernel.adaptation.update(a, state, info)
    ratio = state.inv_mass / sds**2
    assert ((ratio > 0.3) & (ratio < 3)).all(), ratio


def test_window_schedule_matches_stan_layout():
    start, ends = window_schedule(1000)
    assert start == 75 and ends == [100, 150, 250, 450, 950]
    start, ends = window_schedule(100)  # short warm-up: 15% / 75% / 10%
    assert start == 15 and ends[-1] == 90
    assert window_schedule(10) == (10, [])


def test_divergent_trajectory_is_recorded_not_raised():
    # log density is -inf outside the unit ball: large steps leave it
    def log_density(p, batch):
        r2 = (p["x"] ** 2).sum()
        return torch.where(r2 < 1.0, -0.5 * r2, torch.tensor(-math.inf, dtype=r2.dtype))

    init = {"x": torch.zeros(3, dtype=torch.float64)}
    s = bnnkit.sample(
        bnnkit.HMC(step_size=2.0, num_steps=5, adapt_step_size=False, adapt_mass=False),
        log_density,
        None,
        init=init,
        num_samples=50,
        seed=0,
        progress=False,
    )
    assert s.num_divergences() > 0
    assert torch.isfinite(s.positions).all()


def test_same_seed_same_chain_different_seed_different_chain():
    prob = linear_problem(n=20, d=2)
    kw = dict(num_samples=30, num_warmup=20, progress=False)
    a = bnnkit.sample(bnnkit.HMC(), prob.posterior(), (prob.X, prob.y), seed=7, **kw)
    b = bnnkit.sample(bnnkit.HMC(), prob.posterior(), (prob.X, prob.y), seed=7, **kw)
    c = bnnkit.sample(bnnkit.HMC(), prob.posterior(), (prob.X, prob.y), seed=8, **kw)
    assert torch.equal(a.positions, b.positions)
    assert not torch.equal(a.positions, c.positions)


def test_leapfrog_is_reversible_pure_and_stops_where_asked():
    """The one leapfrog of HMC and NUTS (eager and fused): integrating back with ``-e`` returns to
    the start, ``L`` merged steps equal ``L`` single steps to rounding, the inputs are untouched,
    and ``stop`` ends the trajectory at the first density it rejects."""
    from bnnkit.samplers.hamiltonian import leapfrog

    prec = torch.tensor([[2.0, 0.5], [0.5, 1.0]], dtype=torch.float64)

    def value_and_grad(x, batch):
        return -0.5 * x @ prec @ x, -prec @ x

    x0, p0 = torch.tensor([1.0, -0.5], dtype=torch.float64), torch.tensor([0.3, 0.8], dtype=torch.float64)
    g0, inv_m, e = (
        value_and_grad(x0, None)[1],
        torch.tensor([1.0, 2.0], dtype=torch.float64),
        torch.tensor(0.1),
    )
    before = [t.clone() for t in (x0, p0, g0)]
    x1, p1, g1, lp1, n = leapfrog(value_and_grad, x0, p0, g0, e, inv_m, None, 7)
    assert n == 7 and all(torch.equal(a, b) for a, b in zip(before, (x0, p0, g0)))
    xb, pb, *_ = leapfrog(value_and_grad, x1, p1, g1, -e, inv_m, None, 7)
    torch.testing.assert_close((xb, pb), (x0, p0), rtol=0, atol=1e-12)
    z = (x0, p0, g0)
    for _ in range(7):
        z = leapfrog(value_and_grad, *z, e, inv_m, None)[:3]
    torch.testing.assert_close(z, (x1, p1, g1), rtol=0, atol=1e-12)
    assert torch.isclose(lp1, value_and_grad(x1, None)[0])

    def outside_nan(x, batch):  # NaN beyond |x_0| > 1.2
        lp, g = value_and_grad(x, batch)
        return torch.where(x[0].abs() > 1.2, math.nan, lp), g

    *_, lp, n = leapfrog(outside_nan, x0, p0 + 5, g0, e, inv_m, None, 7, stop=lambda lp: bool(lp.isnan()))
    assert 1 <= n < 7 and lp.isnan()
