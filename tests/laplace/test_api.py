"""Subsets, Samples integration (predict, metrics, ArviZ), warm starts, errors, reproducibility."""

import math

import pytest
import torch
from torch import nn

import bnnkit
from bnnkit.core.errors import BnnkitError
from bnnkit.core.random import init_module_
from bnnkit.data import Minibatches
from bnnkit.laplace import Laplace, fit_laplace
from bnnkit.predict import predict
from bnnkit.predict.metrics import expected_calibration_error, rmse


def regression(n=60, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.linspace(-2, 2, n, dtype=torch.float64)[:, None]
    y = torch.sin(2 * X[:, 0]) + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    return X, y


def reg_posterior(**kw):
    m = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1)).double()
    init_module_(m, torch.Generator().manual_seed(0))
    return bnnkit.Posterior(m, bnnkit.Gaussian(0.3), bnnkit.GaussianPrior(1.0), **kw)


DATA = regression()


@pytest.fixture(scope="module")
def la_all():
    return Laplace(reg_posterior(), structure="kron").fit(DATA, steps=1500, lr=0.02).optimize_marglik()


def test_last_layer_and_named_subsets_cover_only_their_weights(la_all):
    post = la_all._base
    last = Laplace(post, subset="last_layer", structure="full").fit(DATA, map=la_all.map_params)
    assert last.subset == ("2.weight", "2.bias") and last.num_params == 17
    named = Laplace(post, subset=["0.weight"], structure="diag").fit(DATA, map=la_all.map_params)
    assert named.subset == ("0.weight",)
    pred_fn = Laplace(post, subset=lambda n: n.endswith("bias"), structure="diag")
    assert pred_fn.subset == ("0.bias", "2.bias")
    # weights outside the subset sit at the MAP in every draw
    s = last.sample(20, seed=0)
    fixed = post.net_view.ravel(la_all.map_params)[:32]
    assert torch.equal(s.positions[0, :, :32], fixed.expand(20, -1))
    assert not torch.equal(s.positions[0, 0, 32:], s.positions[0, 1, 32:])


def test_a_subset_inside_a_bayesian_last_layer_posterior():
    post = reg_posterior(bayesian=["2."])
    la = Laplace(post, structure="full").fit(DATA, steps=500, lr=0.02)
    assert la.subset == ("2.weight", "2.bias")
    assert la.sample(3).positions.shape == (1, 3, 17)
    with pytest.raises(BnnkitError, match="matches no Bayesian parameter"):
        Laplace(post, subset=["0.weight"])


def test_predict_metrics_and_arviz_take_the_draws(la_all):
    s = la_all.sample(200, seed=3, num_chains=2)
    assert isinstance(s, bnnkit.Samples) and s.positions.shape[:2] == (2, 200)
    sampled = predict(la_all.posterior, s, DATA[0])
    assert math.isfinite(sampled.nll(DATA[1]))
    glm = la_all.predict(DATA[0])
    assert rmse(glm.mean, DATA[1]) < 0.2 and glm.nll(DATA[1]) < 0.0
    idata = s.to_arviz()
    assert "laplace_log_q" in idata.sample_stats
    # the network is linear in its last layer: there the sampled predictive is the GLM one
    last = Laplace(la_all.posterior, subset="last_layer", structure="full").fit(DATA, map=la_all.map_params)
    sampled = predict(last.posterior, last.sample(4000, seed=1), DATA[0])
    glm = last.predict(DATA[0])
    assert torch.allclose(sampled.mean, glm.mean, atol=4 * float(glm.epistemic_variance.max().sqrt()) / 60)
    assert torch.allclose(sampled.variance, glm.variance, rtol=0.1)


def test_glm_regression_variance_is_epistemic_plus_noise(la_all):
    glm = la_all.predict(DATA[0])
    assert torch.allclose(glm.variance, glm.epistemic_variance + la_all.noise**2)
    assert (glm.epistemic_variance > 0).all()
    lo, hi = glm.interval(0.95)
    assert ((DATA[1] > lo) & (DATA[1] < hi)).double().mean() > 0.85


def test_sghmc_warm_starts_from_laplace_draws(la_all):
    post = la_all.posterior.with_num_data(60)
    stream = Minibatches(*DATA, batch_size=20)
    run = dict(num_samples=5, num_chains=2, seed=1, progress=False, init=la_all.init())
    a = bnnkit.sample(bnnkit.SGHMC(1e-3, friction=10.0), post, stream, **run)
    b = bnnkit.sample(bnnkit.SGHMC(1e-3, friction=10.0), post, Minibatches(*DATA, batch_size=20), **run)
    assert torch.equal(a.positions, b.positions)
    sd = la_all.covariance().diagonal().sqrt()
    z = (a.positions[:, 0] - la_all.mean) / sd
    assert z.abs().max() < 6  # the chains start within the Laplace posterior
    hmc = bnnkit.sample(
        bnnkit.HMC(step_size=1e-3, num_steps=3),
        la_all.posterior,
        DATA,
        num_samples=2,
        progress=False,
        init=la_all.init(draw=False),
    )
    assert hmc.positions.shape == (1, 2, 49)


