"""The README's CSV example runs as it stands, and gives the bench's default row on that data."""

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


def _example() -> str:
    text = (ROOT / "README.md").read_text()
    block = re.search(
        r"<!-- readme-example:start -->\n```python\n(.*?)```\n<!-- readme-example:end -->", text, re.S
    )
    assert block, "the README's example block is missing its markers"
    return block.group(1)


def _csv(path: Path, n: int = 150) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, size=(n, 3)) * np.array([1.0, 10.0, 0.1]) + np.array([0.0, 50.0, 3.0])
    y = 20 * np.sin(x[:, 0]) + 0.3 * x[:, 1] + rng.normal(0, 2.0, n) + 100
    np.savetxt(path, np.column_stack([x, y]), delimiter=",", header="a,b,c,y", comments="")
    return x, y


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_the_readme_example_is_short_and_runs(tmp_path, monkeypatch):
    code = _example()
    assert len(code.strip().splitlines()) <= 15
    _csv(tmp_path / "data.csv")
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    ns: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(code, "README.md", "exec"), ns)  # noqa: S102 - the README's own code
    assert (tmp_path / "posterior.pt").is_file() and (tmp_path / "predictive.png").is_file()
    fit, x, y, n = ns["fit"], ns["x"], ns["y"], ns["n"]
    m = fit.evaluate(x[n:], y[n:])
    assert m["rmse"] < 0.5 * float(np.std(y))  # in y's units: a fit, not the mean
    assert ns["low"].shape == (len(y) - n,) and bool((ns["low"] < ns["high"]).all())
    import bnnkit

    again = bnnkit.load(tmp_path / "posterior.pt", ns["net"])
    assert torch.equal(again.predict(x[n:]).mean, ns["pred"].mean)


@pytest.mark.slow
def test_the_readme_example_gives_the_bench_default_row(tmp_path, monkeypatch):
    """The bench's ``default`` cell on the README's split is what the README's call gives."""
    from bnnkit.bench.uci import run_uci_arrays

    code = _example()
    x, y = _csv(tmp_path / "data.csv")
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(code, "README.md", "exec"), ns)  # noqa: S102
        n = ns["n"]
        report = run_uci_arrays(
            x,
            y,
            splits=[(np.arange(n), np.arange(n, len(y)))],
            methods=["default"],
            name="readme",
            out=tmp_path / "bench",
            seed=0,
            progress=False,
        )
    cell = report["cells"][0]
    m = ns["fit"].evaluate(x[n:], y[n:])
    assert cell["rmse"] == pytest.approx(m["rmse"], rel=1e-4)
    assert cell["nll"] == pytest.approx(m["nll"], rel=1e-4, abs=1e-4)
