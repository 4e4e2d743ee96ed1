"""NUTS with compiled subtrees (bnnkit.samplers.fused_nuts): the recursive sampler's transitions,
one compiled call per trajectory doubling.  Most tests run the subtree code eagerly."""

from __future__ import annotations

import pytest
import torch

import bnnkit
import bnnkit.samplers.fused_nuts as fused_nuts
from bnnkit.core.errors import BnnkitError
from bnnkit.samplers import NUTS
from bnnkit.samplers.fused_nuts import FusedNUTSKernel
from tests.helpers import assert_gaussian_matches, linear_problem, mlp_regression


@pytest.fixture
def eager(monkeypatch):
    monkeypatch.setattr(fused_nuts, "DEFAULT_LOOP", "eager")


def _problem():
    return mlp_regression()


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
@pytest.mark.parametrize("step_size", [0.02, 0.06, 0.1])
def test_transitions_equal_the_recursive_sampler(step_size):
    """From the same state and generator, transition by transition: the same tree depths, leapfrog
    counts, divergences and acceptances, the same number of random numbers drawn, positions equal
    to rounding.  Step sizes from long U-turning trees (0.02: depth 8) to divergent subtrees (0.1)."""
    post, X, y = _problem()
    batch = (X, y)
    warm = bnnkit.sample(
        NUTS(0.05, max_tree_depth=9), post, batch, num_samples=1, num_warmup=30, seed=3, progress=False
    )
    alg = NUTS(step_size, max_tree_depth=9, adapt_step_size=False, adapt_mass=False)
    ref, fused = alg.build(post.target()), FusedNUTSKernel(alg, post, loop="eager")
    s1 = s2 = warm.final_states[0]._replace(step_size=torch.tensor(step_size, dtype=torch.float64))
    g1, g2 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    kinds, steps = set(), 0
    for _ in range(8):
        s1, i1 = ref.step(s1, batch, g1)
        s2, i2 = fused.step(s2, batch, g2)
        assert torch.equal(g1.get_state(), g2.get_state())
        for k in ("tree_depth", "num_steps", "diverging", "is_accepted"):
            assert getattr(i1, k).item() == getattr(i2, k).item(), k
        torch.testing.assert_close(s2.position, s1.position, rtol=0, atol=1e-8)
        torch.testing.assert_close(i2.accept_prob, i1.accept_prob, rtol=1e-9, atol=1e-12)
        kinds.add("diverged" if bool(i1.diverging) else "u-turn" if int(i1.tree_depth) < 9 else "max depth")
        steps += int(i1.num_steps)
        s2 = s1  # re-synchronise: long trajectories amplify rounding differences
    # whole subtrees are integrated even where the recursion stops early
    assert fused.compiled_steps >= steps
    # the step sizes cover the ways a trajectory ends
    assert {0.02: "u-turn", 0.06: "diverged", 0.1: "diverged"}[step_size] in kinds


def test_sample_with_fused_nuts_equals_step_at_a_time(eager):
    """Through bnnkit.sample with warm-up adaptation (the compiled-subtree transition warms up
    too); short trees keep the rounding differences from growing."""
    post, X, y = _problem()
    kw = dict(num_samples=12, num_warmup=10, thin=2, num_chains=2, chunk_size=5, seed=4, progress=False)
    alg = NUTS(0.05, max_tree_depth=4)
    ref = bnnkit.sample(alg, post, (X, y), **kw)
    out = bnnkit.sample(alg, post, (X, y), fused=True, **kw)
    torch.testing.assert_close(out.positions, ref.positions, rtol=1e-7, atol=1e-7)
    assert sorted(out.stats) == sorted(ref.stats)
    for k in ref.stats:
        assert out.stats[k].dtype == ref.stats[k].dtype, k
        torch.testing.assert_close(out.stats[k], ref.stats[k], rtol=1e-6, atol=1e-6, msg=k)


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_fused_nuts_recovers_a_gaussian_posterior(eager):
    lp = linear_problem(seed=2)
    out = bnnkit.sample(
        NUTS(0.1),
        lp.posterior(),
        (lp.X, lp.y),
        num_samples=1500,
        num_warmup=300,
        seed=0,
        progress=False,
        fused=True,
    )
    assert_gaussian_matches(out.positions, lp.mean, lp.cov)


def test_fused_nuts_refuses_vectorised_chains(eager):
    post, X, y = _problem()
    with pytest.raises(BnnkitError, match="vectorised|vectorized"):
        bnnkit.sample(
            NUTS(),
            post,
            (X, y),
            fused=True,
            num_samples=2,
            num_chains=2,
            chain_method="vectorized",
            progress=False,
        )


@pytest.mark.slow  # over 3 s: the default run stays under 3 min
def test_compiled_subtrees_equal_the_recursive_sampler():
    post, X, y = _problem()
    kw = dict(num_samples=6, num_warmup=5, num_chains=1, seed=1, progress=False)
    alg = NUTS(0.05, max_tree_depth=4)
    ref = bnnkit.sample(alg, post, (X, y), **kw)
    out = bnnkit.sample(alg, post, (X, y), fused=True, **kw)
    assert out.config["fused"]["loop"] == "scan"
    torch.testing.assert_close(out.positions, ref.positions, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(out.stats["num_steps"], ref.stats["num_steps"], rtol=0, atol=0)
