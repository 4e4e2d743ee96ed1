"""Every VI method as a kernel run by the one driver (bnnkit.sample): draws that predict() takes,
progress, streaming to an output directory, and an interrupted run resumed bit for bit."""

import math

import pytest
import torch

import bnnkit
from bnnkit.core.errors import BnnkitError
from bnnkit.data import Minibatches
from bnnkit.functional import FunctionalPosterior, GPPrior, MeasurementPoints
from bnnkit.predict import predict
from bnnkit.vi import FBNN, BayesByBackprop, BayesianLinear, DeepEnsemble, MCDropout
from bnnkit.vi.layers import LayersELBO, LayersObjective
from tests.helpers import linear_problem

PROB = linear_problem(n=24, d=2)


class Interrupted:
    """``algorithm`` whose step raises KeyboardInterrupt after ``stop_after`` steps (a crash); the
    same name and configuration, so the resumed run continues its directory."""

    def __init__(self, algorithm, stop_after):
        self.algorithm, self.stop_after = algorithm, stop_after

    def __getattr__(self, name):
        return getattr(self.algorithm, name)

    def build(self, target, **kw):
        kernel = self.algorithm.build(target, **kw)
        calls = {"n": 0}

        def step(state, batch, gen):
            calls["n"] += 1
            if calls["n"] > self.stop_after:
                raise KeyboardInterrupt
            return kernel.step(state, batch, gen)

        return kernel._replace(step=step)


def _mlp(seed=0, dropout=False):
    torch.manual_seed(seed)  # the module's own initial weights (the start of every fit)
    net = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).double()
    return MCDropout.wrap(net, 0.2).eval() if dropout else net


def _functional_posterior():
    gp = GPPrior("rbf", input_dim=2, lengthscale=1.0, outputscale=1.0, jitter=1e-4)
    return FunctionalPosterior(
        _mlp(), bnnkit.Gaussian(0.5), gp, MeasurementPoints(0, 4), PROB.X, num_data=PROB.X.shape[0]
    )


def _posterior(dropout=False):
    return bnnkit.Posterior(
        _mlp(dropout=dropout), bnnkit.Gaussian(0.5), bnnkit.GaussianPrior(1.0), num_data=PROB.X.shape[0]
    )


def _layers_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(BayesianLinear(2, 8), torch.nn.Tanh(), BayesianLinear(8, 1)).double()


def _layers_objective():
    return LayersObjective(_layers_model(), bnnkit.Gaussian(0.5), PROB.X.shape[0])


LAYERS_INIT = {n: p.detach() for n, p in _layers_model().named_parameters()}

# (name, algorithm, posterior factory, sample() options): 3 epochs of 3 minibatches (8 rows) each
CASES = [
    ("bbb", BayesByBackprop(lr=0.01, num_epochs=3, batch_size=8, estimator="local"), _posterior, {}),
    (
        "bbb-reparam",
        BayesByBackprop(lr=0.01, num_epochs=3, batch_size=8, num_mc=2, lr_decay="cosine"),
        _posterior,
        {},
    ),
    ("fbnn", FBNN(lr=0.01, num_epochs=3, batch_size=8, num_function_samples=5), _functional_posterior, {}),
    ("mcdropout", MCDropout(p=0.2, lr=0.01, num_epochs=3, batch_size=8), lambda: _posterior(True), {}),
    (
        "ensemble",
        DeepEnsemble(num_members=3, lr=0.01, num_epochs=3, batch_size=8),
        _posterior,
        {"num_chains": 3, "chain_method": "vectorized"},
    ),
    (
        "layers",
        LayersELBO(lr=0.01, num_epochs=3, batch_size=8, num_mc=2),
        _layers_objective,
        {"init": LAYERS_INIT},
    ),
]
RUN = dict(num_samples=7, seed=3, progress=False, chunk_size=2)


def _run(algorithm, make_post, opts, **kw):
    data = Minibatches(PROB.X, PROB.y, batch_size=8)
    samples = opts.get("num_samples", RUN["num_samples"])
    run = {**RUN, **opts, **kw}
    if "num_chains" in opts:  # ensemble members: one fitted draw each (more would repeat it)
        run["num_samples"] = samples = 1
    return bnnkit.sample(algorithm, make_post(), data, **run), samples


