"""The compiled gradient path agrees with the eager one."""

import pytest
import torch

import bnnkit
from bnnkit.data import Minibatches
from tests.helpers import linear_problem

PROB = linear_problem(n=40, d=3)


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_compiled_target_and_run_agree_with_eager():
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).double()
    post = bnnkit.Posterior(net, bnnkit.Gaussian(0.5), bnnkit.GaussianPrior(1.0), num_data=40)
    target = post.target()
    x = post.initial_position("module")
    batch = (PROB.X[:8], PROB.y[:8])
    lp, g = target.value_and_grad(x, batch)
    lpc, gc = target.compiled().value_and_grad(x, batch)
    assert torch.allclose(lp, lpc, rtol=1e-10) and torch.allclose(g, gc, rtol=1e-9, atol=1e-12)

    kw = dict(num_samples=20, num_warmup=5, progress=False, seed=2)
    eager = bnnkit.sample(bnnkit.SGLD(1e-4), post, Minibatches(PROB.X, PROB.y, batch_size=8), **kw)
    comp = bnnkit.sample(
        bnnkit.SGLD(1e-4), post, Minibatches(PROB.X, PROB.y, batch_size=8), compile=True, **kw
    )
    assert torch.allclose(eager.positions, comp.positions, rtol=1e-8, atol=1e-10)
