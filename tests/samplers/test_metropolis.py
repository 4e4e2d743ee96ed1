import importlib.util
from pathlib import Path

import pytest
import torch

import bnnkit
from bnnkit.samplers import MetropolisHastings
from bnnkit.samplers.metropolis import GaussianRandomWalk
from tests.helpers import linear_problem

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "markov_chain_3state.py"


def _example():
    spec = importlib.util.spec_from_file_location("markov_chain_3state", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_seed_transition_matrix_has_the_stated_equilibrium():
    ex = _example()
    assert torch.allclose(ex.T @ ex.P_STAR, ex.P_STAR)
    cols = ex.power_iteration(60)
    assert torch.allclose(cols, ex.P_STAR[:, None].expand(3, 3), atol=1e-10)


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_mh_on_the_three_state_chain_recovers_p_star():
    ex = _example()
    freq = ex.mh_frequencies(num_samples=20000, seed=1)
    # the MH chain for p* mixes fast; binomial standard error inflated x2 for autocorrelation
    se = 2 * (ex.P_STAR * (1 - ex.P_STAR) / 40000).sqrt()
    assert ((freq - ex.P_STAR).abs() < 4 * se).all(), freq


def test_mh_same_seed_same_chain():
    prob = linear_problem(n=30, d=2)
    algo = MetropolisHastings(GaussianRandomWalk(0.1))
    a = bnnkit.sample(algo, prob.posterior(), (prob.X, prob.y), num_samples=50, seed=3, progress=False)
    b = bnnkit.sample(algo, prob.posterior(), (prob.X, prob.y), num_samples=50, seed=3, progress=False)
    assert torch.equal(a.positions, b.positions)
