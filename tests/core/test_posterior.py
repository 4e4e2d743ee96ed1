import torch
from torch.distributions import Normal

import bnnkit
from bnnkit.core.target import Target


def _net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1)).double()


def _data(n=12):
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 2, generator=g, dtype=torch.float64), torch.randn(
        n, generator=g, dtype=torch.float64
    )


def test_log_prob_is_likelihood_plus_prior_with_minibatch_scaling():
    net = _net()
    X, y = _data()
    post = bnnkit.Posterior(net, bnnkit.Gaussian(0.5), bnnkit.GaussianPrior(2.0), num_data=48)
    params = {k: v.detach() for k, v in net.named_parameters()}
    ll = Normal(net(X).squeeze(-1), 0.5).log_prob(y).sum()
    lp = sum(Normal(0.0, 2.0).log_prob(p).sum() for p in params.values())
    assert torch.allclose(post.log_prob(params, (X, y)), 48 / 12 * ll + lp)


def test_gradient_paths_agree_with_torch_func_grad():
    net = _net()
    X, y = _data()
    post = bnnkit.Posterior(
        net, bnnkit.Gaussian(0.5, learn_noise=True), bnnkit.GaussianPrior(1.5), num_data=30
    )
    x = post.initial_position() + 0.05
    g_dict = post.grad_log_prob(post.view.unravel(x), (X, y))  # torch.func.grad over the dict
    _, g_fast = post.target().value_and_grad(x, (X, y))
    _, g_plain = Target.autograd_value_and_grad(post.log_prob_flat, x, (X, y))
    assert torch.allclose(post.view.ravel(g_dict), g_fast)
    assert torch.allclose(g_plain, g_fast)


def test_selected_parameters_only_last_layer_bayesian():
    net = _net()
    X, y = _data()
    post = bnnkit.Posterior(net, bnnkit.Gaussian(0.5), bnnkit.GaussianPrior(1.0), bayesian=["2."])
    assert post.view.names == ("2.weight", "2.bias")
    x = post.initial_position()
    # the fixed first layer is used as is; the module itself is never modified
    before = [p.clone() for p in net.parameters()]
    out = post.forward(post.split(x * 0)[0], X)
    assert torch.allclose(out, torch.zeros_like(out))
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters()))
    s = bnnkit.sample(bnnkit.HMC(num_steps=3), post, (X, y), num_samples=5, num_warmup=5, progress=False)
    assert s.params["2.weight"].shape == (1, 5, 1, 4)


def test_buffers_pass_through():
    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 1).double()
            self.register_buffer("scale", torch.tensor(3.0, dtype=torch.float64))

        def forward(self, x):
            return self.lin(x) * self.scale

    m = Scaled()
    X, y = _data()
    post = bnnkit.Posterior(m, bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0))
    x = post.initial_position()
    assert torch.allclose(post.forward(post.split(x)[0], X), m(X))


def test_tied_weights_fall_back_to_functional_call():
    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(3, 3, bias=False).double()
            self.b = torch.nn.Linear(3, 3, bias=False).double()
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(torch.tanh(self.a(x))).sum(-1)

    m = Tied()
    post = bnnkit.Posterior(m, bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0))
    assert not post._call.fast
    X = torch.randn(4, 3, dtype=torch.float64)
    w = torch.randn(9, dtype=torch.float64)
    out = post.forward({"a.weight": w.view(3, 3)}, X)
    ref = torch.tanh(X @ w.view(3, 3).T) @ w.view(3, 3).T
    assert torch.allclose(out, ref.sum(-1))


def test_flat_view_round_trip_with_leading_dims():
    net = _net()
    post = bnnkit.Posterior(net, bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0))
    x = torch.randn(3, 5, post.view.size, dtype=torch.float64)
    p = post.view.unravel(x)
    assert p["0.weight"].shape == (3, 5, 4, 2)
    assert torch.equal(post.view.ravel(p), x)


def test_dropout_in_training_mode_warns_and_eval_mode_does_not():
    import warnings

    import pytest

    net = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Dropout(0.1), torch.nn.Linear(4, 1))
    with pytest.warns(UserWarning, match="training mode and contains Dropout"):
        bnnkit.Posterior(net, bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0))
    net.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bnnkit.Posterior(net, bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0))
