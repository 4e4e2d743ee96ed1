"""A MAP warm start puts every chain near a mode, reproducibly, and the sampler takes it from there."""

import pytest
import torch

import bnnkit
from bnnkit.core.errors import BnnkitError
from bnnkit.core.warm_start import fan_in_position, map_init
from tests.helpers import linear_problem

PROB = linear_problem(n=30, d=2)


def test_map_init_reaches_the_posterior_mode_from_each_chains_prior_draw():
    post = PROB.posterior()
    init = map_init(post, (PROB.X, PROB.y), steps=600, lr=0.05)
    starts = [post.view.ravel(init(c, torch.Generator().manual_seed(c))) for c in range(2)]
    for x in starts:  # the posterior is Gaussian: its mode is its mean
        assert torch.allclose(x, PROB.mean, atol=1e-3)


def test_a_warm_started_run_is_reproducible_and_starts_at_the_mode():
    post = PROB.posterior()
    kw = dict(
        num_samples=3,
        num_chains=2,
        seed=4,
        progress=False,
        init=map_init(post, (PROB.X, PROB.y), steps=300, lr=0.05),
    )
    a = bnnkit.sample(bnnkit.HMC(step_size=0.05, num_steps=3), post, (PROB.X, PROB.y), **kw)
    b = bnnkit.sample(bnnkit.HMC(step_size=0.05, num_steps=3), post, (PROB.X, PROB.y), **kw)
    assert torch.equal(a.positions, b.positions)
    assert (a.positions[:, 0] - PROB.mean).abs().max() < 5 * PROB.cov.diagonal().sqrt().max()


def test_map_init_refuses_what_it_cannot_use():
    with pytest.raises(BnnkitError, match="needs a bnnkit.Posterior"):
        map_init(lambda p, b: p["x"].sum(), (PROB.X, PROB.y))
    with pytest.raises(BnnkitError, match="num_data"):
        map_init(PROB.posterior(), (PROB.X, PROB.y), batch_size=5)
    with pytest.raises(BnnkitError, match="start must be"):
        map_init(PROB.posterior(), (PROB.X, PROB.y), start="zeros")


def test_fan_in_start_draws_pytorchs_default_init_from_the_chains_generator():
    net = torch.nn.Sequential(torch.nn.Linear(4, 50), torch.nn.Tanh(), torch.nn.Linear(50, 1))
    post = bnnkit.Posterior(
        net, bnnkit.Gaussian(0.5, learn_noise=True), bnnkit.GaussianPrior(1.0), num_data=10
    )
    a = post.view.unravel(fan_in_position(post, torch.Generator().manual_seed(0)))
    b = post.view.unravel(fan_in_position(post, torch.Generator().manual_seed(0)))
    c = post.view.unravel(fan_in_position(post, torch.Generator().manual_seed(1)))
    for name, fan in (("0.weight", 4), ("0.bias", 4), ("2.weight", 50), ("2.bias", 50)):
        bound = fan**-0.5
        assert a[name].abs().max() <= bound
        # uniform on [-bound, bound]: variance bound^2 / 3 (200 or 50 values: loose check)
        if a[name].numel() >= 50:
            assert 0.6 < a[name].var().item() / (bound**2 / 3) < 1.5
        assert torch.equal(a[name], b[name]) and not torch.equal(a[name], c[name])
    # the likelihood's noise keeps its initial value (sd 0.5: log precision log 4)
    assert torch.allclose(a["likelihood.log_precision"], torch.tensor([4.0]).log())


def test_map_init_from_fan_in_reaches_the_same_mode_as_from_the_prior():
    post = PROB.posterior()
    init = map_init(post, (PROB.X, PROB.y), steps=600, lr=0.05, start="fan_in")
    x = post.view.ravel(init(0, torch.Generator().manual_seed(3)))
    assert torch.allclose(x, PROB.mean, atol=1e-3)


