"""Simulation-based calibration: uniform ranks for exact posterior draws, rejection of wrong ones."""

import math

import pytest
import torch

import bnnkit
from bnnkit.core.errors import BnnkitError
from bnnkit.diagnostics import sampler_draws, sbc_ranks, sbc_uniformity
from bnnkit.samplers import GaussianProposal, ImportanceSampler

DT = torch.float64
N_OBS = 4  # theta ~ N(0, 1), y_i ~ N(theta, 1): posterior N(sum(y) / (n + 1), 1 / (n + 1))


def prior(gen):
    return {"theta": torch.randn(2, generator=gen, dtype=DT)}


def simulate(p, gen):
    return p["theta"] + torch.randn(N_OBS, 2, generator=gen, dtype=DT)


def exact_draws(var_factor=1.0, shift=0.0):
    def draws(y, num_draws, seed):
        g = torch.Generator().manual_seed(seed)
        mean = y.sum(0) / (N_OBS + 1) + shift
        sd = math.sqrt(var_factor / (N_OBS + 1))
        return {"theta": mean + sd * torch.randn(num_draws, 2, generator=g, dtype=DT)}

    return draws


def log_density(p, y):
    t = p["theta"]
    return -0.5 * (t**2).sum() - 0.5 * ((y - t) ** 2).sum()


def test_exact_posterior_draws_give_uniform_ranks():
    r = sbc_ranks(prior, simulate, exact_draws(), num_replications=300, num_draws=19, seed=1)
    assert set(r.ranks) == {"theta[0]", "theta[1]"}
    assert r.num_replications == 300 and r.num_draws == 19
    for rk in r.ranks.values():
        assert rk.dtype == torch.long and int(rk.min()) >= 0 and int(rk.max()) <= 19
    tests = sbc_uniformity(r, bins=10)
    for name, t in tests.items():
        assert t.df == 9 and sum(t.counts) == 300
        assert t.p_value > 0.01, (name, t)


@pytest.mark.parametrize("wrong", [dict(var_factor=0.5), dict(shift=0.3), dict(var_factor=2.0)])
def test_a_wrong_posterior_is_rejected(wrong):
    r = sbc_ranks(prior, simulate, exact_draws(**wrong), num_replications=300, num_draws=19, seed=1)
    for name, t in sbc_uniformity(r, bins=10).items():
        assert t.p_value < 0.01, (wrong, name, t)


def test_same_seed_same_ranks_and_quantities():
    q = lambda p: {"sum": p["theta"].sum(-1)}  # noqa: E731
    a = sbc_ranks(prior, simulate, exact_draws(), num_replications=20, num_draws=9, seed=4, quantities=q)
    b = sbc_ranks(prior, simulate, exact_draws(), num_replications=20, num_draws=9, seed=4, quantities=q)
    assert list(a.ranks) == ["sum"] and torch.equal(a.ranks["sum"], b.ranks["sum"])


def test_ties_are_broken_at_random():
    # every posterior draw equals the prior draw: the rank must still be uniform on 0..L
    def copies(y, num_draws, seed):
        return {"theta": y[:1].expand(num_draws, 2).clone()}

    r = sbc_ranks(
        prior, lambda p, g: p["theta"].unsqueeze(0), copies, num_replications=300, num_draws=9, seed=0
    )
    for t in sbc_uniformity(r, bins=5).values():
        assert t.p_value > 0.01


def test_sampler_draws_runs_a_bnnkit_sampler():
    init = {"theta": torch.zeros(2, dtype=DT)}
    mh = sampler_draws(bnnkit.RandomWalkMH(), log_density, num_warmup=50, thin=2, init=init)
    r = sbc_ranks(prior, simulate, mh, num_replications=3, num_draws=9, seed=0, compute_ess=True)
    assert r.ranks["theta[0]"].shape == (3,) and r.ess["theta[1]"].shape == (3,)
    # weighted draws are resampled to num_draws
    q = GaussianProposal(torch.zeros(2, dtype=DT), 1.0)
    imp = sampler_draws(ImportanceSampler(q), log_density, num_warmup=0, thin=20, init=init)
    d = imp(torch.zeros(N_OBS, 2, dtype=DT), 9, 0)
    assert d["theta"].shape == (9, 2)


def test_bad_input_raises_clear_errors():
    ok = dict(num_replications=2, num_draws=9, seed=0)
    with pytest.raises(BnnkitError, match="num_replications"):
        sbc_ranks(prior, simulate, exact_draws(), num_replications=0, num_draws=9)
    with pytest.raises(BnnkitError, match="posterior_draws must be a callable"):
        sbc_ranks(prior, simulate, None, **ok)
    with pytest.raises(BnnkitError, match="expected num_draws = 9"):
        sbc_ranks(prior, simulate, lambda y, n, s: {"theta": torch.zeros(n + 1, 2, dtype=DT)}, **ok)
    with pytest.raises(BnnkitError, match="non-empty dict"):
        sbc_ranks(lambda g: torch.zeros(2), simulate, exact_draws(), **ok)
    with pytest.raises(BnnkitError, match="expected 9"):
        sbc_ranks(prior, simulate, exact_draws(), quantities=lambda p: {"m": p["theta"].mean()}, **ok)
    ranks = {"a": torch.arange(20) % 10}
    with pytest.raises(BnnkitError, match="does not divide"):
        sbc_uniformity(ranks, num_draws=9, bins=3)
    with pytest.raises(BnnkitError, match="pass num_draws"):
        sbc_uniformity(ranks, bins=5)
    with pytest.raises(BnnkitError, match="integers in 0..9"):
        sbc_uniformity({"a": torch.arange(20)}, num_draws=9, bins=5)
    with pytest.raises(BnnkitError, match="sets"):
        sampler_draws(bnnkit.HMC(), log_density, num_warmup=0, thin=1, seed=3)


@pytest.mark.slow
def test_hmc_passes_sbc_on_the_normal_model():
    init = {"theta": torch.zeros(2, dtype=DT)}
    hmc = sampler_draws(bnnkit.HMC(num_steps=5), log_density, num_warmup=100, thin=2, init=init)
    r = sbc_ranks(prior, simulate, hmc, num_replications=100, num_draws=19, seed=0)
    for t in sbc_uniformity(r, bins=10).values():
        assert t.p_value > 0.01