def test_classification_fit_laplace_and_ece():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(80, 2, generator=g, dtype=torch.float64)
    y = (X[:, 0] * X[:, 1] > 0).double()
    m = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1)).double()
    init_module_(m, torch.Generator().manual_seed(1))
    post = bnnkit.Posterior(m, bnnkit.Bernoulli(), bnnkit.GaussianPrior(1.0))
    la, s = fit_laplace(post, (X, y), structure="kron", steps=800, lr=0.05, num_samples=50)
    probs = la.predict(X).probs
    assert probs.shape == (80, 2) and torch.allclose(probs.sum(-1), torch.ones(80, dtype=torch.float64))
    ece, _ = expected_calibration_error(predict(la.posterior, s, X).probs, y.long())
    assert 0 <= ece < 0.3


def test_no_global_random_state_is_touched(la_all):
    post = reg_posterior()  # building nn.Linear draws from the global RNG: before the snapshot
    state = torch.get_rng_state()
    la = Laplace(post, structure="lowrank", rank=4).fit(DATA, steps=20, init="prior", batch_size=10)
    la.optimize_marglik()
    la.sample(5)
    la.predict(DATA[0][:3])
    assert torch.equal(state, torch.get_rng_state())


def test_same_seed_same_laplace():
    kw = dict(steps=50, batch_size=15)
    a = Laplace(reg_posterior(num_data=60), structure="lowrank", rank=3).fit(DATA, seed=4, **kw)
    b = Laplace(reg_posterior(num_data=60), structure="lowrank", rank=3).fit(DATA, seed=4, **kw)
    assert torch.equal(a.sample(5, seed=1).positions, b.sample(5, seed=1).positions)


def test_bad_input_gets_a_clear_error(la_all):
    post = reg_posterior()
    with pytest.raises(BnnkitError, match="unknown Hessian structure 'kfac'"):
        Laplace(post, structure="kfac")
    with pytest.raises(BnnkitError, match="unknown curvature"):
        Laplace(post, curvature="hessian")
    with pytest.raises(BnnkitError, match="matches no Bayesian parameter"):
        Laplace(post, subset=["3."])
    with pytest.raises(BnnkitError, match="selects none"):
        Laplace(post, subset=lambda n: False)
    lap = bnnkit.Posterior(post.module, bnnkit.Gaussian(0.3), bnnkit.LaplacePrior(1.0))
    with pytest.raises(BnnkitError, match="needs a GaussianPrior"):
        Laplace(lap)
    with pytest.raises(BnnkitError, match=r"call \.fit\(data\) first"):
        Laplace(post).predict(DATA[0])
    with pytest.raises(BnnkitError, match="not Gaussian"):
        Laplace(bnnkit.Posterior(nn.Linear(2, 2).double(), bnnkit.Categorical(), bnnkit.GaussianPrior())).fit(
            (
                torch.randn(4, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0)),
                torch.tensor([0, 1, 0, 1]),
            ),
            map="module",
        ).optimize_marglik(noise=True)
    with pytest.raises(BnnkitError, match="rank must lie in"):
        Laplace(post, structure="lowrank", rank=500).fit(DATA, map="module")
    with pytest.raises(BnnkitError, match="link must be"):
        la_all.predict(DATA[0], link="logit")
    norm = nn.Sequential(nn.Linear(1, 4), nn.LayerNorm(4), nn.Linear(4, 1)).double()
    with pytest.raises(BnnkitError, match="Linear and Conv2d layers only"):
        Laplace(bnnkit.Posterior(norm, bnnkit.Gaussian(0.3), bnnkit.GaussianPrior()), structure="kron").fit(
            DATA, map="module"
        )


def test_a_missing_curvlinops_names_the_install_command(monkeypatch):
    import importlib

    real = importlib.import_module

    def fake(name, *a, **k):
        if name == "curvlinops":
            raise ImportError("No module named 'curvlinops'")
        return real(name, *a, **k)

    monkeypatch.setattr(importlib, "import_module", fake)
    with pytest.raises(BnnkitError, match=r"pip install --no-deps curvlinops-for-pytorch==3\.0\.1"):
        Laplace(reg_posterior(), structure="full").fit(DATA, map="module")


def test_a_map_given_as_dict_or_flat_vector(la_all):
    post = la_all._base
    flat = post.net_view.ravel(la_all.map_params)
    a = Laplace(post, structure="diag").fit(DATA, map=flat)
    b = Laplace(post, structure="diag").fit(DATA, map=la_all.map_params)
    assert torch.equal(a.mean, b.mean) and torch.equal(a.covariance(), b.covariance())
    with pytest.raises(BnnkitError, match="missing key '2.bias'"):
        Laplace(post).fit(DATA, map={k: v for k, v in la_all.map_params.items() if k != "2.bias"})
    with pytest.raises(BnnkitError, match="flat MAP must be a vector of 49"):
        Laplace(post).fit(DATA, map=flat[:10])


def test_fit_takes_a_dataloader_and_numpy_arrays_as_the_tensors(la_all):
    from torch.utils.data import DataLoader, TensorDataset

    post = la_all._base
    ref = Laplace(post, structure="diag").fit(DATA, map=la_all.map_params)
    loader = DataLoader(TensorDataset(*DATA), batch_size=16, shuffle=False)
    for data in (loader, (DATA[0].numpy(), DATA[1].numpy())):
        la = Laplace(post, structure="diag").fit(data, map=la_all.map_params)
        assert torch.equal(la.mean, ref.mean) and torch.allclose(la.covariance(), ref.covariance())
    # the MAP loop sees the same rows: the same fit, step for step
    a = Laplace(reg_posterior(), structure="diag").fit(DATA, steps=20)
    b = Laplace(reg_posterior(), structure="diag").fit(loader, steps=20)
    assert torch.equal(a.mean, b.mean)
