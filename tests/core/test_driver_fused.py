"""bnnkit.sample(..., fused=...): SG-MCMC run in blocks of steps (bnnkit.core.blocks).

Most tests run the block code eagerly (``bnnkit.sgmcmc.fused.DEFAULT_LOOP = "eager"``): the same
draws, cuts, streaming and resume logic as the compiled scan, without a compile per variant.  One
test compiles (SGHMC on a small MLP); the compiled SGLD runs with the slow tests.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

import bnnkit
import bnnkit.sgmcmc.fused as fused_module
from bnnkit.core.blocks import AUTO_BLOCK, fused_block
from bnnkit.core.errors import BnnkitError, DivergenceError
from bnnkit.core.target import as_target
from bnnkit.data import Minibatches
from bnnkit.nets import mlp
from bnnkit.sgmcmc import SGHMC, SGLD, AdaptiveSGHMC, CyclicalSGHMC, CyclicalSGLD, PreconditionedSGLD

ALGORITHMS = {
    "sgld": SGLD(1e-3),
    "sghmc": SGHMC(1e-2, friction=5.0),
    "csgld": CyclicalSGLD(1e-3, cycle_length=10),
    "csghmc": CyclicalSGHMC(1e-2, cycle_length=12, friction=5.0),
    "psgld": PreconditionedSGLD(1e-3),
    "asghmc": AdaptiveSGHMC(1e-2),  # warm-up (mass adaptation) step at a time, sampling in blocks
    "asghmc-nc": AdaptiveSGHMC(3e-2, noise_correction=True),  # some coordinates' noise clipped
}
# Warm-up, thinning, two chains, chunks of 4 draws, blocks of at most 5 steps: every kind of cut.
RUN = dict(num_samples=9, thin=3, num_warmup=7, num_chains=2, chunk_size=4, seed=3, progress=False)


@pytest.fixture
def eager(monkeypatch):
    monkeypatch.setattr(fused_module, "DEFAULT_LOOP", "eager")


def _problem(n: int = 100):
    """An MLP posterior; 100 = 6 * 16 + 4 rows: every epoch ends with a short minibatch."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, 3, generator=g, dtype=torch.float64)
    y = torch.randn(n, generator=g, dtype=torch.float64)
    torch.manual_seed(0)
    post = bnnkit.Posterior(mlp(3, 8).double(), bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0), num_data=n)
    return post, X, y


