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


@pytest.mark.skipif(not (DATA / "mushroom").exists(), reason="needs ../shared/data/mushroom")
def test_bench_bandit_resume_and_from_runs_cli(tmp_path):
    args = ["bench", "bandit", "--quick", "--methods", "greedy0", "--seeds", "0", "--steps", "30"]
    args += ["--data", str(DATA), "--no-progress"]
    out = tmp_path / "bandit"
    assert main(args + ["--out", str(out)]) == 0
    assert main(args + ["--out", str(out), "--resume"]) == 0
    assert "reused 1 of its 1 runs" in (out / "bandit.md").read_text()
    again = tmp_path / "again"
    assert main(args + ["--out", str(again), "--from-runs", str(out / "bandit_runs.jsonl")]) == 0

    def row(folder):
        return next(
            line for line in (folder / "bandit.md").read_text().splitlines() if line.startswith("| greedy0 |")
        )

    assert row(again) == row(out)


def test_bad_input_ends_in_one_line_that_says_what_to_change(tmp_path, capsys):
    args = ["bench", "uci", "--datasets", "yacht", "--methods", "sgld", "--splits", "2", "--first-split", "3"]
    assert main(args + ["--out", str(tmp_path), "--quick"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith("bnnkit: error: --first-split 3 must lie below --splits 2") and "Traceback" not in err
    )
    assert main(["bench", "bandit", "--methods", "nosuch", "--out", str(tmp_path)]) == 2
    assert "nosuch" in capsys.readouterr().err
    for bad, says in (("[1]", "got list"), ("{noise: 1}", "must be a JSON object")):
        assert main(["bench", "bandit", "--quick", "--config", bad, "--out", str(tmp_path)]) == 2
        assert says in capsys.readouterr().err


def test_a_stop_by_ctrl_c_says_where_the_finished_work_is(tmp_path, capsys, monkeypatch):
    import bnnkit.bench.bandit as bandit

    def stopped(*args, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(bandit, "run_bandit", stopped)
    assert main(["bench", "bandit", "--quick", "--out", str(tmp_path / "b")]) == 130
    err = capsys.readouterr().err
    assert f"kept in {tmp_path / 'b'}" in err and "--resume" in err


def _uci_parser():
    from bnnkit.cli.main import build_parser

    bench = build_parser()._subparsers._group_actions[0].choices["bench"]
    return bench._subparsers._group_actions[0].choices["uci"]


def test_uci_methods_are_the_fit_methods():
    """The CLI names fit's methods without importing them (`bnnkit --help` stays fast): they must be
    bnnkit.api.METHODS, and its default list the bench's."""
    from bnnkit.api import METHODS
    from bnnkit.bench.uci import DEFAULT_METHODS

    action = next(a for a in _uci_parser()._actions if a.dest == "methods")
    assert action.help.split(" from ")[1].split(" (default")[0] == ",".join(METHODS)
    assert action.default == ",".join(DEFAULT_METHODS)


@pytest.mark.parametrize("flag", [["--protocol", "3"], ["--tune"]])
def test_the_old_protocol_flags_are_gone(flag, tmp_path, capsys):
    assert main(["bench", "uci", "--quick", "--out", str(tmp_path), *flag]) == 2
    assert "unrecognized arguments" in capsys.readouterr().err
    assert "reproduced from the commit and command that made them" in _uci_parser().description
