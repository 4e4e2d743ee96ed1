"""A benchmark cell whose chain diverges is recorded as diverged (NaN draws), not an error."""

import torch

import bnnkit
from bnnkit.bench.divergence import sample_or_diverged


def runaway(params, batch):
    return 0.5 * (params["x"] ** 2).sum()


def test_a_diverged_cell_gives_nan_draws_with_the_reason():
    target = bnnkit.as_target(runaway, {"x": torch.ones(3)})
    s = sample_or_diverged(
        bnnkit.SGLD(0.5), target, None, init={"x": torch.ones(3)}, num_samples=400, progress=False
    )
    assert s.positions.shape == (1, 400, 3) and torch.isnan(s.positions).all()
    assert "diverged at step" in s.config["diverged"]


def test_a_cell_that_does_not_diverge_is_the_plain_run():
    def normal(params, batch):
        return -0.5 * (params["x"] ** 2).sum()

    kw = dict(init={"x": torch.zeros(2)}, num_samples=20, progress=False, seed=1)
    a = sample_or_diverged(bnnkit.SGLD(0.1), normal, None, **kw)
    b = bnnkit.sample(bnnkit.SGLD(0.1), normal, None, **kw)
    assert torch.equal(a.positions, b.positions)