def test_map_init_on_the_samplers_stochastic_gradient_reaches_the_same_mode():
    post = PROB.posterior()
    init = map_init(post, (PROB.X, PROB.y), steps=600, lr=0.05, gradient="stochastic")
    x = post.view.ravel(init(0, torch.Generator().manual_seed(5)))
    assert torch.allclose(x, PROB.mean, atol=1e-3)
    with pytest.raises(BnnkitError, match="gradient must be"):
        map_init(post, (PROB.X, PROB.y), gradient="adam")


def _overfit_problem():
    """30 noisy rows of a smooth curve and a 1-50-1 tanh network with the noise learnt: a long MAP
    fits the noise."""
    g = torch.Generator().manual_seed(0)
    x = torch.linspace(-2, 2, 30).unsqueeze(-1)
    y = torch.sin(x).squeeze(-1) + 0.3 * torch.randn(30, generator=g)
    net = torch.nn.Sequential(torch.nn.Linear(1, 50), torch.nn.Tanh(), torch.nn.Linear(50, 1))
    post = bnnkit.Posterior(
        net,
        bnnkit.Gaussian(0.5, learn_noise=True, precision_prior=(1.0, 0.1)),
        bnnkit.GaussianPrior(1.0),
        num_data=30,
    )
    return post, x, y


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_early_stopping_returns_the_best_held_out_iterate_and_stops_before_the_cap():
    post, x, y = _overfit_problem()
    cap = 20_000
    init = map_init(post, (x, y), steps=cap, lr=1e-2, batch_size=10, start="fan_in", holdout=0.2, patience=5)
    a = post.view.ravel(init(0, torch.Generator().manual_seed(1)))
    best, ran = init.map_steps[0]
    # checks every 100 steps (an epoch is 3 steps here); it stops 5 checks after the best one
    assert ran < cap and best % 100 == 0 and ran == best + 5 * 100
    again = post.view.ravel(init(0, torch.Generator().manual_seed(1)))
    assert torch.equal(a, again)  # reproducible from the chain's generator
    # the run without early stopping, to the cap, has fitted the noise: a smaller noise sd than the
    # early-stopped iterate's
    full = map_init(post, (x, y), steps=ran + 2000, lr=1e-2, batch_size=10, start="fan_in")
    b = full(0, torch.Generator().manual_seed(1))
    a_noise = post.view.unravel(a)["likelihood.log_precision"]
    assert b["likelihood.log_precision"] > a_noise


def test_early_stopping_refuses_bad_fractions():
    post, x, y = _overfit_problem()
    for bad in (0.0, 0.7, 1):
        with pytest.raises(BnnkitError, match="holdout must be a fraction"):
            map_init(post, (x, y), holdout=bad)
    with pytest.raises(BnnkitError, match="holds out no row"):
        map_init(post, (x, y), holdout=0.01)


def test_map_init_takes_a_dataloader_and_numpy_arrays_as_the_tensors():
    from torch.utils.data import DataLoader, TensorDataset

    post = PROB.posterior()
    ref = post.view.ravel(
        map_init(post, (PROB.X, PROB.y), steps=50, lr=0.05)(0, torch.Generator().manual_seed(2))
    )
    loader = DataLoader(TensorDataset(PROB.X, PROB.y), batch_size=7, shuffle=False)
    for data in (loader, (PROB.X.numpy(), PROB.y.numpy())):
        x = post.view.ravel(map_init(post, data, steps=50, lr=0.05)(0, torch.Generator().manual_seed(2)))
        assert torch.equal(x, ref)
    with pytest.raises(BnnkitError, match="not a pair"):
        map_init(post, DataLoader(TensorDataset(PROB.X), batch_size=7))


