"""The hand-written gradient of MLP posteriors (``StackedMLP`` in ``core/mlp.py``), K chains and one.

It must equal each chain's own autograd gradient (float64), for every supported activation and
likelihood, shared or per-chain minibatches; other models must not take it.
"""

import dataclasses

import pytest
import torch

import bnnkit
from bnnkit.core.target import Target
from bnnkit.data import Minibatches
from bnnkit.data.minibatch import ChainMinibatches


def _mlp(act, out, bias_last=True):
    return torch.nn.Sequential(
        torch.nn.Linear(4, 8),
        act(),
        torch.nn.Sequential(torch.nn.Linear(8, 6), act()),  # nested Sequential
        torch.nn.Linear(6, out, bias=bias_last),
    ).double()


LIKELIHOODS = {
    "gaussian": (
        lambda: bnnkit.Gaussian(0.7),
        lambda g: torch.randn(40, generator=g, dtype=torch.float64),
        1,
    ),
    "categorical": (lambda: bnnkit.Categorical(), lambda g: torch.randint(0, 3, (40,), generator=g), 3),
    "bernoulli": (lambda: bnnkit.Bernoulli(), lambda g: torch.randint(0, 2, (40,), generator=g).double(), 1),
}


@pytest.mark.parametrize("act", [torch.nn.Tanh, torch.nn.ReLU, torch.nn.Sigmoid])
@pytest.mark.parametrize("lik", list(LIKELIHOODS))
def test_stacked_gradient_equals_each_chains_autograd_gradient(act, lik):
    make_lik, make_y, out = LIKELIHOODS[lik]
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    prior = bnnkit.GaussianPrior(0.8, scales={"3.": 0.3})  # per-layer scales: the non-isotropic branch
    post = bnnkit.Posterior(_mlp(act, out, bias_last=lik != "bernoulli"), make_lik(), prior, num_data=200)
    target = post.target()
    assert target.stacked_grad is not None
    X, y = torch.randn(40, 4, generator=g, dtype=torch.float64), make_y(g)
    x = 0.5 * torch.randn(5, post.view.size, generator=g, dtype=torch.float64)
    Xb, yb = X.reshape(5, 8, 4), y.reshape(5, 8)
    lp, grad = target.stacked_grad(x, (Xb, yb), True)
    lp_shared, grad_shared = target.stacked_grad(x, (X, y), False)
    for k in range(5):
        lp_k, g_k = Target.autograd_value_and_grad(post.log_prob_flat, x[k], (Xb[k], yb[k]))
        torch.testing.assert_close(lp[k], lp_k)
        torch.testing.assert_close(grad[k], g_k)
        lp_k, g_k = Target.autograd_value_and_grad(post.log_prob_flat, x[k], (X, y))
        torch.testing.assert_close(lp_shared[k], lp_k)
        torch.testing.assert_close(grad_shared[k], g_k)


@pytest.mark.parametrize("act", [torch.nn.Tanh, torch.nn.ReLU, torch.nn.Sigmoid])
@pytest.mark.parametrize("lik", list(LIKELIHOODS))
@pytest.mark.parametrize("prior_scales", [None, {"3.": 0.3}])
def test_one_chain_gradient_equals_autograd(act, lik, prior_scales):
    """``target.value_and_grad`` of one position takes the hand-written MLP pass: the same value
    and gradient as autograd through the module, on a minibatch (scaled N/M) and on all rows."""
    make_lik, make_y, out = LIKELIHOODS[lik]
    g = torch.Generator().manual_seed(1)
    torch.manual_seed(1)
    prior = bnnkit.GaussianPrior(0.8, scales=prior_scales)
    post = bnnkit.Posterior(_mlp(act, out, bias_last=lik != "bernoulli"), make_lik(), prior, num_data=200)
    assert post._mlp is not None
    target = post.target()
    X, y = torch.randn(40, 4, generator=g, dtype=torch.float64), make_y(g)
    x = 0.5 * torch.randn(post.view.size, generator=g, dtype=torch.float64)
    for batch in ((X[:8], y[:8]), (X, y)):
        lp, grad = target.value_and_grad(x, batch)
        lp_ref, g_ref = Target.autograd_value_and_grad(post.log_prob_flat, x, batch)
        torch.testing.assert_close(lp, lp_ref)
        torch.testing.assert_close(grad, g_ref)
    # the scale N/M is the posterior's own, also for a copy with another N
    other = post.with_num_data(1000).target()
    lp, grad = other.value_and_grad(x, (X[:8], y[:8]))
    lp_ref, g_ref = Target.autograd_value_and_grad(post.with_num_data(1000).log_prob_flat, x, (X[:8], y[:8]))
    torch.testing.assert_close(grad, g_ref)
    assert not torch.allclose(grad, target.value_and_grad(x, (X[:8], y[:8]))[1])