@pytest.mark.parametrize("name, algorithm, make_post, opts", CASES, ids=[c[0] for c in CASES])
def test_vi_through_the_driver_streams_and_resumes_bit_identical(tmp_path, name, algorithm, make_post, opts):
    reference, n = _run(algorithm, make_post, opts)
    num_chains = opts.get("num_chains", 1)
    assert reference.positions.shape[:2] == (num_chains, n)
    assert torch.isfinite(reference.positions).all()
    state = reference.final_states[0]
    assert int(state.iteration) == 9 + n  # 3 epochs x 3 minibatches, then one step per draw
    if name != "layers":  # draws plug into the predictive as posterior samples do
        post = make_post()
        assert predict(post, reference, PROB.X[:5]).mean.shape == (5,)

    # streamed: the same draws, in chunk files, and read back by a second call
    streamed, _ = _run(algorithm, make_post, opts, output=str(tmp_path / "s"))
    assert torch.equal(streamed.positions, reference.positions)
    assert list((tmp_path / "s" / "chain_000").glob("draws_*.pt"))
    again, _ = _run(algorithm, make_post, opts, output=str(tmp_path / "s"))
    assert torch.equal(again.positions, reference.positions)
    assert torch.equal(again.final_states[0].position, state.position)

    # killed during the fit (after 2 and 5 steps: before and after a checkpoint) and at its last step
    for stop_after in (2, 5, 9 + n - 1):
        out = tmp_path / f"r{stop_after}"
        with pytest.raises(KeyboardInterrupt):
            _run(Interrupted(algorithm, stop_after), make_post, opts, output=str(out))
        resumed, _ = _run(algorithm, make_post, opts, output=str(out))
        assert torch.equal(resumed.positions, reference.positions), stop_after
        for k in reference.stats:
            assert torch.equal(resumed.stats[k], reference.stats[k]), (stop_after, k)
        for a, b in zip(resumed.final_states[0], state):
            assert torch.equal(a, b), stop_after


def test_progress_bar_runs(capsys):
    s = bnnkit.sample(
        BayesByBackprop(lr=0.01, num_epochs=2, batch_size=8),
        _posterior(),
        Minibatches(PROB.X, PROB.y, batch_size=8),
        num_samples=3,
        progress=True,
    )
    assert s.positions.shape == (1, 3, _posterior().view.size)
    err = capsys.readouterr().err  # one bar: the 6 fit steps and the 3 draws, with the ELBO
    assert "9/9" in err and "elbo=" in err


def test_bbb_draws_through_sample_match_the_mean_field_optimum():
    """Conjugate linear regression: the mean-field optimum is mu = posterior mean, sigma_i^2 =
    1 / Lambda_ii; the driver's draws from the fitted q match it within Monte-Carlo error."""
    prob = linear_problem(n=30, d=2)
    bbb = BayesByBackprop(lr=0.05, num_epochs=1500, num_mc=4, estimator="local", lr_decay="cosine")
    s = bnnkit.sample(bbb, prob.posterior(), (prob.X, prob.y), num_samples=4000, seed=1, progress=False)
    draws = s.positions[0]
    sd_opt = torch.linalg.inv(prob.cov).diag().rsqrt()
    se = sd_opt / math.sqrt(draws.shape[0])
    state = s.final_states[0]
    mu, sigma = state.params[0], torch.nn.functional.softplus(state.params[1])
    assert torch.allclose(mu, prob.mean, atol=0.1 * float(sd_opt.min()))
    assert torch.allclose(sigma, sd_opt, rtol=0.05)
    assert bool(((draws.mean(0) - mu).abs() < 4 * se).all())
    assert torch.allclose(draws.std(0), sigma, rtol=0.1)
    # the same fit as BayesByBackprop.fit (same generator stream: full batch, chain 0's seed)
    r = bbb.fit(prob.posterior(), (prob.X, prob.y), seed=1, progress=False)
    assert torch.equal(r.mean, mu) and torch.equal(r.stddev, sigma)


