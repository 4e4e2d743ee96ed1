"""bnnkit.tune: a grid of short runs scored on held-out NLL, stationarity and ESS/s."""

import numpy as np
import pytest

import bnnkit
from bnnkit.core.errors import BnnkitError
from bnnkit.data import Minibatches
from bnnkit.sgmcmc.tune import GEWEKE_MAX, geweke_z
from tests.helpers import linear_problem

PROB = linear_problem(n=100, d=2, sigma=0.5)
HELD = linear_problem(n=50, d=2, sigma=0.5, seed=1)


def test_tune_scores_a_grid_flags_divergence_and_plots(tmp_path):
    res = bnnkit.tune(
        bnnkit.SGLD,
        {"step_size": [1e-1, 1e-3, 2e-4]},
        PROB.posterior(num_data=100),
        Minibatches(PROB.X, PROB.y, batch_size=10),
        (HELD.X, HELD.y),
        num_samples=40,
        num_warmup=100,
        thin=2,
        progress=False,
        plot=str(tmp_path / "tune.png"),
    )
    assert [r["setting"]["step_size"] for r in res.rows] == [1e-1, 1e-3, 2e-4]
    diverged, good = res.rows[0], res.rows[1]
    assert (
        not diverged["finite"] and not diverged["stationary"]
    )  # eps * lambda_max / 2 = 20: the chain explodes
    assert good["finite"] and np.isfinite(good["heldout_nll"]) and good["ess_per_second"] > 0
    assert res.best["step_size"] in (1e-3, 2e-4)
    assert "| step_size |" in res.table() and "**best**" in res.table()
    assert (tmp_path / "tune.png").stat().st_size > 10_000


def test_geweke_flags_a_drifting_trace():
    rng = np.random.default_rng(0)
    flat = rng.normal(size=(2, 400))
    drift = flat + np.linspace(0, 5, 400)
    assert geweke_z(flat) < GEWEKE_MAX
    assert geweke_z(drift) > 2 * GEWEKE_MAX


@pytest.mark.parametrize(
    "grid, kw, message",
    [
        ({}, {}, "grid is empty"),
        ({"step_size": []}, {}, "non-empty list"),
        ({"step_size": [1e-3]}, {"num_chains": 1}, "num_chains"),
    ],
)
def test_bad_tune_arguments(grid, kw, message):
    with pytest.raises(BnnkitError, match=message):
        bnnkit.tune(
            bnnkit.SGLD,
            grid,
            PROB.posterior(num_data=100),
            Minibatches(PROB.X, PROB.y, batch_size=10),
            (HELD.X, HELD.y),
            progress=False,
            **kw,
        )