def test_one_chain_float32_gradient_is_autograds_to_the_bit():
    """On the benchmark MLP in float32 the hand-written pass runs autograd's operations, so the
    SG samplers' chains are those of the autograd route."""
    torch.manual_seed(0)
    nn = torch.nn
    net = nn.Sequential(nn.Linear(13, 50), nn.Tanh(), nn.Linear(50, 50), nn.Tanh(), nn.Linear(50, 1))
    post = bnnkit.Posterior(net, bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0), num_data=506)
    X, y = torch.randn(32, 13), torch.randn(32)
    x = post.initial_position("module")
    lp, grad = post.target().value_and_grad(x, (X, y))
    lp_ref, g_ref = Target.autograd_value_and_grad(post.log_prob_flat, x, (X, y))
    assert torch.equal(grad, g_ref)
    torch.testing.assert_close(lp, lp_ref)


def test_a_patched_forward_leaves_the_hand_written_pass():
    """Flipout patches a layer's forward for one call: the gradient must be that of the patched
    network, so the posterior falls back to autograd through the modules."""
    torch.manual_seed(0)
    net = _mlp(torch.nn.Tanh, 1)
    post = bnnkit.Posterior(net, bnnkit.Gaussian(0.7), bnnkit.GaussianPrior(1.0))
    X, y = torch.randn(10, 4, dtype=torch.float64), torch.randn(10, dtype=torch.float64)
    x = post.initial_position("module")
    plain = post.target().value_and_grad(x, (X, y))[1]
    first = net[0]
    first.forward = lambda inp: torch.nn.functional.linear(2.0 * inp, first.weight, first.bias)
    try:
        patched = post.target().value_and_grad(x, (X, y))[1]
        ref = Target.autograd_value_and_grad(post.log_prob_flat, x, (X, y))[1]
    finally:
        del first.forward
    torch.testing.assert_close(patched, ref)
    assert not torch.allclose(patched, plain)


@pytest.mark.parametrize("chain_batched", [True, False])
def test_a_learnt_noise_takes_the_hand_written_pass_with_the_autograd_gradient(chain_batched, monkeypatch):
    """The default recipe's posterior: the Gaussian's log precision is the position's last entry;
    value and gradient (the noise's included, its Gamma prior too) are autograd's per chain."""
    torch.manual_seed(0)
    net = _mlp(torch.nn.Tanh, 1)
    lik = bnnkit.Gaussian(0.5, learn_noise=True, precision_prior=(2.0, 0.3))
    post = bnnkit.Posterior(net, lik, bnnkit.GaussianPrior(1.0), num_data=50)
    from bnnkit.core.mlp import StackedMLP

    calls = []
    real = StackedMLP._output_grad
    monkeypatch.setattr(
        StackedMLP, "_output_grad", lambda self, *a: calls.append(bool(self.extras)) or real(self, *a)
    )
    target = post.target().vectorized(chain_batched)
    k = 3
    x = torch.randn(k, post.view.size, dtype=torch.float64) * 0.5
    x[:, -1] = torch.tensor([-1.0, 0.5, 2.0], dtype=torch.float64)  # log precisions
    inputs = torch.randn(k, 10, 4, dtype=torch.float64)
    targets = torch.randn(k, 10, dtype=torch.float64)
    batch = (inputs, targets) if chain_batched else (inputs[0], targets[0])
    lp, grad = target.value_and_grad(x, batch)
    for c in range(k):
        rows = (inputs[c], targets[c]) if chain_batched else batch
        lp_ref, g_ref = Target.autograd_value_and_grad(post.log_prob_flat, x[c], rows)
        torch.testing.assert_close(lp[c], lp_ref)
        torch.testing.assert_close(grad[c], g_ref)
    assert grad[:, -1].abs().min() > 0  # the noise moves
    assert calls == [True]  # by the hand-written pass with the extras' closed form, not vmap


def test_the_chains_gaussian_gradient_in_closed_form_is_autograds():
    out, y = torch.randn(3, 7, 1, dtype=torch.float64), torch.randn(3, 7, dtype=torch.float64)
    log_tau = torch.tensor([0.1, -0.3, 1.2], dtype=torch.float64)
    for lik, learnt in [(bnnkit.Gaussian(0.4), False), (bnnkit.Gaussian(0.4, learn_noise=True), True)]:
        extra = {"log_precision": log_tau} if learnt else {}
        value, d_out, d_extra = lik.scaled_log_prob_chains_and_grad(out, y, extra, 2.5)
        for c in range(3):
            f = out[c].clone().requires_grad_(True)
            e = {k: v[c].clone().requires_grad_(True) for k, v in extra.items()}
            ref = lik.scaled_log_prob(f, y[c], e, 2.5) + lik.extra_log_prior(e)
            grads = torch.autograd.grad(ref, [f, *e.values()])
            torch.testing.assert_close(value[c], ref.detach())
            torch.testing.assert_close(d_out[c], grads[0])
            if learnt:
                torch.testing.assert_close(d_extra["log_precision"][c], grads[1])


