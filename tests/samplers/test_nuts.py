import math

import pytest
import torch

import bnnkit
from tests.helpers import assert_gaussian_matches, linear_problem


@pytest.mark.slow  # over 3 s: the default run stays under 3 min
def test_nuts_matches_conjugate_linear_regression_and_predictive():
    prob = linear_problem(n=30, d=4)
    s = bnnkit.sample(
        bnnkit.NUTS(),
        prob.posterior(),
        (prob.X, prob.y),
        num_samples=800,
        num_warmup=400,
        num_chains=2,
        seed=1,
        progress=False,
    )
    assert_gaussian_matches(s.positions, prob.mean, prob.cov)
    Xs = torch.tensor([[1.0, 0.0, -1.0, 2.0], [0.0, 3.0, 0.0, 0.0]], dtype=torch.float64)
    from bnnkit.predict import predict

    pred = predict(prob.posterior(), s, Xs)
    m, v = prob.predictive(Xs)
    epi = v - prob.sigma**2
    n = s.num_chains * s.num_draws
    assert ((pred.mean - m).abs() < 4 * (epi / (0.5 * n)).sqrt()).all()
    assert torch.allclose(pred.variance, v, rtol=0.1)


# covered fast by test_nuts_matches_conjugate_linear_regression_and_predictive (NUTS is exact) and
# test_divergences_are_recorded_and_positions_stay_finite (a plain log density)
@pytest.mark.slow
def test_nuts_on_a_badly_scaled_correlated_gaussian_via_plain_log_density():
    cov = torch.tensor([[100.0, 9.9], [9.9, 1.0]], dtype=torch.float64)  # corr 0.99, scales 10 and 1
    prec = torch.linalg.inv(cov)
    mean = torch.tensor([3.0, -1.0], dtype=torch.float64)

    def log_density(p, batch):
        d = p["x"] - mean
        return -0.5 * d @ prec @ d

    s = bnnkit.sample(
        bnnkit.NUTS(),
        log_density,
        None,
        init={"x": torch.zeros(2, dtype=torch.float64)},
        num_samples=1000,
        num_warmup=500,
        num_chains=2,
        seed=0,
        progress=False,
    )
    assert_gaussian_matches(s.positions, mean, cov)


def test_divergences_are_recorded_and_positions_stay_finite():
    def log_density(p, batch):
        r2 = (p["x"] ** 2).sum()
        return torch.where(r2 < 1.0, -0.5 * r2, torch.tensor(math.nan, dtype=r2.dtype))

    s = bnnkit.sample(
        bnnkit.NUTS(step_size=1.5, adapt_step_size=False, adapt_mass=False),
        log_density,
        None,
        init={"x": torch.zeros(3, dtype=torch.float64)},
        num_samples=60,
        seed=0,
        progress=False,
    )
    assert s.num_divergences() > 0
    assert torch.isfinite(s.positions).all()
    assert (s.positions.norm(dim=-1) < 1).all()


def test_tree_depth_is_capped_and_seeds_reproduce():
    prob = linear_problem(n=30, d=2)
    kw = dict(num_samples=20, num_warmup=0, progress=False)
    algo = bnnkit.NUTS(step_size=1e-3, max_tree_depth=3, adapt_step_size=False, adapt_mass=False)
    a = bnnkit.sample(algo, prob.posterior(), (prob.X, prob.y), seed=4, **kw)
    assert int(a.stats["tree_depth"].max()) == 3 and int(a.stats["num_steps"].max()) == 7
    b = bnnkit.sample(algo, prob.posterior(), (prob.X, prob.y), seed=4, **kw)
    c = bnnkit.sample(algo, prob.posterior(), (prob.X, prob.y), seed=5, **kw)
    assert torch.equal(a.positions, b.positions) and not torch.equal(a.positions, c.positions)