def _assert_same_draws(a, b, exact: bool) -> None:
    tol = dict(rtol=0, atol=0) if exact else dict(rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(a.positions, b.positions, **tol)
    assert sorted(a.stats) == sorted(b.stats)
    for k in a.stats:
        torch.testing.assert_close(a.stats[k], b.stats[k], **tol, msg=k)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_fused_equals_step_at_a_time(eager, name):
    post, X, y = _problem()
    alg = ALGORITHMS[name]
    ref = bnnkit.sample(alg, post, Minibatches(X, y, batch_size=16), **RUN)
    out = bnnkit.sample(alg, post, Minibatches(X, y, batch_size=16), fused=5, **RUN)
    assert out.positions.shape == ref.positions.shape == (2, 9, post.target().view.size)
    _assert_same_draws(out, ref, exact=False)
    assert out.config["fused"] == {"block": 5, "loop": "eager"}
    assert type(out.final_states[1]) is type(ref.final_states[1])
    torch.testing.assert_close(
        out.final_states[1].position, ref.final_states[1].position, rtol=1e-10, atol=1e-10
    )


@pytest.mark.parametrize("name", ["sgld", "csghmc", "asghmc"])
def test_vectorized_fused_equals_vectorized_step_at_a_time(eager, name):
    post, X, y = _problem()
    alg = ALGORITHMS[name]
    kw = dict(RUN, num_chains=3, chain_method="vectorized")
    ref = bnnkit.sample(alg, post, Minibatches(X, y, batch_size=16), **kw)
    out = bnnkit.sample(alg, post, Minibatches(X, y, batch_size=16), fused=5, **kw)
    assert out.positions.shape == (3, 9, post.target().view.size)
    _assert_same_draws(out, ref, exact=False)
    full = dict(kw, num_samples=3, num_warmup=2)  # every chain sees the whole data set
    _assert_same_draws(
        bnnkit.sample(alg, post, (X, y), fused=4, **full),
        bnnkit.sample(alg, post, (X, y), **full),
        exact=False,
    )


def test_full_batch_log_density_function(eager):
    """A plain log density over a dict and a full batch (no minibatch stream)."""
    post, X, y = _problem(20)
    target = post.target()
    init = target.view.unravel(post.initial_position("prior", torch.Generator().manual_seed(1)))
    kw = dict(init=init, num_samples=6, thin=2, num_warmup=3, progress=False)

    def log_density(params, batch):
        return target.log_prob(target.view.ravel(params), batch)

    ref = bnnkit.sample(SGLD(1e-3), log_density, (X, y), **kw)
    out = bnnkit.sample(SGLD(1e-3), log_density, (X, y), fused=True, **kw)
    _assert_same_draws(out, ref, exact=False)
    assert out.config["fused"]["block"] == "auto"


BLOCK_STARTS: list[int] = []


@dataclasses.dataclass(frozen=True)
class InterruptedSGHMC(SGHMC):
    """SGHMC whose fused kernel raises KeyboardInterrupt in its ``stop_after + 1``-th block; the
    step counter at the start of every block it runs is appended to ``BLOCK_STARTS``."""

    stop_after: int = 1 << 30

    def build_fused(self, model, block, **kw):
        kernel = super().build_fused(model, block, **kw)
        run_block, calls = kernel.run_block, {"n": 0}

        def interrupted(*args, **kwargs):
            calls["n"] += 1
            if calls["n"] > self.stop_after:
                raise KeyboardInterrupt
            BLOCK_STARTS.append(int(args[0].iteration))
            return run_block(*args, **kwargs)

        kernel.run_block = interrupted
        return kernel


# Blocks of a chain in RUN with fused=5 (one kernel runs both chains): steps 4 + 3 of warm-up (each
# ends at a checkpoint), then 5 5 2 | 5 5 2 | 3 (a chunk of 4 draws ends at each |).  Stops: in
# warm-up, in the middle of a chunk, right after a chunk, in the second chain.
@pytest.mark.parametrize(
    "stop_after, resume_at, method",
    [
        (1, 4, "sequential"),
        (4, 7, "sequential"),
        (5, 19, "sequential"),
        (13, 7, "sequential"),
        (17, 31, "sequential"),
        (6, 19, "vectorized"),
    ],
)
def test_interrupted_fused_run_resumes_bit_identical(eager, tmp_path, stop_after, resume_at, method):
    post, X, y = _problem()
    alg = dict(step_size=1e-2, friction=5.0)
    run = dict(RUN, chain_method=method)
    whole = bnnkit.sample(SGHMC(**alg), post, Minibatches(X, y, batch_size=16), fused=5, **run)
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        bnnkit.sample(
            InterruptedSGHMC(**alg, stop_after=stop_after),
            post,
            Minibatches(X, y, batch_size=16),
            fused=5,
            output=str(out),
            **run,
        )
    BLOCK_STARTS.clear()
    resumed = bnnkit.sample(
        InterruptedSGHMC(**alg), post, Minibatches(X, y, batch_size=16), fused=5, output=str(out), **run
    )
    assert BLOCK_STARTS[0] == resume_at  # from the last checkpoint, not afresh
    _assert_same_draws(resumed, whole, exact=True)


def test_resume_with_another_fused_setting_is_refused(eager, tmp_path):
    post, X, y = _problem()
    out = str(tmp_path / "run")
    kw = dict(num_samples=4, progress=False, output=out)
    bnnkit.sample(SGLD(1e-3), post, Minibatches(X, y, batch_size=16), fused=4, **kw)
    for other in (dict(), dict(fused=8), dict(fused=True)):
        with pytest.raises(BnnkitError, match="fused"):
            bnnkit.sample(SGLD(1e-3), post, Minibatches(X, y, batch_size=16), **other, **kw)


class _StopAfter:
    """A stopping rule that says stop once it has seen ``n`` draws."""

    def __init__(self, n):
        self.n = n

    def config(self):
        return {"rule": "stop_after", "n": self.n}

    def reset(self):
        self.seen, self.last = 0, {}

    def update(self, positions):
        self.seen += positions.shape[1]
        return "enough" if self.seen >= self.n else None

    def budget_message(self):
        return "budget"


def test_stop_when_stops_at_the_same_chunk(eager):
    post, X, y = _problem()
    kw = dict(num_samples=50, chunk_size=4, thin=2, progress=False, stop_when=_StopAfter(10))
    ref = bnnkit.sample(SGLD(1e-3), post, Minibatches(X, y, batch_size=16), **kw)
    out = bnnkit.sample(SGLD(1e-3), post, Minibatches(X, y, batch_size=16), fused=3, **kw)
    assert out.num_draws == ref.num_draws == 12 and out.config["stopped"]["reason"] == "enough"
    _assert_same_draws(out, ref, exact=False)


def test_divergence_keeps_the_same_finite_draws(eager):
    y = torch.linspace(-1.0, 2.0, 50, dtype=torch.float64)[:, None]

    def log_density(params, batch):
        return -0.5 * ((batch - params["mu"]) ** 2).sum() - 0.5 * (params["mu"] ** 2).sum()

    kw = dict(init={"mu": torch.zeros(1, dtype=torch.float64)}, num_samples=500, chunk_size=7, progress=False)
    errors = []
    for fused in (False, 16):
        with pytest.raises(DivergenceError) as err:
            bnnkit.sample(SGLD(0.2), log_density, y, fused=fused, **kw)
        errors.append(err.value)
    ref, out = errors
    assert out.step == ref.step > 0 and str(out) == str(ref)
    (ref_pos, ref_stats), (pos, stats) = ref.partial[0], out.partial[0]
    assert len(pos) == out.step and torch.isfinite(pos).all()
    torch.testing.assert_close(pos, ref_pos, rtol=1e-10, atol=0)
    torch.testing.assert_close(stats["log_density"], ref_stats["log_density"], rtol=1e-10, atol=0)


def test_unsupported_combinations_are_refused():
    post, X, y = _problem()
    data = Minibatches(X, y, batch_size=16)
    kw = dict(num_samples=2, progress=False)
    with pytest.raises(BnnkitError, match="PreconditionedSGLD with correction=True"):
        bnnkit.sample(PreconditionedSGLD(1e-3, correction=True), post, data, fused=True, **kw)
    with pytest.raises(BnnkitError, match="num_warmup >= 1"):
        bnnkit.sample(AdaptiveSGHMC(1e-2), post, data, fused=True, **kw)
    with pytest.raises(BnnkitError, match="ULA has no fused path"):
        bnnkit.sample(bnnkit.samplers.ULA(1e-3), post, (X, y), fused=True, **kw)
    with pytest.raises(BnnkitError, match="noise_estimate='online'.*without fused="):
        bnnkit.sample(SGHMC(1e-3, noise_estimate="online"), post, data, fused=True, **kw)
    with pytest.raises(BnnkitError, match="vectorised.*gibbs_every|gibbs_every"):
        bnnkit.sample(
            SGLD(1e-3, gibbs_every=2), post, data, fused=True, chain_method="vectorized", num_chains=2, **kw
        )
    with pytest.raises(BnnkitError, match="drop compile=True"):
        bnnkit.sample(SGLD(1e-3), post, data, fused=True, compile=True, **kw)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 1)).double()
    bn = bnnkit.Posterior(net, bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0), num_data=len(X))
    with pytest.raises(BnnkitError, match="no buffers"):
        bnnkit.sample(SGLD(1e-3), bn, data, fused=True, **kw)

    class OwnTarget(bnnkit.Posterior):  # e.g. data-parallel: an all-reduce in its target
        def target(self):
            return super().target()

    mine = OwnTarget(mlp(3, 4).double(), bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0), num_data=len(X))
    with pytest.raises(BnnkitError, match="not data-parallel"):
        bnnkit.sample(SGLD(1e-3), mine, data, fused=True, **kw)
    for bad in (0, -3, 2.5, "auto"):
        with pytest.raises(BnnkitError, match="fused must be"):
            bnnkit.sample(SGLD(1e-3), post, data, fused=bad, **kw)