def test_models_outside_the_route_use_vmap():
    lin = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    learnt = bnnkit.Posterior(lin, bnnkit.Gaussian(0.5), bnnkit.GaussianPrior(1.0, learn_precision=True))
    assert learnt.target().stacked_grad is None  # a learnt prior precision in the position
    gelu = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.GELU(), torch.nn.Linear(4, 1))
    assert (
        bnnkit.Posterior(gelu, bnnkit.Gaussian(0.5), bnnkit.GaussianPrior(1.0)).target().stacked_grad is None
    )
    conv = torch.nn.Sequential(torch.nn.Conv1d(1, 2, 3), torch.nn.Flatten(), torch.nn.Linear(2, 1))
    assert (
        bnnkit.Posterior(conv, bnnkit.Gaussian(0.5), bnnkit.GaussianPrior(1.0)).target().stacked_grad is None
    )
    from bnnkit.functional import FunctionalPosterior, GPPrior, MeasurementPoints

    gp = GPPrior("rbf", input_dim=3, jitter=1e-3)
    fp = FunctionalPosterior(lin, bnnkit.Gaussian(0.5), gp, MeasurementPoints(4, 0), torch.randn(10, 3))
    assert fp.target().stacked_grad is None
    # a prior without a closed-form gradient: autograd through vmap
    assert bnnkit.Posterior(lin, bnnkit.Gaussian(0.5), bnnkit.LaplacePrior(0.5)).target().stacked_grad is None
    # a closed-form gradient for one position only is mapped over the chains
    post = bnnkit.Posterior(lin.double(), bnnkit.Gaussian(0.5), bnnkit.GaussianPrior(0.5))
    post.bound_prior.stacked = False
    t = post.target()
    x = torch.randn(3, post.view.size, dtype=torch.float64)
    X, y = torch.randn(7, 3, dtype=torch.float64), torch.randn(7, dtype=torch.float64)
    lp, g = t.stacked_grad(x, (X, y), False)
    for k in range(3):
        torch.testing.assert_close(g[k], t.value_and_grad(x[k], (X, y))[1])
    # inputs that are not rows of features go to the vmap route
    assert t.stacked_grad(x, (X.unsqueeze(-1), y), False) is None


def test_vectorized_sgld_run_is_the_same_with_and_without_the_stacked_route():
    torch.manual_seed(1)
    X = torch.randn(60, 3, dtype=torch.float64)
    y = torch.sin(X.sum(1))
    net = torch.nn.Sequential(torch.nn.Linear(3, 10), torch.nn.Tanh(), torch.nn.Linear(10, 1)).double()
    post = bnnkit.Posterior(net, bnnkit.Gaussian(0.3), bnnkit.GaussianPrior(1.0), num_data=60)
    target = post.target()
    kernel = bnnkit.SGHMC(1e-3, friction=5.0)
    runs = []
    for t in (target, dataclasses.replace(target, stacked_grad=None)):
        k = kernel.build(t.vectorized(chain_batched=True))
        stream = ChainMinibatches(Minibatches(X, y, batch_size=10), 4)
        gen = torch.Generator().manual_seed(3)
        x0 = post.initial_position("module").expand(4, -1).clone()
        state = k.init(x0, stream.next(gen))
        for _ in range(25):
            state, _ = k.step(state, stream.next(gen), gen)
        runs.append(state.position)
    torch.testing.assert_close(runs[0], runs[1], rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(4, 32, 1), (3, 9, 2)])
def test_the_gaussians_row_gradient_in_closed_form_is_autograds_to_the_bit(dtype, shape):
    """The fixed-noise Gaussian's output gradient the stacked MLP now takes without autograd
    (``log_prob_rows_and_grad``) is the one autograd formed through ``log_prob_rows``, bit for bit,
    at minibatch scales N/M that round differently; learnt noise and other dtypes are refused."""
    g = torch.Generator().manual_seed(7)
    k, m = shape[:2]
    out = torch.randn(shape, generator=g, dtype=dtype) * 3
    y = torch.randn(shape if shape[-1] > 1 else shape[:-1], generator=g, dtype=dtype)
    for noise, scale in [(0.0147, 277 / 32), (0.3, 1.0), (1.7, 45730 / 32), (0.05, 13 / 7)]:
        lik = bnnkit.Gaussian(noise)
        f = out.detach().flatten(0, 1).requires_grad_(True)
        rows_ref = lik.log_prob_rows(f, y.flatten(0, 1), {})
        (g_ref,) = torch.autograd.grad((rows_ref.view(k, m).sum(1) * scale).sum(), f)
        rows, d = lik.log_prob_rows_and_grad(out.flatten(0, 1), y.flatten(0, 1), scale)
        assert torch.equal(rows, rows_ref.detach()) and torch.equal(d, g_ref), (noise, scale)
    assert bnnkit.Gaussian(0.3, learn_noise=True).log_prob_rows_and_grad(out, out, 2.0) is None
    assert bnnkit.Gaussian(0.3).log_prob_rows_and_grad(out.half(), out.half(), 2.0) is None
