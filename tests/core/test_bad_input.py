"""Each bad input gets a clear error naming what is wrong and what to do."""

import math

import pytest
import torch

import bnnkit
from bnnkit.core.errors import BnnkitError
from tests.helpers import linear_problem


def _post():
    return linear_problem(n=10, d=2).posterior()


def test_nan_in_inputs_names_tensor_and_rows():
    prob = linear_problem(n=10, d=2)
    X = prob.X.clone()
    X[3, 0] = math.nan
    X[7, 1] = math.inf
    with pytest.raises(BnnkitError, match=r"inputs contains NaN or inf in 2 of 10 rows \(rows 3, 7\)"):
        bnnkit.sample(bnnkit.HMC(), prob.posterior(), (X, prob.y), num_samples=1, progress=False)


def test_nan_in_targets():
    prob = linear_problem(n=10, d=2)
    y = prob.y.clone()
    y[0] = math.nan
    with pytest.raises(BnnkitError, match="targets contains NaN or inf in 1 of 10 rows"):
        bnnkit.sample(bnnkit.HMC(), prob.posterior(), (prob.X, y), num_samples=1, progress=False)


def test_output_shape_mismatch():
    net = torch.nn.Linear(2, 3)
    post = bnnkit.Posterior(net, bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0))
    with pytest.raises(
        BnnkitError, match=r"model output shape \(10, 3\) does not match target shape \(10,\)"
    ):
        post.check_data((torch.randn(10, 2), torch.randn(10)))


def test_row_count_mismatch():
    with pytest.raises(BnnkitError, match="same number of rows"):
        _post().check_data((torch.randn(10, 2, dtype=torch.float64), torch.randn(9, dtype=torch.float64)))


def test_wrong_input_dimension():
    with pytest.raises(BnnkitError, match="Check the input dimension"):
        _post().check_data((torch.randn(10, 5, dtype=torch.float64), torch.randn(10, dtype=torch.float64)))


def test_categorical_labels_out_of_range():
    post = bnnkit.Posterior(torch.nn.Linear(2, 3), bnnkit.Categorical(), bnnkit.GaussianPrior(1.0))
    with pytest.raises(BnnkitError, match=r"2 labels are outside \[0, 2\] for a model with 3 output logits"):
        post.check_data((torch.randn(5, 2), torch.tensor([0, 1, 2, 3, -1])))


def test_categorical_float_labels():
    post = bnnkit.Posterior(torch.nn.Linear(2, 3), bnnkit.Categorical(), bnnkit.GaussianPrior(1.0))
    with pytest.raises(BnnkitError, match="integer tensor of class labels"):
        post.check_data((torch.randn(5, 2), torch.zeros(5)))


def test_bernoulli_labels_not_binary():
    post = bnnkit.Posterior(torch.nn.Linear(2, 1), bnnkit.Bernoulli(), bnnkit.GaussianPrior(1.0))
    with pytest.raises(BnnkitError, match="Bernoulli targets must be 0 or 1"):
        post.check_data((torch.randn(3, 2), torch.tensor([0.0, 1.0, 2.0])))


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_non_positive_step_noise_and_prior_scale(bad):
    with pytest.raises(BnnkitError, match="step_size must be a positive"):
        bnnkit.HMC(step_size=bad)
    with pytest.raises(BnnkitError, match="Gaussian noise must be a positive"):
        bnnkit.Gaussian(bad)
    with pytest.raises(BnnkitError, match="prior scale must be a positive"):
        bnnkit.GaussianPrior(bad)
    with pytest.raises(BnnkitError, match="prior scale must be a positive"):
        bnnkit.LaplacePrior(bad)
    with pytest.raises(BnnkitError, match="sigma1 of the scale-mixture prior must be a positive"):
        bnnkit.ScaleMixturePrior(sigma1=bad)


def test_per_layer_scale_for_unknown_layer():
    net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
    with pytest.raises(BnnkitError, match="matches no sampled parameter"):
        bnnkit.Posterior(net, bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0, scales={"5.": 0.1}))


def test_module_without_parameters():
    with pytest.raises(BnnkitError, match="has no parameters"):
        bnnkit.Posterior(torch.nn.Tanh(), bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0))


def test_empty_data():
    with pytest.raises(BnnkitError, match="empty"):
        _post().check_data((torch.zeros(0, 2, dtype=torch.float64), torch.zeros(0, dtype=torch.float64)))


def test_num_data_smaller_than_batch():
    prob = linear_problem(n=10, d=2)
    with pytest.raises(BnnkitError, match="num_data must be the full training-set size"):
        prob.posterior(num_data=5).check_data((prob.X, prob.y))
