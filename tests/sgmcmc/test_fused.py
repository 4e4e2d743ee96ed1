"""The fused multi-step SG-MCMC loop (bnnkit.sgmcmc.fused), run through ``bnnkit.sample(..., fused=...)``.

Default run: the block code run step by step (``DEFAULT_LOOP = "eager"``) gives the step-at-a-time
draws for the same seed (same random numbers, float64 rounding), the same draws bit for bit
whatever the block length, and the same draws when a streamed run is interrupted and resumed.
Slow: the same with the compiled scan, and the stationary moments on a Gaussian target against
the exact ones of the discretised dynamics.  The driver's own block logic (cuts, chunks,
vectorised chains, ``stop_when``) is tested in ``tests/core/test_driver_fused.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import bnnkit
import bnnkit.sgmcmc.fused as fused_module
from bnnkit.core.errors import BnnkitError, DivergenceError
from bnnkit.core.target import as_target
from bnnkit.data import Minibatches
from bnnkit.nets import mlp
from bnnkit.sgmcmc import SGHMC, SGLD, CyclicalSGHMC, CyclicalSGLD, Fused, PreconditionedSGLD

ALGORITHMS = {
    "sgld": SGLD(1e-3),
    "sghmc": SGHMC(1e-2, friction=5.0),
    "csgld": CyclicalSGLD(1e-3, cycle_length=10),
    "csghmc": CyclicalSGHMC(1e-2, cycle_length=12, friction=5.0),
}
RUN = dict(num_samples=7, thin=3, num_warmup=5, seed=3, progress=False)


@pytest.fixture
def eager(monkeypatch):
    """``bnnkit.sample(..., fused=...)`` builds the block code run step by step (no compile)."""
    monkeypatch.setattr(fused_module, "DEFAULT_LOOP", "eager")


def _problem():
    g = torch.Generator().manual_seed(0)
    n = 100  # 100 = 6 * 16 + 4: every epoch ends with a short batch (a second shape in a block)
    X = torch.randn(n, 3, generator=g, dtype=torch.float64)
    y = torch.randn(n, generator=g, dtype=torch.float64)
    torch.manual_seed(0)  # the module's initial weights (not used: init is a prior draw)
    post = bnnkit.Posterior(mlp(3, 8).double(), bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0), num_data=n)
    return post, X, y


def _compare(alg, block: int) -> None:
    """``fused=block`` against the step-at-a-time run of the same seed."""
    post, X, y = _problem()
    ref = bnnkit.sample(alg, post, Minibatches(X, y, batch_size=16), **RUN)
    out = bnnkit.sample(alg, post, Minibatches(X, y, batch_size=16), fused=block, **RUN)
    assert out.positions.shape == ref.positions.shape == (1, 7, post.target().view.size)
    torch.testing.assert_close(out.positions, ref.positions, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(out.stats["log_density"], ref.stats["log_density"], rtol=1e-10, atol=1e-8)
    torch.testing.assert_close(out.stats["step_size"], ref.stats["step_size"])


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
@pytest.mark.parametrize("block", [1, 8])
def test_eager_block_equals_step_at_a_time(eager, name, block):
    _compare(ALGORITHMS[name], block)


def _assert_identical(a, b) -> None:
    torch.testing.assert_close(a.positions, b.positions, rtol=0, atol=0)
    assert sorted(a.stats) == sorted(b.stats)
    for k in a.stats:
        torch.testing.assert_close(a.stats[k], b.stats[k], rtol=0, atol=0, msg=k)


@pytest.mark.parametrize("name", ["sghmc", "csgld"])
def test_block_length_does_not_change_the_draws(eager, name):
    """Blocks of 1, 4 or 64 steps draw the same random numbers in the same order: the same chain
    bit for bit (a cyclical schedule's exploration stages cross the block boundaries)."""
    post, X, y = _problem()
    runs = [
        bnnkit.sample(ALGORITHMS[name], post, Minibatches(X, y, batch_size=16), fused=block, **RUN)
        for block in (1, 4, 64)
    ]
    for other in runs[1:]:
        _assert_identical(other, runs[0])
        torch.testing.assert_close(
            other.final_states[0].position, runs[0].final_states[0].position, rtol=0, atol=0
        )


@pytest.mark.parametrize("stop_after, resume_at", [(1, 2), (4, 11)])
def test_split_run_equals_one_run(eager, monkeypatch, tmp_path, stop_after, resume_at):
    """A streamed fused run stopped after ``stop_after`` blocks and resumed (the same call again)
    continues from its last checkpoint and gives the unsplit run's draws bit for bit.

    A run directory holds its ``num_samples``, so a run is split by an interruption, not by asking
    for more draws.  Blocks (chunks of 2 draws, thin 2, 3 warm-up steps): [0, 2) [2, 3) of warm-up,
    each ending at a checkpoint, then [3, 7) [7, 11) [11, 15), each completing a chunk.
    """
    post, X, y = _problem()
    alg = SGHMC(1e-2, friction=5.0)
    run = dict(num_samples=6, thin=2, num_warmup=3, chunk_size=2, seed=5, progress=False, fused=5)
    whole = bnnkit.sample(alg, post, Minibatches(X, y, batch_size=16), **run)
    run_block = fused_module.FusedKernel.run_block
    starts: list[int] = []
    limit = {"calls": stop_after}

    def interrupted(self, state, *args, **kwargs):
        if len(starts) == limit["calls"]:
            raise KeyboardInterrupt
        starts.append(int(state.iteration))
        return run_block(self, state, *args, **kwargs)

    monkeypatch.setattr(fused_module.FusedKernel, "run_block", interrupted)
    out = str(tmp_path / "run")
    with pytest.raises(KeyboardInterrupt):
        bnnkit.sample(alg, post, Minibatches(X, y, batch_size=16), output=out, **run)
    assert starts == [0, 2, 3, 7][:stop_after]
    starts.clear()
    limit["calls"] = -1  # no more interruptions
    resumed = bnnkit.sample(alg, post, Minibatches(X, y, batch_size=16), output=out, **run)
    assert starts[0] == resume_at  # from the last checkpoint, not afresh
    _assert_identical(resumed, whole)


def test_leaves_the_global_rng_alone(eager):
    post, X, y = _problem()
    before = torch.get_rng_state()
    bnnkit.sample(SGLD(1e-3), post, Minibatches(X, y, batch_size=16), num_samples=3, fused=4, progress=False)
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


def test_sample_refuses_the_options_not_fused():
    """``bnnkit.sample(..., fused=...)`` refuses them before any step, saying to drop ``fused=``."""
    post, X, y = _problem()
    kw = dict(num_samples=2, progress=False, fused=True)
    for alg, what in [
        (SGHMC(1e-3, resample_momentum_every=10), "resample_momentum_every"),
        (SGHMC(1e-3, mass=torch.ones(post.target().view.size, dtype=torch.float64)), "tensor mass"),
        (SGLD(1e-3, gibbs_every=2), "gibbs_every"),
    ]:
        with pytest.raises(BnnkitError, match=f"{what}.*without fused="):
            bnnkit.sample(alg, post, Minibatches(X, y, batch_size=16), **kw)
    with pytest.raises(BnnkitError, match="thin"):
        bnnkit.sample(SGLD(1e-3), post, Minibatches(X, y, batch_size=16), thin=0, **kw)


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


def _moments_check(alg, num_samples: int, thin: int, exact_var: float) -> None:
    """Full-batch ``bnnkit.sample(..., fused=50)`` on the Gaussian target from ``mu = 0``."""
    target, y, mean = _gaussian_target()
    out = bnnkit.sample(
        alg,
        target,
        y,
        num_samples=num_samples,
        thin=thin,
        num_warmup=200,
        seed=11,
        init={"mu": torch.zeros(2, dtype=torch.float64)},
        fused=50,
        progress=False,
    )
    draws = out.positions[0]
    # Thinned draws of these fast-mixing chains are close to independent; 5 standard errors.
    se_mean = (exact_var / num_samples) ** 0.5
    assert torch.all((draws.mean(0) - mean).abs() < 5 * se_mean), (draws.mean(0), mean)
    rel = draws.var(0) / exact_var
    assert torch.all((rel - 1).abs() < 5 * (2 / num_samples) ** 0.5), rel


def _sgld_exact_var(eps: float) -> float:
    a = 1 - eps * P / 2  # x' = (1 - eps P / 2) x + eps b / 2 + sqrt(eps) xi
    return eps / (1 - a * a)


# the fused block equals the step-at-a-time chain draw for draw (fast tests above); the moment checks run with the slow tests
@pytest.mark.slow
def test_sgld_conjugate_gaussian_moments(eager):
    _moments_check(SGLD(0.01), 2000, 5, _sgld_exact_var(0.01))


def _sghmc_exact_var(eps: float, c: float) -> float:
    # z = (x, r): r' = (1 - eps C) r - eps P x + s xi ; x' = x + eps r'
    s2 = 2 * eps * c
    A_r = np.array([[-eps * P, 1 - eps * c]])
    A = np.vstack([np.array([[1.0, 0.0]]) + eps * A_r, A_r])
    Q = s2 * np.array([[eps * eps, eps], [eps, 1.0]])
    return float(_stationary_variance(A, Q)[0, 0])


# as above
@pytest.mark.slow
def test_sghmc_conjugate_gaussian_moments(eager):
    eps, c = 0.02, 14.0
    _moments_check(SGHMC(eps, friction=c), 2000, 10, _sghmc_exact_var(eps, c))


def _diverging_run(thin: int = 1) -> DivergenceError:
    """The error of a fused SGLD run whose step (1.0) is too large for the Gaussian target."""
    target, y, _ = _gaussian_target()
    init = {"mu": torch.zeros(2, dtype=torch.float64)}
    with pytest.raises(DivergenceError) as err:
        bnnkit.sample(SGLD(1.0), target, y, num_samples=1000, thin=thin, init=init, fused=64, progress=False)
    return err.value


def test_divergence_raises_with_the_finite_draws(eager):
    err = _diverging_run()
    ((positions, stats),) = err.partial.values()
    assert 64 < err.step < 1000 and len(positions) == err.step  # not in the first block
    assert torch.isfinite(positions).all() and torch.isfinite(stats["log_density"]).all()


# ------------------------------------------------------------------ compiled (slow)
@pytest.mark.slow
@pytest.mark.parametrize("name", ["sgld", "sghmc", "csgld"])
def test_compiled_scan_equals_step_at_a_time(name):
    torch._dynamo.reset()
    _compare(ALGORITHMS[name], 8)


@pytest.mark.slow
def test_compiled_sparse_blocks_find_the_divergence_the_eager_loop_finds(monkeypatch):
    """A block that keeps at most two draws runs the scan that returns sum(w') per step
    (FusedKernel._run_sparse); at a non-finite step it runs the block again with every position
    and reports the same step and kept draws as the eager loop."""
    torch._dynamo.reset()
    errors = []
    for loop in ("eager", "scan"):
        monkeypatch.setattr(fused_module, "DEFAULT_LOOP", loop)
        errors.append(_diverging_run(thin=40))
    assert errors[0].step == errors[1].step > 64
    (p0, _), (p1, _) = errors[0].partial[0], errors[1].partial[0]
    assert len(p0) == errors[0].step // 40 > 0
    torch.testing.assert_close(p1, p0, rtol=1e-12, atol=1e-12)


@pytest.mark.slow
def test_compiled_scan_conjugate_gaussian():
    torch._dynamo.reset()
    _moments_check(SGLD(0.01), 2000, 5, _sgld_exact_var(0.01))


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