def test_automatic_block_size():
    alg = SGLD(1e-3)
    assert fused_block(True, alg, False, 3401) == AUTO_BLOCK == 128
    assert fused_block(True, alg, False, 1 << 20) == 16  # [T, D] at most 2**24 numbers
    assert fused_block(True, alg, False, 1 << 30) == 1
    assert fused_block(7, alg, False, 10) == 7
    assert fused_block(False, alg, True, 10) == 0


# ------------------------------------------------------------------ compiled scan
def _compiled_pair(algorithm, num_chains=1, chain_method="sequential", **kw):
    post, X, y = _problem(96)  # full minibatches only: one graph per algorithm
    run = dict(RUN, num_chains=num_chains, chain_method=chain_method)
    ref = bnnkit.sample(algorithm, post, Minibatches(X, y, batch_size=16), **run)
    out = bnnkit.sample(algorithm, post, Minibatches(X, y, batch_size=16), fused=5, **run, **kw)
    _assert_same_draws(out, ref, exact=False)
    assert out.config["fused"] == {"block": 5, "loop": "scan"}
    return post, X, y, run, out


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_compiled_fused_sghmc_equals_step_at_a_time_and_resumes_bit_identical(tmp_path):
    """The default loop (torch.compile of a scan): as step at a time to float rounding, and an
    interrupted streamed run resumes bit for bit (the block length is a dynamic dimension of the
    graph, so a resumed run's blocks run the same compiled code as the uninterrupted run's)."""
    torch._dynamo.reset()
    alg = dict(step_size=1e-2, friction=5.0)
    post, X, y, run, out = _compiled_pair(SGHMC(**alg), output=str(tmp_path / "whole"))
    with pytest.raises(KeyboardInterrupt):
        bnnkit.sample(
            InterruptedSGHMC(**alg, stop_after=4),
            post,
            Minibatches(X, y, batch_size=16),
            fused=5,
            output=str(tmp_path / "cut"),
            **run,
        )
    resumed = bnnkit.sample(
        SGHMC(**alg), post, Minibatches(X, y, batch_size=16), fused=5, output=str(tmp_path / "cut"), **run
    )
    _assert_same_draws(resumed, out, exact=True)


