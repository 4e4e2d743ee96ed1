"""Fused HMC (bnnkit.samplers.fused_hmc): blocks of full-batch transitions in one compiled call.

Most tests run the block's transition eagerly (``DEFAULT_LOOP = "eager"``): the same random numbers,
the same cuts, the same warm-up and resume logic as the compiled scan.  One test compiles.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

import bnnkit
import bnnkit.samplers.fused_hmc as fused_hmc
from bnnkit.core.errors import BnnkitError
from bnnkit.data import Minibatches
from bnnkit.samplers import HMC
from tests.helpers import assert_gaussian_matches, linear_problem, mlp_regression

# Warm-up with adaptation (step at a time), thinning, chunks of 4 draws, blocks of at most 5.
RUN = dict(num_samples=9, thin=2, num_warmup=6, num_chains=2, chunk_size=4, seed=5, progress=False)


@pytest.fixture
def eager(monkeypatch):
    monkeypatch.setattr(fused_hmc, "DEFAULT_LOOP", "eager")


def _problem():
    return mlp_regression()


def _assert_same(a, b, tol=1e-9):
    torch.testing.assert_close(a.positions, b.positions, rtol=tol, atol=tol)
    assert sorted(a.stats) == sorted(b.stats)
    for k in a.stats:
        assert a.stats[k].dtype == b.stats[k].dtype, k
        torch.testing.assert_close(a.stats[k], b.stats[k], rtol=tol, atol=tol, msg=k)


@pytest.mark.parametrize("jitter", [0.0, 0.2])
def test_fused_hmc_equals_step_at_a_time(eager, jitter):
    post, X, y = _problem()
    alg = HMC(step_size=0.035, num_steps=5, jitter=jitter, adapt_step_size=False, adapt_mass=False)
    ref = bnnkit.sample(alg, post, (X, y), **RUN)
    out = bnnkit.sample(alg, post, (X, y), fused=5, **RUN)
    _assert_same(out, ref)
    assert out.config["fused"] == {"block": 5, "loop": "eager"}
    # The chains moved and rejected some proposals: the test compares real transitions.
    acc = out.stats["is_accepted"].double().mean()
    assert 0.2 < acc < 1.0
    assert out.positions[0].std(0).max() > 0


def test_vectorized_fused_hmc_equals_vectorized_step_at_a_time(eager):
    post, X, y = _problem()
    alg = HMC(step_size=0.05, num_steps=4)
    kw = dict(RUN, num_chains=3, chain_method="vectorized")
    ref = bnnkit.sample(alg, post, (X, y), **kw)
    out = bnnkit.sample(alg, post, (X, y), fused=4, **kw)
    assert out.positions.shape == ref.positions.shape == (3, 9, post.target().view.size)
    _assert_same(out, ref)


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_fused_hmc_recovers_a_gaussian_posterior(eager):
    """Bayesian linear regression (a Linear module): the fused chain's mean and covariance match
    the closed-form posterior within Monte-Carlo error."""
    lp = linear_problem(seed=2)
    out = bnnkit.sample(
        HMC(step_size=0.1, num_steps=5),
        lp.posterior(),
        (lp.X, lp.y),
        num_samples=4000,
        num_warmup=300,
        seed=0,
        progress=False,
        fused=64,
    )
    assert_gaussian_matches(out.positions, lp.mean, lp.cov)


@dataclasses.dataclass(frozen=True)
class InterruptedHMC(HMC):
    """HMC whose fused kernel raises KeyboardInterrupt at its ``warmup_stop``-th warm-up step or
    its ``block_stop``-th block (0: never)."""

    warmup_stop: int = 0
    block_stop: int = 0

    def config(self):  # the same run as HMC's: a resume checks the configuration
        return {k: v for k, v in super().config().items() if not k.endswith("_stop")}

    def build_fused(self, model, block, **k):
        kernel = super().build_fused(model, block, **k)
        step, run_block, calls = kernel.step, kernel.run_block, {"step": 0, "block": 0}

        def interrupted_step(*args, **kwargs):
            calls["step"] += 1
            if calls["step"] == self.warmup_stop:
                raise KeyboardInterrupt
            return step(*args, **kwargs)

        def interrupted_block(*args, **kwargs):
            calls["block"] += 1
            if calls["block"] == self.block_stop:
                raise KeyboardInterrupt
            return run_block(*args, **kwargs)

        kernel.step, kernel.run_block = interrupted_step, interrupted_block
        return kernel


@pytest.mark.parametrize("stop", [dict(warmup_stop=6), dict(block_stop=3)])
@pytest.mark.parametrize("method", ["sequential", "vectorized"])
def test_fused_hmc_resumes_bit_identically(eager, tmp_path, stop, method):
    """Interrupted in warm-up (adaptation state restored from the checkpoint after step 4) or in
    sampling, the resumed run's draws equal the uninterrupted run's bit for bit."""
    post, X, y = _problem()
    kw = dict(RUN, chain_method=method)
    whole = bnnkit.sample(HMC(step_size=0.05, num_steps=4), post, (X, y), fused=5, **kw)
    out = str(tmp_path / "run")
    with pytest.raises(KeyboardInterrupt):
        bnnkit.sample(InterruptedHMC(0.05, 4, **stop), post, (X, y), fused=5, output=out, **kw)
    resumed = bnnkit.sample(InterruptedHMC(0.05, 4), post, (X, y), fused=5, output=out, **kw)
    _assert_same(resumed, whole, tol=0)


def test_fused_hmc_refuses_minibatches(eager):
    post, X, y = mlp_regression(num_data=40)
    with pytest.raises(BnnkitError, match="full data set"):
        bnnkit.sample(HMC(), post, Minibatches(X, y, batch_size=8), fused=4, num_samples=2, progress=False)


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_compiled_fused_hmc_equals_step_at_a_time():
    post, X, y = _problem()
    alg = HMC(step_size=0.05, num_steps=3)
    kw = dict(num_samples=6, num_warmup=4, num_chains=1, seed=1, progress=False)
    ref = bnnkit.sample(alg, post, (X, y), **kw)
    out = bnnkit.sample(alg, post, (X, y), fused=4, **kw)
    assert out.config["fused"]["loop"] == "scan"
    _assert_same(out, ref, tol=1e-8)
