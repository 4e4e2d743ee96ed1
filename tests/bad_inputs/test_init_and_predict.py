"""Bad inputs at the init, predict, metric and data doors (issue 45, items 2, 3 and 7).

Every bad case asserts the error class (a :class:`BnnkitError`) and that the message names the
problem (the key, the expected shape, the rows); the positive cases check that what a user holds
(NumPy arrays, float64 or integer inputs, a scalar for a shape-(1,) parameter, a DataLoader)
still works and gives the same answer as the tensors would.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import bnnkit
from bnnkit.core.errors import BnnkitError
from bnnkit.core.flat import FlatView
from bnnkit.core.random import init_module_
from bnnkit.core.warm_start import map_init
from bnnkit.data import Minibatches
from bnnkit.laplace import Laplace
from bnnkit.predict import (
    accuracy,
    brier_score,
    expected_calibration_error,
    ood_auroc,
    predict,
    predictive_entropy,
    rmse,
)
from bnnkit.predict.predictive import ClassificationPredictive
from bnnkit.vi.dropout import MCDropout
from bnnkit.vi.layers import BayesianLinear, predict_bayesian_layers

G = torch.Generator().manual_seed(0)
X = torch.randn(20, 3, generator=G)
Y = torch.sin(X[:, 0]) + 0.1 * torch.randn(20, generator=G)
LABELS = (X[:, 0] > 0).long() + (X[:, 1] > 0).long()  # three classes


def _mlp(out: int = 1) -> nn.Module:
    m = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, out))
    init_module_(m, torch.Generator().manual_seed(1))
    return m


REG = bnnkit.Posterior(_mlp(), bnnkit.Gaussian(0.3), bnnkit.GaussianPrior(1.0))
CLS = bnnkit.Posterior(_mlp(3), bnnkit.Categorical(), bnnkit.GaussianPrior(1.0))
NOISY = bnnkit.Posterior(_mlp(), bnnkit.Gaussian(0.3, learn_noise=True), bnnkit.GaussianPrior(1.0))
DRAWS = torch.stack([REG.initial_position("prior", torch.Generator().manual_seed(s)) for s in range(4)])
CLS_DRAWS = torch.stack([CLS.initial_position("prior", torch.Generator().manual_seed(s)) for s in range(4)])
GOOD = {n: p.detach().clone() for n, p in REG.module.named_parameters()}


def _with(**changes):
    d = dict(GOOD)
    for k, v in changes.items():
        k = k.replace("__", ".")
        if v is None:
            d.pop(k)
        else:
            d[k] = v
    return d


@pytest.fixture(scope="module")
def laplace():
    return Laplace(REG, structure="diag").fit((X, Y), map="module")


def _raises(fn, *fragments):
    """``fn()`` raises a BnnkitError whose message holds every fragment (literally)."""
    with pytest.raises(BnnkitError) as info:
        fn()
    msg = str(info.value)
    for f in fragments:
        assert f in msg, f"{f!r} not in {msg!r}"
    return msg


# ---------------------------------------------------------------------------------------- init
BAD_INITS = {
    "transposed weight": (
        _with(**{"0__weight": GOOD["0.weight"].T.contiguous()}),
        ["'0.weight' has shape (3, 8), expected (8, 3)", "transposed"],
    ),
    "extra key": (_with(extra=torch.zeros(2)), ["unknown key 'extra'"]),
    "misspelled key": (
        {**_with(**{"0__weight": None}), "0.wieght": GOOD["0.weight"]},
        ["unknown key '0.wieght'", "did you mean '0.weight'", "missing key '0.weight'"],
    ),
    "missing key": (_with(**{"2__bias": None}), ["missing key '2.bias'", "2.bias (1,)"]),
    "wrong size": (_with(**{"0__bias": torch.zeros(9)}), ["'0.bias' has shape (9,), expected (8,)"]),
    "extra dimension": (
        _with(**{"0__weight": GOOD["0.weight"][None]}),
        ["'0.weight' has shape (1, 8, 3), expected (8, 3)", "dimension of size 1"],
    ),
    "flattened weight": (
        _with(**{"0__weight": GOOD["0.weight"].reshape(-1)}),
        ["'0.weight' has shape (24,), expected (8, 3)", "same number of elements"],
    ),
    "boolean value": (_with(**{"0__bias": torch.ones(8, dtype=torch.bool)}), ["'0.bias'", "torch.bool"]),
    "string value": (_with(**{"0__bias": "zeros"}), ["'0.bias' is a str"]),
    "all problems at once": (
        {**_with(**{"0__weight": GOOD["0.weight"].T, "2__bias": None}), "bias": torch.zeros(1)},
        ["unknown key 'bias'", "missing key '2.bias'", "'0.weight' has shape (3, 8), expected (8, 3)"],
    ),
}


@pytest.mark.parametrize("case", list(BAD_INITS))
def test_a_bad_init_dict_names_every_problem_in_one_error(case):
    init, fragments = BAD_INITS[case]
    msg = _raises(lambda: REG.view.ravel(init, what="init"), "init does not match", *fragments)
    assert "0.weight (8, 3), 0.bias (8,), 2.weight (1, 8), 2.bias (1,)" in msg  # what to pass


def test_a_bad_init_reaching_sample_is_refused_before_any_step():
    bad = _with(**{"0__weight": GOOD["0.weight"].T.contiguous()})
    _raises(
        lambda: bnnkit.sample(bnnkit.HMC(0.01, 2), REG, (X, Y), init=bad, num_samples=2, progress=False),
        "'0.weight' has shape (3, 8), expected (8, 3)",
    )


def test_a_missing_likelihood_parameter_says_where_to_find_it():
    _raises(lambda: NOISY.view.ravel(GOOD), "missing key 'likelihood.log_precision'", "initial_extras")


def test_an_init_that_is_not_a_dict_is_refused():
    _raises(lambda: REG.view.ravel([GOOD["0.weight"]], what="init"), "init must be a dict", "got list")


def test_a_map_dict_for_laplace_is_checked_by_name_and_shape():
    bad = _with(**{"2__weight": GOOD["2.weight"].T})
    _raises(lambda: Laplace(REG, structure="diag").fit((X, Y), map=bad), "the MAP dict", "'2.weight'")


def test_good_init_dicts_still_work_in_every_form():
    view = REG.view
    flat = view.ravel(GOOD)
    # NumPy arrays and integer tensors become the view's dtype
    as_np = {k: v.numpy() for k, v in GOOD.items()}
    assert torch.equal(view.ravel(as_np), flat) and view.ravel(as_np).dtype == flat.dtype
    ints = {k: torch.zeros(v.shape, dtype=torch.int64) for k, v in GOOD.items()}
    assert view.ravel(ints).dtype == flat.dtype
    # stacked [K, ...] dicts keep their batch dimensions and round-trip through unravel
    stacked = {k: torch.stack([v, 2 * v]) for k, v in GOOD.items()}
    both = view.ravel(stacked)
    assert both.shape == (2, view.size) and torch.equal(both[1], 2 * flat)
    assert all(torch.equal(a, stacked[k]) for k, a in view.unravel(both).items())
    # one number: a scalar for a (1,) parameter (and a (1,) for a scalar) is lossless, so accepted
    scalar_bias = _with(**{"2__bias": GOOD["2.bias"].reshape(())})
    assert torch.equal(view.ravel(scalar_bias), flat)
    full = {**GOOD, "likelihood.log_precision": torch.tensor(0.5)}
    x = NOISY.view.ravel(full)
    assert x.shape == (NOISY.view.size,) and float(x[-1]) == 0.5
    scalars = FlatView({"a": torch.zeros(()), "b": torch.zeros(2)})
    assert scalars.ravel({"a": torch.ones(1), "b": torch.ones(2)}).shape == (3,)
    # through sample(): the same run from a dict and from NumPy arrays
    kw = dict(num_samples=2, progress=False, seed=3)
    a = bnnkit.sample(bnnkit.HMC(0.01, 2), NOISY, (X, Y), init=full, **kw)
    b = bnnkit.sample(
        bnnkit.HMC(0.01, 2), NOISY, (X, Y), init={k: np.asarray(v) for k, v in full.items()}, **kw
    )
    assert torch.equal(a.positions, b.positions)


# ---------------------------------------------------------------------------------------- predict
NAN_X = X.clone()
NAN_X[4, 1] = float("nan")
INF_X = X.clone()
INF_X[7, 0] = float("inf")
BAD_INPUTS = {
    "too few features": (X[:, :2], ["expects inputs with 3 features (shape [*, 3]); got shape (20, 2)"]),
    "too many features": (torch.randn(5, 4), ["3 features", "got shape (5, 4)"]),
    "a single row without its batch dimension": (X[0], ["got shape (3,)", "[1, 3]"]),
    "NumPy with the wrong features": (np.zeros((6, 5)), ["3 features", "got shape (6, 5)"]),
    "NaN": (NAN_X, ["NaN or inf in 1 of 20 rows (rows 4)"]),
    "inf": (INF_X, ["rows 7"]),
    "booleans": (X > 0, ["booleans"]),
    "complex": (X.to(torch.complex64), ["complex"]),
    "a string": ("X", ["torch.Tensor or a NumPy array", "got str"]),
    "empty": (torch.zeros(0, 3), ["empty"]),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_predict_refuses_bad_inputs_with_a_clear_message(case):
    inputs, fragments = BAD_INPUTS[case]
    _raises(lambda: predict(REG, DRAWS, inputs), *fragments)


@pytest.mark.parametrize(
    "case", ["too few features", "a single row without its batch dimension", "NaN", "booleans"]
)
def test_laplace_predict_refuses_bad_inputs(laplace, case):
    inputs, fragments = BAD_INPUTS[case]
    _raises(lambda: laplace.predict(inputs), *fragments)
    _raises(lambda: laplace.predict(inputs, method="sample", num_samples=3), *fragments)


def test_laplace_predict_refuses_an_unknown_method(laplace):
    _raises(lambda: laplace.predict(X, method="exact"), "method must be 'glm' or 'sample'", "'exact'")


def test_predict_refuses_samples_that_are_not_draws_of_this_posterior():
    _raises(lambda: predict(REG, [DRAWS], X), "samples must be", "got list")
    _raises(lambda: predict(REG, DRAWS[:, :5], X), "draws have 5 parameters", "the posterior has 41")


def test_vi_predict_doors_check_their_inputs():
    layers = nn.Sequential(BayesianLinear(3, 4), nn.Tanh(), BayesianLinear(4, 1))
    _raises(
        lambda: predict_bayesian_layers(layers, X[:, :2], bnnkit.Gaussian(0.3), num_samples=2),
        "expects inputs with 3 features",
        "got shape (20, 2)",
    )
    _raises(lambda: predict_bayesian_layers(layers, NAN_X, bnnkit.Gaussian(0.3), num_samples=2), "rows 4")
    net = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Dropout(0.1), nn.Linear(8, 1))
    fit = MCDropout(num_epochs=1).fit(net, (X, Y), likelihood=bnnkit.Gaussian(0.3), progress=False)
    _raises(lambda: fit.predict(torch.randn(4, 7), num_samples=2), "3 features", "got shape (4, 7)")
    _raises(lambda: fit.predict(INF_X, num_samples=2), "rows 7")
    # and take what the user holds
    assert torch.allclose(fit.predict(X.numpy(), num_samples=2).mean, fit.predict(X, num_samples=2).mean)


def test_predict_takes_numpy_float64_and_integer_inputs():
    ref = predict(REG, DRAWS, X).mean
    for inputs in (X.numpy(), X.double(), X.double().numpy(), X.tolist()):
        out = predict(REG, DRAWS, inputs).mean
        assert out.dtype == torch.float32 and torch.allclose(out, ref)
    ints = torch.randint(-2, 3, (5, 3), generator=torch.Generator().manual_seed(0))
    assert torch.allclose(predict(REG, DRAWS, ints).mean, predict(REG, DRAWS, ints.float()).mean)


def test_laplace_predict_takes_numpy_and_float64(laplace):
    ref = laplace.predict(X)
    got = laplace.predict(X.double().numpy())
    assert torch.allclose(got.mean, ref.mean) and torch.allclose(got.variance, ref.variance)


def test_a_model_whose_first_registered_layer_is_not_its_first_is_not_refused():
    class HeadFirst(nn.Module):
        def __init__(self):
            super().__init__()
            self.head = nn.Linear(8, 1)  # registered first, applied last
            self.body = nn.Linear(3, 8)

        def forward(self, x):
            return self.head(torch.tanh(self.body(x)))

    post = bnnkit.Posterior(HeadFirst(), bnnkit.Gaussian(0.3), bnnkit.GaussianPrior(1.0))
    draws = post.initial_position("prior", torch.Generator().manual_seed(0))[None]
    assert predict(post, draws, X).mean.shape == (20,)
    _raises(lambda: predict(post, draws, torch.randn(4, 5)), "expects inputs with 8 features", "(4, 5)")


# ---------------------------------------------------------------------------------------- metrics
P3 = torch.softmax(torch.randn(6, 3, generator=G), -1)
L3 = torch.tensor([0, 1, 2, 2, 1, 0])
BAD_METRICS = {
    "rmse: lengths differ": (lambda: rmse(torch.zeros(3), torch.zeros(2)), ["3 predictions but 2 targets"]),
    "rmse: shapes hold different counts": (
        lambda: rmse(torch.zeros(3, 2), torch.zeros(3)),
        ["shape (3, 2)", "shape (3,)", "one prediction per target"],
    ),
    "rmse: NaN target": (
        lambda: rmse(torch.zeros(4), torch.tensor([0.0, math.nan, 1.0, 2.0])),
        ["the targets contain NaN or inf in 1 of 4 rows (rows 1)"],
    ),
    "rmse: NaN prediction": (
        lambda: rmse(torch.tensor([0.0, 0.0, math.inf]), torch.zeros(3)),
        ["the predictions contain NaN or inf", "rows 2"],
    ),
    "rmse: not numbers": (lambda: rmse("mean", torch.zeros(3)), ["torch.Tensor or a NumPy array", "str"]),
    "accuracy: label above the classes": (
        lambda: accuracy(P3, torch.tensor([0, 1, 2, 3, 1, 0])),
        ["outside the class range [0, 2]", "rows 3"],
    ),
    "accuracy: negative label": (lambda: accuracy(P3, -L3 - 1), ["outside the class range"]),
    "accuracy: fractional label": (
        lambda: accuracy(P3, torch.tensor([0, 1.5, 2, 2, 1, 0])),
        ["whole class indices", "row 1 holds 1.5"],
    ),
    "accuracy: one-hot labels": (
        lambda: accuracy(P3, torch.nn.functional.one_hot(L3, 3)),
        ["class indices of shape [N]", "one-hot"],
    ),
    "accuracy: 1-D probabilities": (lambda: accuracy(P3[:, 0], L3), ["shape [N, C]", "got shape (6,)"]),
    "accuracy: lengths differ": (lambda: accuracy(P3, L3[:4]), ["6 predictions but 4 targets"]),
    "accuracy: NaN label": (
        lambda: accuracy(P3, torch.tensor([0, 1, math.nan, 2, 1, 0])),
        ["the labels contain NaN", "rows 2"],
    ),
    "ece: logits for probabilities": (
        lambda: expected_calibration_error(torch.randn(6, 3, generator=G) * 5, L3),
        ["class probabilities", "Logits?"],
    ),
    "ece: no bins": (lambda: expected_calibration_error(P3, L3, num_bins=0), ["num_bins", ">= 1"]),
    "brier: label out of range": (
        lambda: brier_score(P3, torch.tensor([0, 1, 2, 2, 1, 5])),
        ["brier_score", "outside the class range [0, 2]"],
    ),
    "brier: NaN probabilities": (
        lambda: brier_score(torch.full((6, 3), math.nan), L3),
        ["the probabilities contain NaN", "6 of 6 rows"],
    ),
    "ood_auroc: NaN score": (
        lambda: ood_auroc(torch.tensor([0.1, math.nan]), torch.tensor([0.5])),
        ["in-distribution scores contain NaN", "rows 1"],
    ),
    "ood_auroc: probabilities, not scores": (
        lambda: ood_auroc(P3, P3),
        ["one score per example", "predictive_entropy"],
    ),
    "ood_auroc: empty": (lambda: ood_auroc(torch.zeros(0), torch.ones(2)), ["empty"]),
    "entropy: NaN": (lambda: predictive_entropy(torch.full((2, 3), math.nan)), ["NaN", "rows 0, 1"]),
    "classification nll: label out of range": (
        lambda: ClassificationPredictive(P3).nll(L3 + 1),
        ["nll", "outside the class range [0, 2]"],
    ),
    "regression nll: NaN target": (
        lambda: predict(REG, DRAWS, X).nll(torch.where(torch.arange(20) == 3, math.nan, Y)),
        ["targets contain NaN or inf in 1 of 20 rows (rows 3)"],
    ),
    "regression nll: wrong length": (
        lambda: predict(REG, DRAWS, X).nll(Y[:7]),
        ["targets of shape (7,) do not match predictions of shape (20,)"],
    ),
}


@pytest.mark.parametrize("case", list(BAD_METRICS))
def test_metrics_refuse_bad_inputs_with_a_clear_message(case):
    fn, fragments = BAD_METRICS[case]
    _raises(fn, *fragments)


def test_metrics_take_numpy_arrays_float_labels_and_predictives():
    pred = predict(CLS, CLS_DRAWS, X)
    acc = accuracy(pred.probs, LABELS)
    assert accuracy(pred, LABELS.numpy()) == acc  # the predictive itself, NumPy labels
    assert accuracy(pred.probs.numpy(), LABELS.double()) == acc  # whole-number float labels
    assert brier_score(pred, LABELS) == brier_score(pred.probs, LABELS)
    assert expected_calibration_error(pred, LABELS)[0] == expected_calibration_error(pred.probs, LABELS)[0]
    reg = predict(REG, DRAWS, X)
    assert math.isclose(rmse(reg, Y.numpy()), rmse(reg.mean, Y), rel_tol=1e-6)
    assert math.isclose(rmse(reg.mean[:, None], Y), rmse(reg.mean, Y))  # [N, 1] against [N]
    assert ood_auroc(np.array([0.1, 0.2]), [0.5, 0.9]) == 1.0
    assert math.isfinite(pred.nll(LABELS.numpy()))
    assert math.isfinite(reg.nll(Y.double().numpy()))


# ---------------------------------------------------------------------------------------- data
def _loader(*tensors, batch_size=7):
    return DataLoader(TensorDataset(*tensors), batch_size=batch_size, shuffle=False)


def test_laplace_and_map_init_refuse_data_they_cannot_use():
    _raises(
        lambda: Laplace(REG, structure="diag").fit("data", map="module"),
        "pair (inputs, targets)",
        "DataLoader",
    )
    _raises(
        lambda: Laplace(REG, structure="diag").fit(_loader(X, Y, X), map="module"),
        "batch 0 of the DataLoader",
        "not a pair",
    )
    _raises(lambda: map_init(REG, Minibatches(X, Y, batch_size=5)), "minibatch stream", "DataLoader")
    _raises(
        lambda: map_init(REG, (X[:, :2], Y), steps=1),
        "the model failed on inputs of shape (20, 2)",
        "expects inputs with 3 features",
    )
    _raises(lambda: map_init(REG, (NAN_X, Y), steps=1), "inputs contains NaN or inf", "rows 4")


def test_check_data_names_the_data_forms_that_are_accepted():
    msg = _raises(lambda: REG.check_data("data"), "data must be a tuple (inputs, targets)", "got str")
    assert "DataLoader" in msg and "LoaderStream" in msg
    _raises(lambda: REG.check_data(_loader(X, Y)), "got a DataLoader", "bnnkit.sample takes a DataLoader")
    _raises(lambda: REG.check_data((X.numpy(), Y)), "inputs must be a torch.Tensor", "torch.as_tensor")
    _raises(lambda: REG.as_data((X, Y, Y)), "pair (inputs, targets)", "got tuple")


def test_vi_fits_take_a_dataloader_and_say_so_when_refusing():
    net = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Dropout(0.1), nn.Linear(8, 1))
    _raises(
        lambda: MCDropout(num_epochs=1).fit(net, 3.0, likelihood=bnnkit.Gaussian(0.3), progress=False),
        "DataLoader",
    )
    drop = MCDropout(num_epochs=2, batch_size=10)
    a = drop.fit(net, (X, Y), likelihood=bnnkit.Gaussian(0.3), progress=False)
    b = drop.fit(net, _loader(X, Y), likelihood=bnnkit.Gaussian(0.3), progress=False)
    c = drop.fit(net, (X.double().numpy(), Y.numpy()), likelihood=bnnkit.Gaussian(0.3), progress=False)
    for other in (b, c):
        for p, q in zip(a.module.parameters(), other.module.parameters()):
            assert torch.allclose(p, q)
