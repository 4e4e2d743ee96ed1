import math

import pytest
import torch

from bnnkit.core.errors import BnnkitError
from bnnkit.predict import (
    accuracy,
    brier_score,
    expected_calibration_error,
    ood_auroc,
    predictive_entropy,
    rmse,
)


def test_rmse_and_accuracy():
    assert math.isclose(rmse(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 4.0])), math.sqrt(2), rel_tol=1e-6)
    probs = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    assert math.isclose(accuracy(probs, torch.tensor([0, 1, 1])), 2 / 3)


def test_ece_perfectly_calibrated_is_near_zero_and_overconfident_is_known():
    g = torch.Generator().manual_seed(0)
    n = 200000
    conf = torch.rand(n, generator=g) * 0.5 + 0.5
    correct = torch.rand(n, generator=g) < conf
    y = torch.where(correct, 0, 1)
    probs = torch.stack([conf, 1 - conf], -1)
    ece, rel = expected_calibration_error(probs, y, num_bins=10)
    assert ece < 0.01
    assert int(rel["count"].sum()) == n
    # always 90% confident, right half the time: ECE = 0.4
    probs = torch.tensor([[0.9, 0.1]]).repeat(1000, 1)
    y = torch.arange(1000) % 2
    assert math.isclose(expected_calibration_error(probs, y)[0], 0.4, abs_tol=1e-6)


def test_brier_and_entropy():
    probs = torch.tensor([[1.0, 0.0], [0.5, 0.5]])
    assert math.isclose(brier_score(probs, torch.tensor([0, 1])), (0 + 0.5) / 2)
    assert math.isclose(float(predictive_entropy(torch.full((1, 4), 0.25))), math.log(4), rel_tol=1e-6)


def test_auroc():
    assert ood_auroc(torch.tensor([0.1, 0.2]), torch.tensor([0.5, 0.9])) == 1.0
    assert ood_auroc(torch.tensor([0.5, 0.9]), torch.tensor([0.1, 0.2])) == 0.0
    assert ood_auroc(torch.ones(5), torch.ones(7)) == 0.5
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(300, generator=g), torch.randn(200, generator=g) + 1.0
    from sklearn.metrics import roc_auc_score

    ref = roc_auc_score([0] * 300 + [1] * 200, torch.cat([a, b]).numpy())
    assert math.isclose(ood_auroc(a, b), ref, rel_tol=1e-9)


def test_bad_input():
    with pytest.raises(BnnkitError, match="empty"):
        rmse(torch.tensor([]), torch.tensor([]))
    with pytest.raises(BnnkitError, match="3 predictions but 2 targets"):
        accuracy(torch.rand(3, 2), torch.tensor([0, 1]))
