"""Every structure against a dense reference on small nonlinear models, and the draws' moments."""

import pytest
import torch
from torch import nn

import bnnkit
from bnnkit.core.random import init_module_
from bnnkit.laplace import Laplace
from bnnkit.laplace.backend import curvlinops
from tests.helpers import assert_gaussian_matches


def mlp(d_in=3, hidden=5, out=3, seed=0):
    m = nn.Sequential(nn.Linear(d_in, hidden), nn.Tanh(), nn.Linear(hidden, out)).double()
    return init_module_(m, torch.Generator().manual_seed(seed))


def classification(n=50, seed=0, classes=3):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 3, generator=g, dtype=torch.float64)
    y = (X[:, 0] + X[:, 1] > 0).long() + (X[:, 2] > 0.5).long()
    return X, y.clamp_max(classes - 1)


def clf_posterior(**kw):
    return bnnkit.Posterior(mlp(), bnnkit.Categorical(), bnnkit.GaussianPrior(1.0), **kw)


def dense_precision(la, op_cls, **kw):
    """``H + m D`` densely from a curvlinops operator on the same module copy, as a reference."""
    from bnnkit.laplace.backend import batches, module_at, shaped_targets

    post = la._base
    module, params = module_at(post, la.map_params, la.subset)
    X, y = la._data
    loss = nn.CrossEntropyLoss(reduction="sum")
    op = op_cls(
        module,
        loss,
        params,
        batches(X, shaped_targets(post, module, X, y), 1000),
        check_deterministic=False,
        **kw,
    )
    H = op @ torch.eye(op.shape[0], dtype=torch.float64)
    return H + torch.diag(la._log_m.exp() * la._b)


@pytest.fixture(scope="module")
def fitted():
    post = clf_posterior()
    data = classification()
    return {st: Laplace(post, structure=st).fit(data, steps=300, lr=0.05) for st in ("full", "diag", "kron")}


def test_full_ggn_is_curvlinops_ggn(fitted):
    la = fitted["full"]
    ref = dense_precision(la, curvlinops().GGNLinearOperator)
    assert torch.allclose(torch.linalg.inv(la.covariance()), ref, atol=1e-8)


def test_diag_is_the_diagonal_of_the_full_ggn(fitted):
    full, diag = fitted["full"], fitted["diag"]
    assert torch.equal(full.mean, diag.mean)  # same seed, same MAP loop
    prec_full = torch.linalg.inv(full.covariance())
    assert torch.allclose(1 / diag.covariance().diagonal(), prec_full.diagonal(), rtol=1e-8)


def test_kron_is_curvlinops_kfac_with_joint_weight_and_bias(fitted):
    la = fitted["kron"]
    cl = curvlinops()
    ref = dense_precision(
        la, cl.KFACLinearOperator, fisher_type=cl.FisherType.TYPE2, separate_weight_and_bias=False
    )
    assert torch.allclose(torch.linalg.inv(la.covariance()), ref, atol=1e-8)


def test_empirical_fisher_is_the_sum_of_squared_per_example_gradients():
    post = clf_posterior()
    X, y = classification()
    la = Laplace(post, structure="full", curvature="ef").fit((X, y), steps=200, lr=0.05)
    net = la.map_params
    view = post.net_view

    def nll(theta, x, t):
        out = post.forward(view.unravel(theta), x[None])
        return nn.functional.cross_entropy(out, t[None], reduction="sum")

    theta = view.ravel(net)
    G = torch.func.vmap(torch.func.grad(nll), in_dims=(None, 0, 0))(theta, X, y)
    assert torch.allclose(
        torch.linalg.inv(la.covariance()), G.T @ G + torch.eye(len(theta), dtype=G.dtype), atol=1e-8
    )
    diag = Laplace(post, structure="diag", curvature="ef").fit((X, y), map=net)
    assert torch.allclose(1 / diag.covariance().diagonal(), (G * G).sum(0) + 1, rtol=1e-8)


def test_lowrank_keeps_the_top_eigenpairs_of_the_ggn(fitted):
    full = fitted["full"]
    lr = Laplace(full._base, structure="lowrank", rank=6).fit(full._data, map=full.map_params, seed=3)
    e_full = torch.linalg.eigvalsh(
        torch.linalg.inv(full.covariance()) - torch.eye(full.num_params, dtype=torch.float64)
    )
    assert torch.allclose(lr._structure.e, e_full.flip(0)[:6], rtol=1e-4)


def test_kfac_on_a_conv_net_matches_curvlinops():
    net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(2 * 4 * 4, 3)).double()
    init_module_(net, torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(1)
    X = torch.randn(20, 1, 6, 6, generator=g, dtype=torch.float64)
    y = torch.randint(3, (20,), generator=g)
    post = bnnkit.Posterior(net, bnnkit.Categorical(), bnnkit.GaussianPrior(1.0))
    la = Laplace(post, structure="kron").fit((X, y), map="module")
    cl = curvlinops()
    ref = dense_precision(
        la, cl.KFACLinearOperator, fisher_type=cl.FisherType.TYPE2, separate_weight_and_bias=False
    )
    assert torch.allclose(torch.linalg.inv(la.covariance()), ref, atol=1e-8)
    pred = la.predict(X)
    assert pred.probs.shape == (20, 3)


@pytest.mark.parametrize("structure", ["full", "kron", "diag"])
def test_draws_have_the_laplace_mean_and_covariance(fitted, structure):
    la = fitted[structure]
    s = la.sample(4000, seed=5)
    assert s.positions.shape == (1, 4000, la._base.view.size)
    assert_gaussian_matches(s.positions, la.mean, la.covariance())


def test_lowrank_draws_have_the_lowrank_covariance(fitted):
    full = fitted["full"]
    la = Laplace(full._base, structure="lowrank", rank=5).fit(full._data, map=full.map_params)
    assert_gaussian_matches(la.sample(4000, seed=2).positions, la.mean, la.covariance())


def test_glm_variance_is_j_sigma_jt(fitted):
    from bnnkit.laplace.curvature import output_and_jacobian

    X = classification(n=7, seed=9)[0]
    for la in fitted.values():
        f, J = output_and_jacobian(la._base, la.map_params, la.subset, X)
        V = la._structure.functional_variance(J, la._lik_scale(None), la._log_m.exp())
        assert torch.allclose(V, J @ la.covariance() @ J.transpose(1, 2), atol=1e-10)


@pytest.mark.parametrize("subset", [["0.weight", "2."], lambda n: n.endswith("bias")])
def test_kron_on_partial_layers_matches_curvlinops(fitted, subset):
    full = fitted["full"]
    la = Laplace(full._base, subset=subset, structure="kron").fit(full._data, map=full.map_params)
    cl = curvlinops()
    ref = dense_precision(
        la, cl.KFACLinearOperator, fisher_type=cl.FisherType.TYPE2, separate_weight_and_bias=False
    )
    assert torch.allclose(torch.linalg.inv(la.covariance()), ref, atol=1e-8)


def test_kron_splits_weight_and_bias_when_their_prior_precisions_differ():
    post = bnnkit.Posterior(mlp(), bnnkit.Categorical(), bnnkit.GaussianPrior(1.0, scales={"0.bias": 3.0}))
    la = Laplace(post, structure="kron").fit(classification(), map="module")
    cl = curvlinops()
    ref = dense_precision(
        la, cl.KFACLinearOperator, fisher_type=cl.FisherType.TYPE2, separate_weight_and_bias=True
    )
    assert torch.allclose(torch.linalg.inv(la.covariance()), ref, atol=1e-8)
