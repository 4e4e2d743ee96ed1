"""bnnkit.decisions.agents: Thompson sampling checked against a posterior known in closed form.

A linear reward model ``f(x, a) = w . [x, e_a]`` with a N(0, 1) prior and Gaussian noise of known
sd has a Gaussian posterior; Thompson sampling picks action 0 with probability
``P(f(x, 0) > f(x, 1)) = Phi(m / s)``, ``m, s`` the mean and sd of ``w_2 - w_3`` (the two action
weights; the context's weight cancels).
"""

import math

import pytest
import torch

from bnnkit.core.errors import BnnkitError
from bnnkit.core.posterior import Posterior
from bnnkit.decisions import ChainAgent, GreedyAgent, ReplayBuffer, VariationalAgent, action_inputs
from bnnkit.likelihoods import Gaussian
from bnnkit.priors import GaussianPrior
from bnnkit.sgmcmc import SGLD

NOISE = 1.0


def _problem(n: int = 6):
    g = torch.Generator().manual_seed(1)
    buf = ReplayBuffer(64, 3)
    for i in range(n):
        x = torch.randn(1, generator=g)
        a = i % 2
        reward = 0.8 * float(x) + (1.5 if a == 0 else 0.0) + NOISE * float(torch.randn((), generator=g))
        buf.add(action_inputs(x[None], 2)[a], reward)
    return buf


def _exact_prob_action0(buf: ReplayBuffer) -> float:
    x, y = buf.data()
    x, y = x.double(), y.double()
    prec = torch.eye(3, dtype=torch.float64) + x.T @ x / NOISE**2
    cov = torch.linalg.inv(prec)
    mean = cov @ x.T @ y / NOISE**2
    d = torch.tensor([0.0, 1.0, -1.0], dtype=torch.float64)
    m, s = float(d @ mean), float((d @ cov @ d).sqrt())
    return 0.5 * (1 + math.erf(m / s / math.sqrt(2)))


def _linear_posterior():
    torch.manual_seed(0)
    net = torch.nn.Linear(3, 1, bias=False)
    return net, Posterior(net, Gaussian(NOISE), GaussianPrior(1.0), num_data=1)


def test_chain_agent_acts_as_often_as_the_exact_posterior_says():
    buf = _problem()
    exact = _exact_prob_action0(buf)
    _, post = _linear_posterior()
    # full-batch draws (with replacement) of the 6 rows: SGLD at a small step samples the posterior
    agent = ChainAgent(post, SGLD(2e-2), updates=1, batch_size=64)
    gen = torch.Generator().manual_seed(0)
    ctx = torch.tensor([0.3])
    picks = []
    for t in range(10_000):
        agent.update(buf, gen)
        if t >= 500 and t % 5 == 0:
            picks.append(agent.act(ctx, gen) == 0)
    freq = sum(picks) / len(picks)
    # 1900 autocorrelated picks; seeds 0-3 gave 0.855-0.872
    # exact is 0.86: acting on the wrong action (0.14) or on a chain that does not mix fails
    assert 0.8 < exact < 0.9 and freq == pytest.approx(exact, abs=0.04)
    assert agent.posterior.num_data == buf.size and agent.finite()


def test_variational_agent_draws_fresh_weights_for_each_decision_and_learns():
    buf = _problem(16)
    _, post = _linear_posterior()
    agent = VariationalAgent(post, lr=3e-2, updates=50, batch_size=16, init_sigma=0.3)
    gen = torch.Generator().manual_seed(0)
    start = agent.q.mu.detach().clone()
    agent.update(buf, gen)
    assert not torch.equal(agent.q.mu, start) and agent.finite()
    acts = {agent.act(torch.tensor([0.0]), gen) for _ in range(200)}
    assert acts == {0, 1}  # q is wide after 16 rows: both actions are drawn


def test_greedy_agent_explores_at_rate_epsilon_and_otherwise_takes_the_best_action():
    net = torch.nn.Linear(3, 1, bias=False)
    with torch.no_grad():
        net.weight.copy_(torch.tensor([[0.0, 1.0, 0.0]]))  # action 0 pays more
    gen = torch.Generator().manual_seed(0)
    greedy = GreedyAgent(net, epsilon=0.0)
    assert all(greedy.act(torch.tensor([1.0]), gen) == 0 for _ in range(50))
    explorer = GreedyAgent(net, epsilon=0.5)
    freq1 = sum(explorer.act(torch.tensor([1.0]), gen) for _ in range(4000)) / 4000
    assert freq1 == pytest.approx(0.25, abs=0.025)  # half explore, half of those pick action 1


def test_chain_agent_takes_an_algorithm_or_a_function_of_the_buffer_size():
    _, post = _linear_posterior()
    fixed = ChainAgent(post, SGLD(1e-3))
    assert fixed.algorithm(7).step_size(0) == pytest.approx(1e-3)
    scaled = ChainAgent(post, lambda n: SGLD(1e-2 / n))
    assert scaled.algorithm(10).step_size(0) == pytest.approx(1e-3)
    with pytest.raises(BnnkitError, match="algorithm must be an SG-MCMC algorithm"):
        ChainAgent(post, 1e-3)
