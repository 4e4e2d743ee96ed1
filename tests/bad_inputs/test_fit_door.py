"""Bad data at ``bnnkit.fit``'s door: refused before any work, with what was wrong and what to do."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import bnnkit
from bnnkit.api import SamplerRecipe
from bnnkit.core.errors import BnnkitError

SHORT = SamplerRecipe(map_max_steps=50, map_patience=2, burn_in=5, draws=4, thin=1, check_every=4)
G = torch.Generator().manual_seed(0)
X = torch.randn(30, 2, generator=G)
Y = X[:, 0] + 0.1 * torch.randn(30, generator=G)


def _net(d=2, out=1):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(d, 8), nn.Tanh(), nn.Linear(8, out))


def _fit(net, data, **kw):
    return bnnkit.fit(net, data, recipe=SHORT, progress=False, **kw)


def test_a_non_finite_row_is_counted_and_named_as_the_user_gave_it():
    x = X.clone()
    x[7, 1] = float("nan")
    with pytest.raises(BnnkitError, match=r"inputs contains NaN or inf in 1 of 30 rows \(rows 7\)"):
        _fit(_net(), (x, Y))
    y = Y.clone()
    y[[2, 11]] = float("inf")
    with pytest.raises(BnnkitError, match=r"targets contains NaN or inf in 2 of 30 rows \(rows 2, 11\)"):
        _fit(_net(), (X, y))


def test_inputs_the_module_cannot_take_are_refused_with_what_to_change():
    with pytest.raises(BnnkitError, match=r"for one feature pass x.reshape\(-1, 1\)"):
        _fit(_net(d=1), (X[:, 0], Y))
    with pytest.raises(BnnkitError, match=r"Each row has shape \(2,\): does the module's first layer take"):
        _fit(_net(d=3), (X, Y))


def test_a_module_that_does_not_give_one_row_per_input_row_is_refused():
    class Pooled(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 1)

        def forward(self, x):
            return self.lin(x).mean(0)

    with pytest.raises(BnnkitError, match="one output row per input row"):
        _fit(Pooled(), (X, Y))


@pytest.mark.parametrize("labels", [torch.full((30,), 3), -torch.ones(30, dtype=torch.long)])
def test_class_labels_outside_the_modules_outputs_are_refused(labels):
    with pytest.raises(BnnkitError, match=r"class labels must be 0 \.\. 2 for a module with 3 outputs"):
        _fit(_net(out=3), (X, labels))


def test_the_check_draws_no_dropout_noise_and_leaves_each_layers_mode():
    net = nn.Sequential(nn.Linear(2, 8), nn.Dropout(0.5), nn.BatchNorm1d(8), nn.Linear(8, 1))
    net[2].eval()  # a mix of modes, as the user left them
    from bnnkit.api.fit import _first_rows_out

    torch.manual_seed(3)
    before = torch.rand(1)
    torch.manual_seed(3)
    stats = net[2].running_mean.clone()
    _first_rows_out(net, X)
    assert torch.equal(torch.rand(1), before)  # the caller's random state untouched
    assert torch.equal(net[2].running_mean, stats)
    assert [m.training for m in net] == [True, True, False, True]
