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


def test_uci_protocol_choices_are_the_bench_stock_versions():
    """The CLI lists the UCI versions without importing the bench; they must be its stock ones, newest
    (the default) last."""
    from bnnkit.bench.uci.protocol import PROTOCOL, STOCK_VERSIONS
    from bnnkit.cli.main import build_parser

    action = next(
        a
        for a in build_parser()
        ._subparsers._group_actions[0]
        .choices["bench"]
        ._subparsers._group_actions[0]
        .choices["uci"]
        ._actions
        if a.dest == "protocol"
    )
    assert tuple(action.choices) == STOCK_VERSIONS and action.default == PROTOCOL
