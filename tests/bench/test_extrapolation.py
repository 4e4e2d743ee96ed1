"""`bnnkit experiment extrapolation --quick` runs end to end and writes its PNG and JSON."""

import json

import pytest
import torch

from bnnkit.cli.main import main


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_extrapolation_quick_writes_plot_and_numbers(tmp_path):
    out = tmp_path / "extra"
    state = torch.get_rng_state()
    assert main(["experiment", "extrapolation", "--quick", "--out", str(out), "--no-progress"]) == 0
    # the initial weights come from a seeded fork: the caller's global RNG is left alone
    assert torch.equal(torch.get_rng_state(), state)
    report = json.loads((out / "extrapolation.json").read_text())
    for name in ("fsghmc", "sghmc", "sghmc_scaled"):
        r = report[name]
        assert all(v == v for v in r.values())  # no NaN
        assert r["in_range_rmse"] < 0.5  # every method fits the data it has seen
    # the functional prior's band is wider away from the data than on it
    assert report["fsghmc"]["out_of_range_mean_std"] > 2 * report["fsghmc"]["in_range_mean_std"]
    assert (out / "extrapolation.png").stat().st_size > 20_000
