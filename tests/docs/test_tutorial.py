"""The documentation's tutorial runs from a fresh install (short setting, no downloads)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TUTORIALS = sorted((ROOT / "docs" / "tutorial").glob("*.py"))


# the docs build in CI runs the tutorial at full length; this checks the short setting (slow run)
@pytest.mark.slow
@pytest.mark.parametrize("script", TUTORIALS, ids=lambda p: p.name)
def test_tutorial_runs(script, tmp_path):
    env = dict(os.environ, BNNKIT_TUTORIAL_QUICK="1", MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    if script.name == "cnn.py":
        assert "function-space R-hat" in proc.stdout
        assert "AdaptiveSGHMC posterior" in proc.stdout


def test_literate_cells_split():
    """The docs hook splits ``# %%`` cells into prose and code."""
    pytest.importorskip("mkdocs")  # the hook imports MkDocs (extra `docs`)
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        from execute import split_cells
    finally:
        sys.path.pop(0)
    cells = split_cells("# %% [markdown]\n# # Title\n#\n# text\n\n# %%\nx = 1\nprint(x)\n")
    assert [c["kind"] for c in cells] == ["markdown", "code"]
    assert cells[0]["source"] == "# Title\n\ntext"
    assert cells[1]["source"] == "x = 1\nprint(x)"
