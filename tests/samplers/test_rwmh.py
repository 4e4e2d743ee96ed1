import torch

import bnnkit
from tests.helpers import linear_problem


def test_rwmh_warmup_adapts_the_scale():
    prob = linear_problem(n=30, d=2)
    # a hopeless initial scale (100x too big) must be tuned down during warm-up
    s = bnnkit.sample(
        bnnkit.RandomWalkMH(step_size=10.0),
        prob.posterior(),
        (prob.X, prob.y),
        num_samples=500,
        num_warmup=600,
        seed=0,
        progress=False,
    )
    assert 0.1 < s.acceptance_rate() < 0.5
    assert float(s.stats["step_size"][0, 0]) < 10.0


def test_rwmh_without_adaptation_keeps_scale():
    prob = linear_problem(n=30, d=2)
    s = bnnkit.sample(
        bnnkit.RandomWalkMH(step_size=0.05, adapt=False),
        prob.posterior(),
        (prob.X, prob.y),
        num_samples=50,
        num_warmup=50,
        seed=0,
        progress=False,
    )
    assert torch.allclose(s.stats["step_size"], torch.tensor(0.05, dtype=torch.float64))