# the driver's block logic is covered by the eager tests above, the compiled scan by the SGHMC test
@pytest.mark.slow
def test_compiled_fused_sgld_equals_step_at_a_time():
    torch._dynamo.reset()
    _compiled_pair(SGLD(1e-3))


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_compiled_fused_adaptive_sghmc_equals_step_at_a_time():
    """The scan with block constants (the frozen mass and noise scale), and pSGLD's carried
    preconditioner, compiled."""
    torch._dynamo.reset()
    _compiled_pair(AdaptiveSGHMC(1e-2))


@pytest.mark.slow
def test_compiled_fused_psgld_equals_step_at_a_time():
    torch._dynamo.reset()
    _compiled_pair(PreconditionedSGLD(1e-3))


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_compiled_fused_cnn_equals_step_at_a_time():
    """A network other than an MLP (a small CNN) runs in the scan through functional_call."""
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(0)
    X = torch.randn(64, 1, 8, 8, generator=g, dtype=torch.float64)
    y = torch.randint(0, 3, (64,), generator=g)
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(36, 3),
    ).double()
    post = bnnkit.Posterior(net, bnnkit.Categorical(), bnnkit.GaussianPrior(1.0), num_data=64)
    run = dict(num_samples=6, thin=2, num_warmup=3, seed=2, progress=False)
    ref = bnnkit.sample(SGHMC(1e-3, friction=5.0), post, Minibatches(X, y, batch_size=16), **run)
    out = bnnkit.sample(SGHMC(1e-3, friction=5.0), post, Minibatches(X, y, batch_size=16), fused=4, **run)
    assert out.config["fused"]["loop"] == "scan"
    _assert_same_draws(out, ref, exact=False)


def test_target_without_a_module_uses_the_target(eager, capsys):
    """A Target (not a Posterior) is sampled through its own log density; the progress bar runs."""
    y = torch.linspace(-1.0, 2.0, 50, dtype=torch.float64)[:, None]

    def log_density(params, batch):
        return -0.5 * ((batch - params["mu"]) ** 2).sum() - 0.5 * (params["mu"] ** 2).sum()

    target = as_target(log_density, {"mu": torch.zeros(1, dtype=torch.float64)})
    kw = dict(init={"mu": torch.zeros(1, dtype=torch.float64)}, num_samples=5, num_warmup=3)
    ref = bnnkit.sample(SGLD(1e-3), target, y, progress=False, **kw)
    out = bnnkit.sample(SGLD(1e-3), target, y, fused=2, progress=True, **kw)
    _assert_same_draws(out, ref, exact=False)
    assert "chain 1/1" in capsys.readouterr().err


@pytest.mark.slow
def test_compiled_vectorized_fused_equals_step_at_a_time():
    torch._dynamo.reset()
    _compiled_pair(SGHMC(1e-2, friction=5.0), num_chains=3, chain_method="vectorized")
