"""The SGHMC UCI example runs end to end in quick mode on the shared Boston data."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"


@pytest.mark.skipif(not (DATA / "uci").exists(), reason="needs ../shared/data/uci")
@pytest.mark.slow  # the example end to end; its parts are covered by tests/sgmcmc and tests/diagnostics
def test_sghmc_uci_example_quick(tmp_path):
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        str(ROOT / "examples" / "sghmc_uci.py"),
        "--quick",
        "--out",
        str(out),
        "--data",
        str(DATA),
    ]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300)
    report = json.loads((out / "report.json").read_text())
    assert report["dataset"] == "bostonHousing"
    assert 1.0 < report["test_rmse"] < 8.0  # original units (house prices in $1000s)
    assert (out / "tune.png").stat().st_size > 10_000 and (out / "traces.png").stat().st_size > 10_000
