"""The bad-input catalogue of the command line (issue 45, item 5): every user error ends in one
line, ``bnnkit: error: <what to change>``, with exit status 2 and no traceback, and the line names
the option or path at fault.  Output paths are checked before any work starts, and ``bench uci
--resume`` refuses cells computed on other data, and folders that are not a bench output."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from bnnkit.cli.main import main
from tests.helpers import write_uci_folder


def _run(argv: list[str], capsys) -> tuple[int, str]:
    """The exit status and stderr of ``bnnkit ARGV`` run in-process."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as stop:  # pragma: no cover - main returns the status; argparse may not
        code = stop.code
    return code, capsys.readouterr().err


def _fails_in_one_line(argv: list[str], capsys, *named: str) -> str:
    code, err = _run(argv, capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1, err
    assert lines[0].startswith("bnnkit: error: ") and "Traceback" not in err, err
    for name in named:
        assert name in lines[0], (name, lines[0])
    return lines[0]


# bad option values: refused as the arguments are read (no data, no output folder needed)
OPTIONS = [
    (["bench", "uci", "--threads", "0"], ["--threads", "got 0"]),
    (["bench", "uci", "--threads", "-2"], ["--threads", "got -2"]),
    (["bench", "uci", "--threads", "two"], ["--threads", "'two'"]),
    (["bench", "uci", "--threads", "100000"], ["--threads", "1..1024"]),
    (["bench", "uci", "--splits", "-1"], ["--splits", "got -1"]),
    (["bench", "uci", "--splits", "0"], ["--splits", ">= 1"]),
    (["bench", "uci", "--first-split", "-1"], ["--first-split", "got -1"]),
    (["bench", "uci", "--splits", "2", "--first-split", "3"], ["--first-split 3", "--splits 2"]),
    (["bench", "uci", "--first-split", "10"], ["--first-split 10", "--splits 10"]),
    (["bench", "uci", "--seed", "-1"], ["--seed", "got -1"]),
    (["bench", "uci", "--seed", "1.5"], ["--seed", "'1.5'"]),
    (["bench", "uci", "--methods", ","], ["--methods", "at least one name"]),
    (["bench", "uci", "--datasets", ""], ["--datasets", "at least one name"]),
    (["bench", "uci", "--no-such-flag"], ["unrecognized arguments: --no-such-flag"]),
    (["bench", "image", "--width", "0"], ["--width", "got 0"]),
    (["bench", "image", "--dataset", "cifar"], ["--dataset", "'cifar'"]),
    (["bench", "image", "--model", "vgg"], ["--model", "'vgg'"]),
    (["bench", "image", "--threads", "0"], ["--threads"]),
    (["bench", "bandit", "--steps", "0"], ["--steps", "got 0"]),
    (["bench", "bandit", "--threads", "-1"], ["--threads"]),
    (["bench", "bandit", "--patterns", "0.4,x"], ["--patterns", "comma-separated floats", "'0.4,x'"]),
    (["bench", "bandit", "--seeds", "0,1.5"], ["--seeds", "comma-separated ints", "'0,1.5'"]),
    (["demo", "--chains", "0"], ["--chains", "got 0"]),
    (["demo", "--samples", "-5"], ["--samples", "got -5"]),
    (["demo", "--warmup", "-1"], ["--warmup", "got -1"]),
    (["demo", "--leapfrog", "0"], ["--leapfrog"]),
    (["demo", "--threads", "0"], ["--threads"]),
    (["demo", "--chain-method", "parallel"], ["--chain-method", "'parallel'"]),
    (["experiment", "extrapolation", "--step-size", "-1"], ["--step-size", "'-1'"]),
    (["experiment", "extrapolation", "--step-size", "nan"], ["--step-size", "'nan'"]),
    (["experiment", "extrapolation", "--friction", "0"], ["--friction"]),
    (["experiment", "nosuch"], ["'nosuch'"]),
    (["nosuch"], ["'nosuch'"]),
    (["bench"], ["required"]),
]


@pytest.mark.parametrize(("argv", "named"), OPTIONS, ids=[" ".join(a) for a, _ in OPTIONS])
def test_a_bad_option_value_fails_in_one_line_that_names_it(argv, named, capsys):
    line = _fails_in_one_line(argv, capsys, *named)
    assert "usage:" not in line


def test_help_still_exits_0(capsys):
    assert main(["bench", "uci", "--help"]) == 0
    assert "--threads" in capsys.readouterr().out


# bad names and values that the commands check before they run anything
def test_an_unknown_method_or_data_set_is_named(tmp_path, capsys):
    (tmp_path / "data").mkdir()
    uci = ["bench", "uci", "--data", tmp_path / "data", "--quick", "--out", tmp_path / "o"]
    _fails_in_one_line([*uci, "--methods", "sgd"], capsys, "unknown method 'sgd'")
    _fails_in_one_line([*uci, "--datasets", "nosuchset"], capsys, "'nosuchset'", str(tmp_path / "data"))
    _fails_in_one_line([*uci, "--datasets", "../etc"], capsys, "'../etc'")
    _fails_in_one_line([*uci, "--from-cells", tmp_path / "none.jsonl"], capsys, str(tmp_path / "none.jsonl"))
    assert not (tmp_path / "o").exists()  # nothing was written for a run that cannot start
    _fails_in_one_line(["bench", "bandit", "--methods", "nosuch", "--out", tmp_path / "b"], capsys, "nosuch")
    _fails_in_one_line(["bench", "bandit", "--config", "[1]", "--out", tmp_path / "b"], capsys, "--config")
    _fails_in_one_line(["bench", "image", "--methods", "hmc", "--out", tmp_path / "i"], capsys, "'hmc'")


# output paths: checked before any work starts
@pytest.fixture
def a_file(tmp_path) -> Path:
    path = tmp_path / "afile.txt"
    path.write_text("keep me\n")
    return path


@pytest.mark.parametrize("command", [["bench", "uci"], ["bench", "image"], ["bench", "bandit"]])
def test_out_naming_an_existing_file_is_refused(command, a_file, capsys):
    _fails_in_one_line([*command, "--quick", "--out", a_file], capsys, str(a_file), "existing file")
    assert a_file.read_text() == "keep me\n"


def test_out_under_a_file_is_refused(a_file, capsys):
    _fails_in_one_line(["bench", "uci", "--quick", "--out", a_file / "sub"], capsys, str(a_file), "is a file")
    _fails_in_one_line(["experiment", "extrapolation", "--out", a_file / "x"], capsys, str(a_file))
    _fails_in_one_line(["demo", "--out", a_file / "d.png"], capsys, str(a_file), "is a file")


@pytest.fixture
def a_foreign_folder(tmp_path) -> Path:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("not a bench output\n")
    (folder / "uci.csv").write_text("my,own,table\n")
    return folder


@pytest.mark.parametrize(
    "command",
    [
        ["bench", "uci"],
        ["bench", "uci", "--resume"],
        ["bench", "image", "--resume"],
        ["bench", "bandit", "--resume"],
    ],
)
def test_a_folder_that_is_not_a_bench_output_is_refused(command, a_foreign_folder, capsys):
    line = _fails_in_one_line([*command, "--quick", "--out", a_foreign_folder], capsys, str(a_foreign_folder))
    assert "not empty" in line and "notes.txt" in line
    assert sorted(p.name for p in a_foreign_folder.iterdir()) == ["notes.txt", "uci.csv"]
    assert (a_foreign_folder / "uci.csv").read_text() == "my,own,table\n"  # left as it was


def _unwritable(tmp_path: Path) -> Path:
    """A folder that cannot be written into, even by root (``/sys`` is a read-only file system)."""
    folder = Path("/sys")
    try:
        (folder / f".bnnkit-test-{os.getpid()}").write_bytes(b"")
    except OSError:
        return folder
    pytest.skip("no unwritable folder here (/sys could be written)")


def test_an_unwritable_out_is_refused_before_anything_runs(tmp_path, capsys, monkeypatch):
    folder = _unwritable(tmp_path)
    _fails_in_one_line(
        ["bench", "uci", "--quick", "--out", folder / "bnnkit-out"], capsys, str(folder / "bnnkit-out")
    )

    import bnnkit

    def never(*args, **kwargs):  # pragma: no cover - the point is that it is not reached
        raise AssertionError("the demo sampled before checking its --out")

    monkeypatch.setattr(bnnkit, "sample", never)
    t0 = time.perf_counter()
    _fails_in_one_line(
        ["demo", "--out", folder / "demo.png", "--no-progress"], capsys, str(folder / "demo.png")
    )
    assert time.perf_counter() - t0 < 10.0


def test_a_folder_that_refuses_writes_is_named(tmp_path, capsys, monkeypatch):
    # root passes permission bits: the check's os.access answer is what a normal user would get
    ro = tmp_path / "readonly"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == ro else real(p, mode, **kw))
    _fails_in_one_line(["bench", "uci", "--quick", "--out", ro], capsys, str(ro), "cannot write")
    _fails_in_one_line(["demo", "--out", ro / "d.png"], capsys, str(ro / "d.png"))


