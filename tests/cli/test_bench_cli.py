"""`bnnkit bench bandit --quick` through the command line writes its report."""

from pathlib import Path

import pytest

from bnnkit.cli.main import main

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


@pytest.mark.skipif(not (DATA / "mushroom").exists(), reason="needs ../shared/data/mushroom")
def test_bench_bandit_quick_cli(tmp_path):
    out = tmp_path / "bandit"
    args = ["bench", "bandit", "--quick", "--methods", "sgld,greedy0", "--seeds", "0", "--steps", "60"]
    assert main(args + ["--data", str(DATA), "--out", str(out), "--no-progress"]) == 0
    md = (out / "bandit.md").read_text()
    assert "sgld" in md and "greedy0" in md and "--steps 60" in md
