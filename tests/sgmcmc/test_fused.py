"""The fused multi-step SG-MCMC loop (bnnkit.sgmcmc.fused).

Default run: the block code run step by step (``loop="eager"``) gives bnnkit.sample's draws for
the same seed (same random numbers, float64 rounding), and its stationary moments on a Gaussian
target match the exact ones of the discretised dynamics.  Slow: the same with the compiled scan.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import bnnkit
from bnnkit.bench.models import mlp
from bnnkit.core.driver import _initial_position
from bnnkit.core.errors import BnnkitError, DivergenceError
from bnnkit.core.random import make_generator
from bnnkit.core.target import as_target
from bnnkit.data import Minibatches
from bnnkit.sgmcmc import SGHMC, SGLD, CyclicalSGHMC, CyclicalSGLD, Fused, PreconditionedSGLD, run_fused

ALGORITHMS = {
    "sgld": SGLD(1e-3),
    "sghmc": SGHMC(1e-2, friction=5.0),
    "csgld": CyclicalSGLD(1e-3, cycle_length=10),
    "csghmc": CyclicalSGHMC(1e-2, cycle_length=12, friction=5.0),
}


def _problem():
    g = torch.Generator().manual_seed(0)
    n = 100  # 100 = 6 * 16 + 4: every epoch ends with a short batch (a second shape in a block)
    X = torch.randn(n, 3, generator=g, dtype=torch.float64)
    y = torch.randn(n, generator=g, dtype=torch.float64)
    torch.manual_seed(0)  # the module's initial weights (not used: init is a prior draw)
    post = bnnkit.Posterior(mlp(3, 8).double(), bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0), num_data=n)
    return post, X, y


def _compare(alg, loop: str, block: int) -> None:
    post, X, y = _problem()
    kw = dict(num_samples=7, thin=3, num_warmup=5)
    ref = bnnkit.sample(alg, post, Minibatches(X, y, batch_size=16), progress=False, seed=3, **kw)
    gen = make_generator(3, 0)
    x0 = _initial_position(post.target(), post, "prior", 0, gen)  # as the driver draws it
    out = run_fused(
        alg, post, Minibatches(X, y, batch_size=16), generator=gen, init=x0, block=block, loop=loop, **kw
    )
    torch.testing.assert_close(out.positions, ref.positions[0], rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(out.stats["log_density"], ref.stats["log_density"][0], rtol=1e-10, atol=1e-8)
    torch.testing.assert_close(out.stats["step_size"], ref.stats["step_size"][0])


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
@pytest.mark.parametrize("block", [1, 8])
def test_eager_block_equals_step_at_a_time(name, block):
    _compare(ALGORITHMS[name], "eager", block)


def test_continue_from_state_equals_one_run():
    post, X, y = _problem()
    gen = make_generator(5, 0)
    x0 = post.initial_position("prior", gen)
    g1 = torch.Generator().set_state(gen.get_state())
    alg = SGHMC(1e-2, friction=5.0)
    whole = run_fused(
        alg, post, Minibatches(X, y, batch_size=16), num_samples=6, generator=g1, init=x0, loop="eager"
    )
    stream = Minibatches(X, y, batch_size=16)
    g2 = torch.Generator().set_state(gen.get_state())
    first = run_fused(alg, post, stream, num_samples=2, generator=g2, init=x0, block=5, loop="eager")
    rest = run_fused(
        alg, post, stream, num_samples=6, generator=g2, init=x0, block=3, loop="eager", state=first.state
    )
    torch.testing.assert_close(torch.cat([first.positions, rest.positions]), whole.positions, rtol=0, atol=0)


def test_leaves_the_global_rng_alone():
    post, X, y = _problem()
    before = torch.get_rng_state()
    gen = torch.Generator().manual_seed(1)
    run_fused(
        SGLD(1e-3),
        post,
        Minibatches(X, y, batch_size=16),
        num_samples=3,
        generator=gen,
        init=post.initial_position("prior", gen),
        loop="eager",
    )
    assert torch.equal(torch.get_rng_state(), before)


def test_unsupported_algorithms_are_refused():
    with pytest.raises(BnnkitError, match="SGLD, SGHMC .* not NUTS"):
        Fused(bnnkit.NUTS())
    with pytest.raises(BnnkitError, match="correction=True"):
        Fused(PreconditionedSGLD(1e-3, correction=True))
    with pytest.raises(BnnkitError, match="online"):
        Fused(SGHMC(1e-3, noise_estimate="online"))
    with pytest.raises(BnnkitError, match="resample_momentum_every"):
        Fused(SGHMC(1e-3, resample_momentum_every=10))
    with pytest.raises(BnnkitError, match="block"):
        Fused(SGLD(1e-3), block=0)
    with pytest.raises(BnnkitError, match="loop"):
        Fused(SGLD(1e-3), loop="jit")


# ------------------------------------------------------------------ conjugate Gaussian target
P = 51.0  # posterior precision of the mean of 50 unit-variance observations under a N(0, 1) prior


def _gaussian_target():
    y = torch.linspace(-1.0, 2.0, 50, dtype=torch.float64)[:, None] * torch.tensor(
        [1.0, -0.5], dtype=torch.float64
    )

    def log_density(params, batch):
        mu = params["mu"]
        return -0.5 * ((batch - mu) ** 2).sum() - 0.5 * (mu**2).sum()

    target = as_target(log_density, {"mu": torch.zeros(2, dtype=torch.float64)})
    return target, y, y.sum(0) / P  # exact posterior mean


def _stationary_variance(A: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """Solve S = A S A^T + Q (the discretised linear dynamics' stationary covariance)."""
    S = Q.copy()
    for _ in range(20000):
        S = A @ S @ A.T + Q
    return S


def _moments_check(alg, loop: str, num_samples: int, thin: int, exact_var: float) -> None:
    target, y, mean = _gaussian_target()
    gen = torch.Generator().manual_seed(11)
    out = run_fused(
        alg,
        target,
        y,
        num_samples=num_samples,
        thin=thin,
        num_warmup=200,
        generator=gen,
        init=torch.zeros(2, dtype=torch.float64),
        block=50,
        loop=loop,
    )
    draws = out.positions
    # Thinned draws of these fast-mixing chains are close to independent; 5 standard errors.
    se_mean = (exact_var / num_samples) ** 0.5
    assert torch.all((draws.mean(0) - mean).abs() < 5 * se_mean), (draws.mean(0), mean)
    rel = draws.var(0) / exact_var
    assert torch.all((rel - 1).abs() < 5 * (2 / num_samples) ** 0.5), rel


# the fused block equals bnnkit.sample draw for draw (fast tests above); the moment checks run with the slow tests
@pytest.mark.slow
def test_sgld_conjugate_gaussian_moments():
    eps = 0.01  # x' = (1 - eps P / 2) x + eps b / 2 + sqrt(eps) xi
    a = 1 - eps * P / 2
    _moments_check(SGLD(eps), "eager", 2000, 5, eps / (1 - a * a))


def _sghmc_exact_var(eps: float, c: float) -> float:
    # z = (x, r): r' = (1 - eps C) r - eps P x + s xi ; x' = x + eps r'
    s2 = 2 * eps * c
    A_r = np.array([[-eps * P, 1 - eps * c]])
    A = np.vstack([np.array([[1.0, 0.0]]) + eps * A_r, A_r])
    Q = s2 * np.array([[eps * eps, eps], [eps, 1.0]])
    return float(_stationary_variance(A, Q)[0, 0])


# as above
@pytest.mark.slow
def test_sghmc_conjugate_gaussian_moments():
    eps, c = 0.02, 14.0
    _moments_check(SGHMC(eps, friction=c), "eager", 2000, 10, _sghmc_exact_var(eps, c))


def _diverging_run(loop: str, thin: int = 1) -> DivergenceError:
    """The error of an SGLD run whose step (1.0) is too large for the Gaussian target."""
    target, y, _ = _gaussian_target()
    gen = torch.Generator().manual_seed(0)
    init = torch.zeros(2, dtype=torch.float64)
    with pytest.raises(DivergenceError) as err:
        run_fused(
            SGLD(1.0), target, y, num_samples=1000, thin=thin, generator=gen, init=init, block=64, loop=loop
        )
    return err.value


def test_divergence_raises_with_the_finite_draws():
    err = _diverging_run("eager")
    ((positions, stats),) = err.partial.values()
    assert 0 < err.step < 1000 and len(positions) == err.step
    assert torch.isfinite(positions).all() and torch.isfinite(stats["log_density"]).all()


# ------------------------------------------------------------------ compiled (slow)
@pytest.mark.slow
@pytest.mark.parametrize("name", ["sgld", "sghmc", "csgld"])
def test_compiled_scan_equals_step_at_a_time(name):
    torch._dynamo.reset()
    _compare(ALGORITHMS[name], "scan", 8)


@pytest.mark.slow
def test_compiled_sparse_blocks_find_the_divergence_the_eager_loop_finds():
    """A block that keeps at most two draws runs the scan that returns sum(w') per step
    (FusedKernel._run_sparse); at a non-finite step it runs the block again with every position
    and reports the same step and kept draws as the eager loop."""
    torch._dynamo.reset()
    errors = [_diverging_run(loop, thin=40) for loop in ("eager", "scan")]
    assert errors[0].step == errors[1].step
    (p0, _), (p1, _) = errors[0].partial[0], errors[1].partial[0]
    torch.testing.assert_close(p1, p0, rtol=1e-12, atol=1e-12)


@pytest.mark.slow
def test_compiled_scan_conjugate_gaussian():
    torch._dynamo.reset()
    eps = 0.01
    a = 1 - eps * P / 2
    _moments_check(SGLD(eps), "scan", 2000, 5, eps / (1 - a * a))


@pytest.mark.slow
def test_new_settings_past_the_recompile_limit_start_the_cache_afresh(monkeypatch):
    """Every kernel shares one compiled function; a process that builds more settings than
    dynamo's limit of graphs per function (a sweep over frictions) still runs."""
    torch._dynamo.reset()
    resets = []
    reset_code = torch._dynamo.reset_code
    monkeypatch.setattr(torch._dynamo, "reset_code", lambda code: (resets.append(code), reset_code(code)))
    post, X, y = _problem()
    x0 = post.initial_position("prior", torch.Generator().manual_seed(0))
    with torch._dynamo.config.patch(recompile_limit=2):
        for friction in (2.0, 3.0, 4.0, 5.0):
            kernel = Fused(SGHMC(1e-2, friction=friction), block=4).build(post)
            gen = torch.Generator().manual_seed(1)
            stream = Minibatches(X, y, batch_size=16)
            state = kernel.init(x0, stream.next(gen))
            out = kernel.run_block(state, stream, gen, 4, keep=range(4))
            assert out.num_finite == 4 and out.positions.shape == (4, x0.numel())
    assert resets  # the limit was reached, and the cache started afresh