def test_mc_dropout_weight_draws_give_the_dropout_predictive():
    """A mask on a Linear layer's inputs is a scaling of its weight's columns: the weight draws
    through predict() and MCDropoutResult.predict (masks in the forward) are one mixture."""
    g = torch.Generator().manual_seed(0)
    X = torch.rand(48, 1, generator=g, dtype=torch.float64) * 4 - 2
    y = torch.sin(2 * X[:, 0]) + 0.1 * torch.randn(48, generator=g, dtype=torch.float64)
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(1, 16),
        torch.nn.ReLU(),
        torch.nn.Linear(16, 16),
        torch.nn.ReLU(),
        torch.nn.Linear(16, 1),
    ).double()
    post = bnnkit.Posterior(
        MCDropout.wrap(net, 0.2).eval(), bnnkit.Gaussian(0.1), bnnkit.GaussianPrior(1.0), num_data=48
    )
    r = MCDropout(p=0.2, lr=0.01, num_epochs=60, batch_size=16).fit(post, (X, y), progress=False)
    xt = torch.linspace(-3, 3, 5, dtype=torch.float64)[:, None]
    masks = r.predict(xt, num_samples=4000, seed=0)
    weights = predict(post, r.sample(4000, seed=1), xt)
    sd = masks.variance.sqrt()
    assert bool(((masks.mean - weights.mean).abs() < 5 * sd / math.sqrt(4000) * math.sqrt(2)).all())
    assert torch.allclose(masks.variance, weights.variance, rtol=0.15)
    # the same draws come from bnnkit.sample after the same training
    s = bnnkit.sample(
        MCDropout(p=0.2, lr=0.01, num_epochs=60, batch_size=16),
        post,
        Minibatches(X, y, batch_size=16),
        num_samples=5,
        progress=False,
    )
    trained = s.final_states[0].weights
    named = dict(r.module.named_parameters())
    assert torch.equal(trained, post.view.ravel({n: named[n] for n in post.view.names}))


def test_mc_dropout_draws_need_foldable_dropout():
    net = torch.nn.Sequential(
        torch.nn.Linear(2, 8), torch.nn.Dropout(0.2), torch.nn.Tanh(), torch.nn.Linear(8, 1)
    )
    post = bnnkit.Posterior(net.double().eval(), bnnkit.Gaussian(0.5), bnnkit.GaussianPrior(1.0), num_data=24)
    with pytest.raises(BnnkitError, match="right before"):
        bnnkit.sample(MCDropout(num_epochs=1), post, (PROB.X, PROB.y), num_samples=2, progress=False)
    r = MCDropout(num_epochs=2).fit(post, (PROB.X, PROB.y), progress=False)  # fit still trains it
    assert r.predict(PROB.X[:3], num_samples=4).mean.shape == (3,)


def test_vi_bad_input():
    with pytest.raises(BnnkitError, match="needs the training-set size"):
        bnnkit.sample(
            BayesByBackprop(batch_size=8), PROB.posterior(), (PROB.X, PROB.y), num_samples=1, progress=False
        )
    with pytest.raises(BnnkitError, match="built for minibatches of 8 rows"):
        bnnkit.sample(
            BayesByBackprop(batch_size=8),
            PROB.posterior(num_data=24),
            Minibatches(PROB.X, PROB.y, batch_size=6),
            num_samples=1,
            progress=False,
        )
    with pytest.raises(BnnkitError, match="fits a variational posterior to a bnnkit.Posterior"):
        bnnkit.sample(
            BayesByBackprop(),
            lambda p, b: -(p["w"] ** 2).sum(),
            None,
            init={"w": torch.zeros(2)},
            num_samples=1,
            progress=False,
        )
    with pytest.raises(BnnkitError, match="anchors and perturbed targets"):
        bnnkit.sample(
            DeepEnsemble(anchored=True), PROB.posterior(), (PROB.X, PROB.y), num_samples=1, progress=False
        )
    with pytest.raises(BnnkitError, match="cannot run its chains vectorised"):
        bnnkit.sample(
            BayesByBackprop(), PROB.posterior(), (PROB.X, PROB.y), num_chains=2, chain_method="vectorized"
        )


def test_mc_dropout_mask_before_flatten_folds_into_the_linear_columns():
    """nn.Dropout on [N, C, H, W] before Flatten, Linear: the shared elementwise mask is one mask
    per column of the Linear, so the weight draws equal the masked forwards draw for draw."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, 2, 2), torch.nn.Dropout(0.3), torch.nn.Flatten(), torch.nn.Linear(8, 3)
    ).double()
    post = bnnkit.Posterior(net.eval(), bnnkit.Categorical(), bnnkit.GaussianPrior(1.0), num_data=4)
    x = torch.rand(5, 1, 3, 3, dtype=torch.float64)
    r = MCDropout(p=0.3, num_epochs=1).fit(post, (x[:4], torch.tensor([0, 1, 2, 0])), progress=False)
    # one draw each way from the same generator stream: the same mask, so the same outputs
    masked = r.outputs(x, num_samples=1, seed=7)[0]
    w = r.sample(1, seed=7).positions[0, 0]
    assert torch.allclose(post.forward(post.split(w)[0], x), masked, atol=1e-12)
