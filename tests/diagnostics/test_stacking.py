"""Stacking chains (bnnkit.diagnostics.stacking): the weights against cases known in closed form,
the LOO against ArviZ's own ``loo``, and the default recipe's option."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bnnkit.diagnostics.stacking import loo_per_chain, stacked_log_weights, stacking_weights


def test_the_weights_go_to_the_chain_that_predicts_every_row_better():
    loo = np.stack([np.full(50, -1.0), np.full(50, -3.0), np.full(50, -2.0)])
    w = stacking_weights(loo)
    assert w[0] > 0.999 and abs(w.sum() - 1) < 1e-12


def test_two_chains_each_best_on_half_the_rows_share_the_weight_as_the_optimum_says():
    # rows 0..n/2: chain 0 density a, chain 1 b; the rest swapped. sum_n log(w a + (1-w) b) + ...
    # is symmetric in w <-> 1-w and concave: the optimum is w = 1/2.
    a, b = np.log(0.8), np.log(0.1)
    loo = np.stack([np.r_[np.full(20, a), np.full(20, b)], np.r_[np.full(20, b), np.full(20, a)]])
    np.testing.assert_allclose(stacking_weights(loo), [0.5, 0.5], atol=1e-4)
    # unequal halves: the optimum of n1 log(w a + (1-w) b) + n2 log(w b + (1-w) a), in closed form
    n1, n2 = 30, 10
    loo = np.stack([np.r_[np.full(n1, a), np.full(n2, b)], np.r_[np.full(n1, b), np.full(n2, a)]])
    pa, pb = 0.8, 0.1
    w = np.linspace(0, 1, 200001)
    f = n1 * np.log(w * pa + (1 - w) * pb) + n2 * np.log(w * pb + (1 - w) * pa)
    np.testing.assert_allclose(stacking_weights(loo)[0], w[f.argmax()], atol=1e-4)


def test_loo_per_chain_equals_arviz_loo_of_each_chain():
    import arviz as az

    ll = np.random.default_rng(0).normal(-1.0, 0.7, size=(3, 60, 25))
    loo, k = loo_per_chain(torch.tensor(ll))
    for c in range(3):
        idata = az.from_dict(posterior={"_": np.zeros((1, 60))}, log_likelihood={"y": ll[c][None]})
        r = az.loo(idata, pointwise=True)
        np.testing.assert_allclose(loo[c], r.loo_i.values, rtol=1e-10)
        np.testing.assert_allclose(k[c], r.pareto_k.values, rtol=1e-10)
    with pytest.raises(ValueError, match="shaped"):
        loo_per_chain(np.zeros((2, 1, 5)))


def test_per_draw_log_weights_spread_each_chains_weight_over_its_draws():
    ll = torch.zeros(2, 5, 10)
    ll[0] -= 1.0  # chain 1 predicts every row better: it takes the weight
    lw, report = stacked_log_weights(ll)
    assert lw.shape == (2, 5)
    w = lw.exp()
    torch.testing.assert_close(w.sum(), torch.tensor(1.0, dtype=torch.float64))
    assert float(w[1].sum()) > 0.999 and torch.allclose(w[1], w[1, :1].expand(5))
    assert report["rows"] == 10 and len(report["chain_weights"]) == 2
