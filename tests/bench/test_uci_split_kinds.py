"""`bnnkit bench uci --split-kind gap|tail` (issue 46): the gap and tail splits of a UCI-layout set run
directly or from the layout `write_split_layout` writes, with the same numbers; every cell records
its kind of split and the 95 % interval coverage; `--resume` and `--from-cells` never mix kinds,
and a cell's data checksum covers its split's rows."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from bnnkit.bench.uci import run_uci, run_uci_arrays
from bnnkit.cli.main import main
from bnnkit.core.errors import BnnkitError
from bnnkit.data import write_split_layout
from bnnkit.data.splits import SPLIT_KINDS, gap_splits, split_dims
from bnnkit.data.uci import load_uci_columns
from bnnkit.laplace.predictive import GLMRegressionPredictive
from bnnkit.predict import interval_coverage
from bnnkit.predict.predictive import RegressionPredictive
from tests.helpers import write_uci_folder

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def _cli(data: Path, out: Path, name: str, *extra: str) -> int:
    args = [
        "bench",
        "uci",
        "--data",
        str(data),
        "--datasets",
        name,
        "--methods",
        "mcdropout",
        "--splits",
        "2",
    ]
    return main([*args, "--quick", "--out", str(out), "--no-progress", *extra])


def _cells(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "uci_cells.jsonl").read_text().splitlines()]


@pytest.mark.slow  # over 2.5 s: the default run stays under 3 min
def test_gap_splits_run_directly_and_from_the_written_layout_alike(tmp_path, capsys):
    write_uci_folder(tmp_path / "data")
    # directly: --split-kind gap on the set
    assert _cli(tmp_path / "data", tmp_path / "direct", "toyset", "--split-kind", "gap") == 0
    printed = capsys.readouterr().out
    direct = _cells(tmp_path / "direct")
    assert [(c["split"], c["split_kind"], c["split_dim"]) for c in direct] == [(0, "gap", 0), (1, "gap", 1)]
    for c in direct:
        assert 0.0 <= c["coverage_95"] <= 1.0 and len(c["data_sha256"]) == 64
    assert "95% coverage" in printed and "gap splits" in printed and "--split-kind gap" in printed
    report = json.loads((tmp_path / "direct" / "uci.json").read_text())
    assert report["split_kind"] == "gap" and "coverage_95" in report["summary"]["toyset"]["mcdropout"]

    # from the layout written for it: an own set like any other, the same splits and numbers
    folder = write_split_layout(tmp_path / "data", "toyset", "gap", tmp_path / "gapdata")
    assert folder.name == "toyset_gap"
    assert _cli(tmp_path / "gapdata", tmp_path / "layout", "toyset_gap") == 0
    layout = _cells(tmp_path / "layout")
    assert [c["split_kind"] for c in layout] == ["random", "random"]  # the layout's own index files
    assert [c["split_dim"] for c in layout] == [None, None]
    for a, b in zip(direct, layout):
        assert (
            a["rmse_std"] == b["rmse_std"] and a["nll"] == b["nll"] and a["coverage_95"] == b["coverage_95"]
        )
    # a gap split's checksum is not that of a random split of the same number
    assert _cli(tmp_path / "data", tmp_path / "random", "toyset") == 0
    random_cells = _cells(tmp_path / "random")
    assert {c["data_sha256"] for c in random_cells}.isdisjoint({c["data_sha256"] for c in direct})
    assert all(c["split_kind"] == "random" and "coverage_95" in c for c in random_cells)


@pytest.mark.slow  # over 2.5 s: the default run stays under 3 min
def test_resume_and_from_cells_never_mix_kinds(tmp_path, capsys):
    write_uci_folder(tmp_path / "data")
    out = tmp_path / "out"
    assert _cli(tmp_path / "data", out, "toyset") == 0  # random splits 0, 1
    random_cells = _cells(out)
    capsys.readouterr()
    # a gap run resumed in the same folder runs its own cells: split 0 of one kind is not split 0 of another
    assert _cli(tmp_path / "data", out, "toyset", "--split-kind", "gap", "--resume") == 0
    said = capsys.readouterr().out
    assert "2 cell(s) of other kinds of split than 'gap' are kept in the file but not resumed" in said
    both = _cells(out)
    assert [c["split_kind"] for c in both] == ["random", "random", "gap", "gap"]
    assert both[:2] == random_cells  # kept, untouched
    # resumed again: every gap cell is there, nothing runs
    assert _cli(tmp_path / "data", out, "toyset", "--split-kind", "gap", "--resume") == 0
    assert _cells(out) == both
    # --from-cells rebuilds each kind's table from its own cells only
    for kind in ("gap", "random"):
        again = tmp_path / f"rebuilt-{kind}"
        args = ["--from-cells", str(out / "uci_cells.jsonl")]
        assert _cli(tmp_path / "data", again, "toyset", "--split-kind", kind, *args) == 0
        report = json.loads((again / "uci.json").read_text())
        assert [c["split_kind"] for c in report["cells"]] == [kind, kind]
        assert report["split_kind"] == kind
    capsys.readouterr()
    # a gap cell whose data has changed since is refused, before anything runs
    data = tmp_path / "data" / "uci" / "toyset" / "data.txt"
    rows = data.read_text().splitlines()
    data.write_text("\n".join(rows[:-1] + ["0 0 0 1"]) + "\n")
    assert _cli(tmp_path / "data", out, "toyset", "--split-kind", "gap", "--resume") == 2
    err = capsys.readouterr().err
    assert "toyset split 0" in err and "other data" in err and "gap splits" in err
    assert _cells(out) == both


def test_split_kind_is_checked_and_a_set_without_a_gap_split_is_refused(tmp_path, capsys):
    from bnnkit.cli.main import build_parser

    uci = (
        build_parser()
        ._subparsers._group_actions[0]
        .choices["bench"]
        ._subparsers._group_actions[0]
        .choices["uci"]
    )
    action = next(a for a in uci._actions if a.dest == "split_kind")
    assert tuple(action.choices) == SPLIT_KINDS and action.default == "random"  # listed without importing
    assert main(["bench", "uci", "--split-kind", "middle"]) == 2
    assert "--split-kind" in capsys.readouterr().err
    write_uci_folder(tmp_path / "data")
    with pytest.raises(BnnkitError, match="split kind must be one of random, gap, tail"):
        run_uci(["toyset"], ["mcdropout"], root=str(tmp_path / "data"), split_kind="gaps", out=tmp_path / "o")
    # a set whose every feature ties across the cut has no gap split: said before anything is written
    folder = tmp_path / "data" / "uci" / "toyset"
    raw = np.loadtxt(folder / "data.txt")
    raw[:, :3] = (np.arange(60)[:, None] % 2).astype(float)
    np.savetxt(folder / "data.txt", raw)
    with pytest.raises(BnnkitError, match="no input dimension gives a gap split"):
        run_uci(["toyset"], ["mcdropout"], root=str(tmp_path / "data"), split_kind="gap", out=tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_run_uci_arrays_runs_tail_splits(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(48, 2))
    y = x[:, 0] - x[:, 1] + 0.1 * rng.normal(size=48)
    kw = dict(methods=["mcdropout"], name="mine", quick=True, progress=False, log=lambda s: None)
    report = run_uci_arrays(x, y, splits=1, split_kind="tail", out=tmp_path / "t", **kw)
    (cell,) = report["cells"]
    assert cell["split_kind"] == "tail" and cell["split_dim"] == 0 and 0.0 <= cell["coverage_95"] <= 1.0
    assert "split_kind='tail'" in report["command"]
    with pytest.raises(BnnkitError, match="splits must be a number"):
        run_uci_arrays(x, y, splits=gap_splits(x), split_kind="gap", out=tmp_path / "g", **kw)


def test_interval_coverage_counts_targets_inside_the_central_interval():
    y = torch.tensor([0.0, 1.0, 3.0, -2.5])
    # one draw, noise sd 1: the interval is mean +- 1.96
    pred = RegressionPredictive(torch.zeros(1, 4), torch.ones(1, 1), torch.zeros(1))
    assert interval_coverage(pred, y) == 0.5
    glm = GLMRegressionPredictive(torch.zeros(4), torch.zeros(4), torch.tensor(4.0))  # sd 2: +- 3.92
    assert interval_coverage(glm, y) == 1.0
    assert interval_coverage(object(), y) is None  # no interval: no coverage
    bad = RegressionPredictive(torch.full((1, 4), float("nan")), torch.ones(1, 1), torch.zeros(1))
    assert math.isnan(interval_coverage(bad, y))


@pytest.mark.skipif(not (SHARED / "uci" / "yacht").is_dir(), reason="needs ../shared/data/uci")
def test_yacht_gap_and_tail_splits_skip_the_dimensions_that_hold_nothing_out():
    x, _ = load_uci_columns("yacht", root=SHARED)
    # yacht's hull parameters take 6-11 values: dimensions 0 and 2 (gap), 0 and 1 (tail) tie across the cut
    assert split_dims(x, "gap") == [1, 3, 4, 5] and split_dims(x, "tail") == [2, 3, 4, 5]
    assert all(test.size == 308 // 3 for _, test in gap_splits(x))