def test_held_out_rows_scored_in_chunks_give_the_run_scoring_them_at_once(monkeypatch):
    from bnnkit.core import map_phase as mp

    post, x, y = _overfit_problem()

    def run():
        gens = [torch.Generator().manual_seed(c) for c in range(2)]
        x0 = torch.stack([fan_in_position(post, g) for g in gens])
        return mp.map_phase(post, x, y, x0, gens, steps=4000, lr=1e-2, batch_size=10, holdout=0.3, patience=3)

    whole = run()  # 9 held-out rows, one chunk
    monkeypatch.setattr(mp, "SCORE_CHUNK", 2)  # five chunks
    chunked = run()
    assert whole[1] == chunked[1] and whole[1][0][1] < 4000  # same best and stopping steps, stopped early
    assert torch.equal(whole[0], chunked[0])
    assert torch.allclose(whole[2], chunked[2], rtol=1e-6)  # held-out squared error per chain


def test_a_classifiers_map_phase_reports_no_squared_error():
    from bnnkit.core.map_phase import map_phase

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(40, 3, generator=g), torch.randint(3, (40,), generator=g)
    post = bnnkit.Posterior(
        torch.nn.Linear(3, 3), bnnkit.Categorical(), bnnkit.GaussianPrior(1.0), num_data=40
    )
    gens = [torch.Generator().manual_seed(c) for c in range(2)]
    x0 = torch.stack([fan_in_position(post, gen) for gen in gens])
    best, steps, mse = map_phase(
        post, x, y, x0, gens, steps=50, lr=1e-2, batch_size=8, holdout=0.2, patience=3
    )
    assert mse is None and best.shape == x0.shape and all(r <= 50 for _, r in steps)


def _two_chain_run(post, x, y, **kw):
    from bnnkit.core.map_phase import map_phase

    gens = [torch.Generator().manual_seed(c) for c in range(3)]
    x0 = torch.stack([fan_in_position(post, g) for g in gens])
    return map_phase(post, x, y, x0, gens, steps=4000, lr=1e-2, batch_size=10, holdout=0.3, **kw)


def test_a_patience_in_steps_stops_a_chain_after_that_many_steps_counted_in_whole_scores():
    post, x, y = _overfit_problem()
    # scores every 100 steps (an epoch is 3 steps here): 250 steps are 2 scores, fewer than 5
    _, steps, _ = _two_chain_run(post, x, y, patience=5, patience_steps=250)
    assert all(ran == best + 2 * 100 for best, ran in steps)
    _, steps, _ = _two_chain_run(post, x, y, patience=2, patience_steps=10_000)  # the scores come first
    assert all(ran == best + 2 * 100 for best, ran in steps)
    _, steps, _ = _two_chain_run(post, x, y, patience=5, patience_steps=50)  # at least one score
    assert all(ran == best + 100 for best, ran in steps)


def test_stopped_chains_leave_the_evaluation_and_the_others_run_as_before():
    post, x, y = _overfit_problem()
    seen: list[int] = []
    make = post.target

    class Spy:
        def __init__(self, inner):
            self.inner = inner

        def value_and_grad(self, xs, batch):
            seen.append(int(xs.shape[0]))
            return self.inner.value_and_grad(xs, batch)

    post.target = lambda: type("T", (), {"vectorized": lambda self, **kw: Spy(make().vectorized(**kw))})()
    kept, kept_steps, kept_mse = _two_chain_run(post, x, y, patience=3)
    assert set(seen) == {3}  # off: every chain is evaluated to the end
    seen.clear()
    dropped, steps, mse = _two_chain_run(post, x, y, patience=3, drop_stopped=True)
    ran = sorted(r for _, r in steps)
    assert ran[0] < ran[-1]  # the chains stop at different steps ...
    assert seen.count(3) == ran[0] and len(seen) == ran[-1] and min(seen) == 1  # ... and leave as they stop
    # the same stopping steps and iterates (a vectorised evaluation of fewer chains may differ in
    # the last bits, so close, not equal)
    assert steps == kept_steps
    assert torch.allclose(dropped, kept, rtol=1e-4, atol=1e-5)
    assert torch.allclose(mse, kept_mse, rtol=1e-4)
