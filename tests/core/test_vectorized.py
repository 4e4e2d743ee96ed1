"""Vectorised chains (``chain_method="vectorized"``): K chains as one batched computation.

Checked against the conjugate Bayesian linear regression posterior (exact mean and covariance),
against per-chain sequential gradients (exactly), and for reproducibility, resume and refusals.
"""

import pytest
import torch

import bnnkit
from bnnkit.core.errors import BnnkitError
from bnnkit.data import LoaderStream, Minibatches
from tests.helpers import Interrupted, assert_gaussian_matches, linear_problem, sg_errors

PROB = linear_problem(n=100, d=2, sigma=0.5)
VEC = dict(chain_method="vectorized", progress=False)


def stream(batch_size=10):
    return Minibatches(PROB.X, PROB.y, batch_size=batch_size)


def test_vectorized_hmc_matches_the_exact_posterior():
    s = bnnkit.sample(
        bnnkit.HMC(num_steps=5), PROB.posterior(), (PROB.X, PROB.y),
        num_samples=400, num_warmup=200, num_chains=8, seed=3, **VEC,
    )  # fmt: skip
    assert s.positions.shape == (8, 400, 2)
    assert s.stats["accept_prob"].shape == (8, 400)
    # each chain adapts its own step size
    assert s.stats["step_size"][:, -1].unique().numel() == 8
    assert_gaussian_matches(s.positions, PROB.mean, PROB.cov)


def test_vectorized_sgld_error_is_that_of_sequential_sgld():
    """Same step size, same number of draws in all: the discretisation + MC error is alike."""
    kw = dict(num_warmup=300, seed=1)
    vec = bnnkit.sample(
        bnnkit.SGLD(2e-4), PROB.posterior(num_data=100), stream(), num_samples=750, num_chains=4, **kw, **VEC
    )
    z, rel = sg_errors(vec.positions, PROB.mean, PROB.cov)
    # tests/sgmcmc/test_sgld.py: one sequential chain of 3000 draws reaches < 0.3 sd, < 25%
    assert z < 0.3 and rel < 0.25, (z, rel)


def test_vectorized_gradient_equals_each_chains_own_gradient():
    post = PROB.posterior(num_data=100)
    target = post.target()
    x = torch.randn(5, 2, dtype=torch.float64)
    batches = stream().tensors[0][:50].reshape(5, 10, 2), PROB.y[:50].reshape(5, 10)
    lp, g = target.vectorized(chain_batched=True).value_and_grad(x, batches)
    lp_shared, g_shared = target.vectorized(chain_batched=False).value_and_grad(x, (PROB.X, PROB.y))
    for k in range(5):
        lp_k, g_k = target.value_and_grad(x[k], (batches[0][k], batches[1][k]))
        torch.testing.assert_close(lp[k], lp_k)
        torch.testing.assert_close(g[k], g_k)
        lp_k, g_k = target.value_and_grad(x[k], (PROB.X, PROB.y))
        torch.testing.assert_close(lp_shared[k], lp_k)
        torch.testing.assert_close(g_shared[k], g_k)


def test_chain_minibatches_give_each_chain_its_own_epochs():
    from bnnkit.data.minibatch import ChainMinibatches

    cm = ChainMinibatches(Minibatches(PROB.X, PROB.y, batch_size=25), 3)
    gen = torch.Generator().manual_seed(0)
    xs = [cm.next(gen)[0] for _ in range(4)]  # one epoch
    assert xs[0].shape == (3, 25, 2)
    for k in range(3):  # every row exactly once per chain and epoch
        rows = torch.cat([x[k] for x in xs])
        assert torch.equal(rows[torch.argsort(rows[:, 0])], PROB.X[torch.argsort(PROB.X[:, 0])])
    assert not torch.equal(xs[0][0], xs[0][1])


def test_same_seed_same_chains_and_initial_positions_of_the_sequential_run():
    run = dict(num_samples=20, num_chains=3, seed=7)
    a = bnnkit.sample(bnnkit.SGHMC(1e-2), PROB.posterior(num_data=100), stream(), **run, **VEC)
    b = bnnkit.sample(bnnkit.SGHMC(1e-2), PROB.posterior(num_data=100), stream(), **run, **VEC)
    assert torch.equal(a.positions, b.positions)
    from bnnkit.core.random import make_generator

    post = PROB.posterior(num_data=100)
    one = bnnkit.sample(bnnkit.SGLD(1e-12), post, stream(), num_samples=1, num_chains=3, seed=7, **VEC)
    for c in range(3):  # chain c starts from the prior draw of its own generator, as sequentially
        x0 = post.initial_position("prior", make_generator(7, c))
        assert torch.allclose(one.positions[c, 0], x0, atol=1e-5)


