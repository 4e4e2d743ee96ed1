import pytest
import torch
from scipy import stats as sps

import bnnkit
from bnnkit.core.errors import BnnkitError
from bnnkit.diagnostics import ess
from bnnkit.samplers import MetropolisWithinGibbs
from tests.helpers import linear_problem

PROB = linear_problem(n=30, d=2)
DATA = (PROB.X, PROB.y)


def test_layer_blocks_on_a_network():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1)).double()
    post = bnnkit.Posterior(net, bnnkit.Gaussian(0.5), bnnkit.GaussianPrior(1.0))
    s = bnnkit.sample(
        MetropolisWithinGibbs(blocks=["0.", "2."]),
        post,
        DATA,
        num_samples=50,
        num_warmup=50,
        seed=0,
        progress=False,
    )
    assert s.positions.shape == (1, 50, post.view.size) and torch.isfinite(s.positions).all()


def _gamma_check(draws, shape, rate):
    tau = draws.reshape(-1)
    n_eff = float(ess(tau.reshape(1, -1)).item())
    mean, var = shape / rate, shape / rate**2
    assert abs(float(tau.mean()) - mean) < 4 * (var / n_eff) ** 0.5
    assert abs(float(tau.var()) / var - 1) < 4 * (2 / n_eff) ** 0.5 + 0.02
    # the draws of a pure conjugate-Gibbs chain are independent: a KS test applies
    assert sps.kstest(tau.numpy(), sps.gamma(shape, scale=1 / rate).cdf).pvalue > 1e-3


def test_gibbs_on_noise_precision_matches_its_gamma_posterior():
    a, b = 2.0, 1.0
    post = bnnkit.Posterior(
        PROB.module, bnnkit.Gaussian(0.5, learn_noise=True, precision_prior=(a, b)), bnnkit.GaussianPrior(1.0)
    )
    w = torch.tensor([[-0.8, 0.7]], dtype=torch.float64)  # weights held fixed: only the precision block moves
    init = {"weight": w, "likelihood.log_precision": torch.zeros(1, dtype=torch.float64)}
    s = bnnkit.sample(
        MetropolisWithinGibbs(blocks=["likelihood.log_precision"]),
        post,
        DATA,
        init=init,
        num_samples=4000,
        seed=0,
        progress=False,
    )
    assert torch.equal(s.params["weight"][0, -1], w)
    ssr = float(((PROB.y - PROB.X @ w[0]) ** 2).sum())
    _gamma_check(s.params["likelihood.log_precision"].exp(), a + len(PROB.y) / 2, b + ssr / 2)


def test_gibbs_on_prior_precision_matches_its_gamma_posterior():
    a, b = 3.0, 2.0
    post = bnnkit.Posterior(
        PROB.module,
        bnnkit.Gaussian(0.5),
        bnnkit.GaussianPrior(1.0, learn_precision=True, precision_prior=(a, b)),
    )
    w = torch.tensor([[1.5, -2.0]], dtype=torch.float64)
    init = {"weight": w, "prior.log_precision": torch.zeros(1, dtype=torch.float64)}
    s = bnnkit.sample(
        MetropolisWithinGibbs(blocks=["prior.log_precision"]),
        post,
        DATA,
        init=init,
        num_samples=4000,
        seed=0,
        progress=False,
    )
    _gamma_check(s.params["prior.log_precision"].exp(), a + 1.0, b + 0.5 * float((w**2).sum()))


# covered fast by test_gibbs_on_noise_precision_matches_its_gamma_posterior and
# test_gibbs_on_prior_precision_matches_its_gamma_posterior (each hyperparameter's exact conditional)
@pytest.mark.slow
def test_joint_gibbs_with_hyperparameters_agrees_with_nuts():
    post = bnnkit.Posterior(
        PROB.module,
        bnnkit.Gaussian(0.5, learn_noise=True, precision_prior=(2.0, 0.5)),
        bnnkit.GaussianPrior(1.0, learn_precision=True, precision_prior=(2.0, 2.0)),
    )
    init = {
        "weight": torch.zeros(1, 2, dtype=torch.float64),
        "likelihood.log_precision": torch.zeros(1, dtype=torch.float64),
        "prior.log_precision": torch.zeros(1, dtype=torch.float64),
    }
    g = bnnkit.sample(
        MetropolisWithinGibbs(blocks=["weight", "likelihood.log_precision", "prior.log_precision"]),
        post,
        DATA,
        init=init,
        num_samples=3000,
        num_warmup=500,
        num_chains=2,
        seed=0,
        progress=False,
    )
    n = bnnkit.sample(
        bnnkit.NUTS(),
        post,
        DATA,
        init=init,
        num_samples=1000,
        num_warmup=500,
        num_chains=2,
        seed=0,
        progress=False,
    )
    eg, en = torch.as_tensor(ess(g.positions)), torch.as_tensor(ess(n.positions))
    mg, mn = g.flat().mean(0), n.flat().mean(0)
    sd = n.flat().std(0)
    assert ((mg - mn).abs() < 4 * sd * (1 / eg + 1 / en).sqrt()).all(), (mg, mn)


def test_unknown_block_is_a_clear_error():
    with pytest.raises(BnnkitError, match="matches no parameter"):
        bnnkit.sample(
            MetropolisWithinGibbs(blocks=["3."]), PROB.posterior(), DATA, num_samples=1, progress=False
        )
    with pytest.raises(BnnkitError, match="outside the flat vector"):
        bnnkit.sample(
            MetropolisWithinGibbs(blocks=[[5]]), PROB.posterior(), DATA, num_samples=1, progress=False
        )
