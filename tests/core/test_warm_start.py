"""A MAP warm start puts every chain near a mode, reproducibly, and the sampler takes it from there."""

import pytest
import torch

import bnnkit
from bnnkit.core.errors import BnnkitError
from bnnkit.core.warm_start import map_init
from tests.helpers import linear_problem

PROB = linear_problem(n=30, d=2)


def test_map_init_reaches_the_posterior_mode_from_each_chains_prior_draw():
    post = PROB.posterior()
    init = map_init(post, (PROB.X, PROB.y), steps=600, lr=0.05)
    starts = [post.view.ravel(init(c, torch.Generator().manual_seed(c))) for c in range(2)]
    for x in starts:  # the posterior is Gaussian: its mode is its mean
        assert torch.allclose(x, PROB.mean, atol=1e-3)


def test_a_warm_started_run_is_reproducible_and_starts_at_the_mode():
    post = PROB.posterior()
    kw = dict(num_samples=3, num_chains=2, seed=4, progress=False, init=map_init(post, (PROB.X, PROB.y), steps=300, lr=0.05))
    a = bnnkit.sample(bnnkit.HMC(step_size=0.05, num_steps=3), post, (PROB.X, PROB.y), **kw)
    b = bnnkit.sample(bnnkit.HMC(step_size=0.05, num_steps=3), post, (PROB.X, PROB.y), **kw)
    assert torch.equal(a.positions, b.positions)
    assert (a.positions[:, 0] - PROB.mean).abs().max() < 5 * PROB.cov.diagonal().sqrt().max()


def test_map_init_refuses_what_it_cannot_use():
    with pytest.raises(BnnkitError, match="needs a bnnkit.Posterior"):
        map_init(lambda p, b: p["x"].sum(), (PROB.X, PROB.y))
    with pytest.raises(BnnkitError, match="num_data"):
        map_init(PROB.posterior(), (PROB.X, PROB.y), batch_size=5)
