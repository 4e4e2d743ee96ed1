"""`bnnkit bench uci --data DIR --datasets NAME` on a UCI-layout folder that is not one of the known
sets, the in-memory entry point, and the published rows of the table."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import bnnkit.bench.uci as uci
from bnnkit.bench.uci import PROTOCOL, make_report, run_uci, run_uci_arrays
from bnnkit.cli.main import main
from bnnkit.core.errors import BnnkitError
from tests.helpers import write_uci_folder


def _cli(data: Path, out: Path, *extra: str) -> int:
    args = ["bench", "uci", "--data", str(data), "--datasets", "toyset", "--methods", "mcdropout"]
    return main([*args, "--quick", "--out", str(out), "--no-progress", *extra])


def test_bench_uci_runs_an_own_folder_from_the_command_line(tmp_path, capsys):
    write_uci_folder(tmp_path / "data")
    out = tmp_path / "out"
    state = torch.get_rng_state()
    assert _cli(tmp_path / "data", out, "--splits", "3") == 0
    assert torch.equal(torch.get_rng_state(), state)  # the caller's global RNG is left alone
    printed = capsys.readouterr().out
    assert "toyset has only 2 standard splits" in printed
    rows = list(csv.DictReader((out / "uci.csv").open()))
    assert [(r["dataset"], r["split"], r["method"]) for r in rows] == [
        ("toyset", "0", "mcdropout"),
        ("toyset", "1", "mcdropout"),
    ]
    for r in rows:
        assert 0.0 < float(r["rmse_std"]) < float("inf") and float(r["nll"]) < float("inf")
        assert r["protocol"] == str(PROTOCOL)
    md = (out / "uci.md").read_text()
    assert "| toyset | mcdropout |" in md
    assert "published" not in md  # no published numbers for an own set
    assert f"--data {tmp_path / 'data'}" in md  # the command names the folder it read
    report = json.loads((out / "uci.json").read_text())
    assert report["published"] == {} and report["protocol"]["version"] == PROTOCOL
    assert (out / "uci.png").stat().st_size > 1000
    cells = [json.loads(x) for x in (out / "uci_cells.jsonl").read_text().splitlines()]
    assert len(cells) == 2 and {c["protocol"] for c in cells} == {PROTOCOL}

    # --resume finds both cells and runs nothing; --from-cells rebuilds the same table
    assert _cli(tmp_path / "data", out, "--splits", "2", "--resume") == 0
    assert len((out / "uci_cells.jsonl").read_text().splitlines()) == 2
    again = tmp_path / "again"
    assert _cli(tmp_path / "data", again, "--splits", "2", "--from-cells", str(out / "uci_cells.jsonl")) == 0

    def row(folder):
        return next(line for line in (folder / "uci.md").read_text().splitlines() if "| toyset |" in line)

    assert row(again).split("|")[3:9] == row(out).split("|")[3:9]


@pytest.mark.parametrize(
    ("breakage", "named"),
    [
        (lambda f: (f / "data.txt").unlink(), "data.txt"),
        (lambda f: (f / "index_test_1.txt").unlink(), "index_test_1.txt"),
        (lambda f: (f / "index_train_0.txt").write_text("0\n5\n99\n"), "index_train_0.txt"),
        (lambda f: (f / "data.txt").write_text("1 2 3 x\n" * 60), "data.txt"),
    ],
    ids=["missing data.txt", "missing index file", "index out of range", "non-numeric data"],
)
def test_a_bad_layout_ends_in_one_line_that_names_the_file(tmp_path, capsys, breakage, named):
    folder = write_uci_folder(tmp_path / "data")
    breakage(folder)
    out = tmp_path / "out"
    assert _cli(tmp_path / "data", out, "--splits", "2") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("bnnkit: error: ") and "Traceback" not in err
    assert str(folder / named) in err
    assert not (out / "uci_cells.jsonl").exists()  # checked before anything ran or was written


def test_an_unknown_name_without_a_folder_says_where_it_looked(tmp_path, capsys):
    (tmp_path / "data").mkdir()
    assert _cli(tmp_path / "data", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert "Known names" in err and str(tmp_path / "data" / "uci" / "toyset") in err


def test_run_uci_arrays_runs_the_protocol_on_arrays_in_memory(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 2))
    y = np.sin(x[:, 0]) + 0.1 * rng.normal(size=50)
    kw = dict(quick=True, progress=False, log=lambda s: None)
    rep = run_uci_arrays(x, y, splits=2, methods=["mcdropout"], name="mine", out=tmp_path / "a", **kw)
    assert [(c["dataset"], c["split"]) for c in rep["cells"]] == [("mine", 0), ("mine", 1)]
    assert "| mine | mcdropout |" in rep["markdown"] and "run_uci_arrays" in rep["command"]
    assert rep["published"] == {} and (tmp_path / "a" / "uci.csv").is_file()
    # the same splits given as index pairs (as a UCI-layout folder would) give the same numbers
    data = uci.UCIData.from_arrays(x, y, splits=2, name="mine")
    given = run_uci_arrays(
        torch.as_tensor(x),
        y,
        splits=data.splits,
        methods=["mcdropout"],
        name="mine",
        out=tmp_path / "b",
        **kw,
    )
    assert [c["rmse"] for c in given["cells"]] == [c["rmse"] for c in rep["cells"]]
    # and so does the folder itself through run_uci
    folder = tmp_path / "data" / "uci" / "mine"
    folder.mkdir(parents=True)
    np.savetxt(folder / "data.txt", np.column_stack([x, y]))
    (folder / "index_features.txt").write_text("0\n1\n")
    (folder / "index_target.txt").write_text("2\n")
    for i, (train, test) in enumerate(data.splits):
        np.savetxt(folder / f"index_train_{i}.txt", train, fmt="%d")
        np.savetxt(folder / f"index_test_{i}.txt", test, fmt="%d")
    fold = run_uci(["mine"], ["mcdropout"], splits=2, out=tmp_path / "c", root=str(tmp_path / "data"), **kw)
    assert [c["rmse"] for c in fold["cells"]] == pytest.approx([c["rmse"] for c in rep["cells"]], rel=1e-5)
    with pytest.raises(BnnkitError, match="unknown method"):
        run_uci_arrays(x, y, methods=["sgd"], out=tmp_path / "d")
    with pytest.raises(BnnkitError, match="known UCI data set"):
        run_uci_arrays(x, y, name="boston", out=tmp_path / "d")


def test_the_stored_cells_of_earlier_protocols_are_not_this_protocols(tmp_path):
    """docs/results/uci/ holds cells of protocols 2-10, whose tables are rebuilt at the commit that
    wrote them: --from-cells leaves them out and says so."""
    stored = Path(__file__).resolve().parents[2] / "docs" / "results" / "uci" / "yacht.jsonl"
    if not stored.is_file():
        pytest.skip("docs/results/uci/yacht.jsonl not found")
    said: list[str] = []
    with pytest.raises(BnnkitError, match="holds no cell"):
        run_uci(
            ["yacht"], ["mcdropout", "ensemble"], splits=10, out=tmp_path, from_cells=stored, log=said.append
        )
    assert any("left out 20 cell(s)" in s and "commit that wrote it" in s for s in said)


def test_the_table_shows_published_numbers_in_original_units_beside_ours():
    cells = [
        dict(
            dataset=d, split=0, method="mcdropout", rmse_std=0.3, nll_std=0.1, rmse=2.9, nll=2.5, seconds=1.0
        )
        for d in ("bostonHousing", "toyset")
    ]
    rep = make_report(cells, ["boston", "toyset"], ["mcdropout"], 1, False, 0, "cmd")
    md = rep["markdown"]
    assert "| bostonHousing | mcdropout | 0.300 |" in md
    assert "| bostonHousing | published pbp | - | - | - | - | 3.014 +- 0.18 | 2.57 +- 0.09 | - |" in md
    assert "| bostonHousing | published mcdropout | - | - | - | - | 2.97 +- 0.19 | 2.46 +- 0.06 | - |" in md
    assert "| bostonHousing | published ensemble | - | - | - | - | 3.28 +- 1.00 |" in md
    assert "| bostonHousing | published sghmc_adapted | - | - | - | - | - | 2.54 +- 0.04 | - |" in md
    assert "Gal & Ghahramani, ICML 2016" in md and "Springenberg et al., NeurIPS 2016" in md
    assert "| toyset | mcdropout | 0.300 |" in md and "| toyset | published" not in md
    assert rep["published"]["bostonHousing"]["pbp"]["rmse"] == (3.014, 0.180)
    assert "toyset" not in rep["published"]


def test_resume_keeps_cells_only_of_the_same_data(tmp_path):
    """Each cell carries its split's data checksum; ``resume`` refuses cells of data that has
    changed since (naming the set and split) before anything runs, and keeps, with a note, cells
    written before the checksum was recorded."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 2))
    y = x[:, 0] + 0.1 * rng.normal(size=40)
    said: list[str] = []
    kw = dict(
        splits=2,
        methods=["mcdropout"],
        name="mine",
        out=tmp_path,
        quick=True,
        progress=False,
        log=said.append,
    )
    first = run_uci_arrays(x, y, **kw)["cells"]
    assert len({c["data_sha256"] for c in first}) == 2  # one checksum per split
    again = run_uci_arrays(x, y, resume=True, **kw)["cells"]
    assert [c["rmse"] for c in again] == [c["rmse"] for c in first]  # reused, not rerun
    cells = (tmp_path / "uci_cells.jsonl").read_text()
    y2 = y.copy()
    y2[3] += 1.0
    with pytest.raises(BnnkitError, match=r"mine split \d computed on other data than the arrays given"):
        run_uci_arrays(x, y2, resume=True, **kw)
    assert (tmp_path / "uci_cells.jsonl").read_text() == cells  # nothing ran, nothing was written
    # a cell of an older bnnkit (no checksum) is kept, and said so
    old = [{k: v for k, v in json.loads(c).items() if k != "data_sha256"} for c in cells.splitlines()]
    (tmp_path / "uci_cells.jsonl").write_text("".join(json.dumps(c) + "\n" for c in old))
    said.clear()
    kept = run_uci_arrays(x, y2, resume=True, **kw)["cells"]
    assert [c["rmse"] for c in kept] == [c["rmse"] for c in first]
    assert any("2 resumed cell(s) carry no data checksum" in s for s in said)
    # a folder of other files is not a bench output: refused, its files left alone
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine\n")
    with pytest.raises(
        BnnkitError, match="is not empty .notes.txt. and is not the output of a bnnkit bench uci"
    ):
        run_uci_arrays(x, y, **{**kw, "out": tmp_path / "other"})
    assert [p.name for p in (tmp_path / "other").iterdir()] == ["notes.txt"]