def test_demo_out_must_be_a_figure_file(tmp_path, capsys):
    _fails_in_one_line(["demo", "--out", tmp_path], capsys, str(tmp_path), "is a folder")
    _fails_in_one_line(["demo", "--out", tmp_path / "d.xyz"], capsys, str(tmp_path / "d.xyz"), "'xyz'")


def test_an_os_error_inside_a_command_is_one_line_naming_the_path(tmp_path, capsys, monkeypatch):
    import bnnkit.bench.uci as uci

    def denied(**kwargs):
        raise PermissionError(13, "Permission denied", str(tmp_path / "o" / "uci.json"))

    monkeypatch.setattr(uci, "run_uci", denied)
    line = _fails_in_one_line(
        ["bench", "uci", "--quick", "--out", tmp_path / "o"], capsys, "Permission denied"
    )
    assert str(tmp_path / "o" / "uci.json") in line


# bench uci --resume: the data of every kept cell
def _uci(data: Path, out: Path, *extra) -> list:
    args = ["bench", "uci", "--data", data, "--datasets", "toyset", "--methods", "mcdropout", "--splits", "2"]
    return [*args, "--quick", "--out", out, "--no-progress", *extra]


def test_resume_refuses_cells_computed_on_other_data(tmp_path, capsys):
    folder = write_uci_folder(tmp_path / "data")
    out = tmp_path / "out"
    assert _run(_uci(tmp_path / "data", out), capsys)[0] == 0
    cells = (out / "uci_cells.jsonl").read_text()
    assert all(len(json.loads(c)["data_sha256"]) == 64 for c in cells.splitlines())
    assert _run(_uci(tmp_path / "data", out, "--resume"), capsys)[0] == 0  # the same data: kept
    # split 1's test rows change: its cells are not this data's numbers
    rows = (folder / "index_test_1.txt").read_text().split()
    (folder / "index_test_1.txt").write_text("\n".join(rows[:-1]) + "\n")
    (folder / "index_train_1.txt").write_text((folder / "index_train_1.txt").read_text() + rows[-1] + "\n")
    line = _fails_in_one_line(
        _uci(tmp_path / "data", out, "--resume"), capsys, "toyset split 1", "other data"
    )
    assert "without --resume" in line
    assert (out / "uci_cells.jsonl").read_text() == cells  # nothing ran, nothing was written

    # --from-cells does not join cells of one split computed on different data
    first = json.loads(cells.splitlines()[0])
    other = {**first, "method": "ensemble", "data_sha256": "0" * 64}
    joined = tmp_path / "joined.jsonl"
    joined.write_text(json.dumps(first) + "\n" + json.dumps(other) + "\n")
    args = _uci(tmp_path / "data", tmp_path / "rebuilt", "--from-cells", joined)
    args[args.index("mcdropout")] = "mcdropout,ensemble"
    _fails_in_one_line(args, capsys, str(joined), "toyset split 0", "different data")