def test_subset_of_chains_equals_those_chains_of_the_full_run():
    full = bnnkit.sample(bnnkit.HMC(num_steps=3), PROB.posterior(), (PROB.X, PROB.y),
                         num_samples=10, num_chains=4, seed=2, progress=False)  # fmt: skip
    part = bnnkit.sample(bnnkit.HMC(num_steps=3), PROB.posterior(), (PROB.X, PROB.y),
                         num_samples=10, num_chains=4, seed=2, progress=False, chains=[1, 3])  # fmt: skip
    assert torch.equal(part.positions, full.positions[[1, 3]])
    with pytest.raises(BnnkitError, match="distinct chain indices"):
        bnnkit.sample(
            bnnkit.HMC(), PROB.posterior(), (PROB.X, PROB.y), num_chains=2, chains=[2], progress=False
        )


@pytest.mark.parametrize("stop_after", [13, 47])
def test_interrupted_vectorized_run_resumes_bit_identical(tmp_path, stop_after):
    run = dict(num_samples=30, num_warmup=20, thin=2, num_chains=3, seed=5, chunk_size=10, **VEC)
    post = PROB.posterior()
    ref = bnnkit.sample(bnnkit.HMC(num_steps=3), post, (PROB.X, PROB.y), **run)
    out = str(tmp_path / "run")
    with pytest.raises(KeyboardInterrupt):
        bnnkit.sample(
            Interrupted(bnnkit.HMC(num_steps=3), stop_after), post, (PROB.X, PROB.y), output=out, **run
        )
    resumed = bnnkit.sample(bnnkit.HMC(num_steps=3), post, (PROB.X, PROB.y), output=out, **run)
    assert torch.equal(resumed.positions, ref.positions)
    assert torch.equal(resumed.stats["accept_prob"], ref.stats["accept_prob"])


def test_compiled_vectorized_steps_agree_with_eager():
    kw = dict(num_samples=5, num_chains=4, seed=0, **VEC)
    eager = bnnkit.sample(bnnkit.SGLD(1e-3), PROB.posterior(num_data=100), stream(), **kw)
    comp = bnnkit.sample(bnnkit.SGLD(1e-3), PROB.posterior(num_data=100), stream(), compile=True, **kw)
    torch.testing.assert_close(comp.positions, eager.positions, rtol=1e-6, atol=1e-8)


def test_functional_sghmc_runs_vectorized_with_the_per_chain_gradient():
    from bnnkit.functional import FSGHMC, FunctionalPosterior, GPPrior, MeasurementPoints

    torch.manual_seed(0)
    X = torch.linspace(-2, 2, 40).unsqueeze(-1)
    y = torch.sin(2 * X[:, 0])
    net = torch.nn.Sequential(torch.nn.Linear(1, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    gp = GPPrior("rbf", input_dim=1, jitter=1e-3, lengthscale=0.5, outputscale=1.0)
    fp = FunctionalPosterior(net, bnnkit.Gaussian(0.1), gp, MeasurementPoints(8, 8), X)
    target = fp.target()
    x = torch.stack([fp.initial_position("module") + 0.1 * k for k in range(3)])
    batch = (X[:10], y[:10])
    lp, g = target.vectorized_stochastic_grad(x, batch, torch.Generator().manual_seed(5), False)
    for k in range(3):  # the same measurement points: the same generator state
        lp_k, g_k = target.stochastic_grad(x[k], batch, torch.Generator().manual_seed(5))
        torch.testing.assert_close(lp[k], lp_k, rtol=1e-5, atol=1e-3)
        torch.testing.assert_close(g[k], g_k, rtol=1e-4, atol=1e-3)
    s = bnnkit.sample(FSGHMC(step_size=1e-3), fp, Minibatches(X, y, batch_size=10), init="module",
                      num_samples=20, num_warmup=20, num_chains=3, **VEC)  # fmt: skip
    assert s.positions.shape == (3, 20, fp.view.size) and bool(torch.isfinite(s.positions).all())


def test_algorithms_that_cannot_vectorize_say_so():
    post, data = PROB.posterior(), (PROB.X, PROB.y)
    with pytest.raises(BnnkitError, match="NUTS cannot run its chains vectorised.*sequential"):
        bnnkit.sample(bnnkit.NUTS(), post, data, num_chains=2, **VEC)
    with pytest.raises(BnnkitError, match="online.*sequential"):
        bnnkit.sample(bnnkit.SGHMC(1e-3, noise_estimate="online"), PROB.posterior(num_data=100), stream(),
                      num_chains=2, **VEC)  # fmt: skip
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(PROB.X, PROB.y), batch_size=10)
    with pytest.raises(BnnkitError, match="DataLoader"):
        bnnkit.sample(
            bnnkit.SGLD(1e-3), PROB.posterior(num_data=100), LoaderStream(loader), num_chains=2, **VEC
        )
    with pytest.raises(BnnkitError, match="chain_method must be"):
        bnnkit.sample(bnnkit.HMC(), post, data, chain_method="parallel", progress=False)
