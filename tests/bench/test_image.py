"""`bnnkit bench image --quick` runs every method end to end and writes its files."""

import json
from pathlib import Path

import pytest

from bnnkit.bench.image import METHODS, run_image
from bnnkit.core.errors import BnnkitError

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


@pytest.mark.skipif(not (DATA / "mnist").exists(), reason="needs ../shared/data/mnist")
def test_image_quick_all_methods(tmp_path):
    report = run_image(
        "mnist", METHODS, out=tmp_path, root=str(DATA), quick=True, progress=False, log=lambda s: None
    )
    assert [r["method"] for r in report["rows"]] == list(METHODS)
    for r in report["rows"]:  # quick mode checks the pipeline, not the accuracy
        assert 0.0 <= r["test_error_pct"] <= 100.0 and 0.0 <= r["ood_auroc"] <= 1.0 and r["nll"] > 0
    assert report["sizes"] == {"train": 600, "test": 300, "ood": 200}
    assert json.loads((tmp_path / "image.json").read_text())["command"] == report["command"]
    assert (tmp_path / "reliability.png").stat().st_size > 10_000 and (tmp_path / "image.md").exists()


def test_image_bad_input(tmp_path):
    with pytest.raises(BnnkitError, match="unknown method"):
        run_image("mnist", ("sgd",), out=tmp_path)
    with pytest.raises(BnnkitError, match="unknown method 'hmc'"):  # no NUTS for the CNN
        run_image("mnist", ("hmc",), out=tmp_path)
    with pytest.raises(BnnkitError, match="dataset"):
        run_image("cifar", ("bbb",), out=tmp_path)
