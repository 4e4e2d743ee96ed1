"""`bnnkit bench uci`: every method of bnnkit.fit, each cell what `fit(method=...)` gives, end to end."""

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

import bnnkit.bench.uci.cell as cell_module
import bnnkit.bench.uci.runner as runner
from bnnkit.api import METHODS, fit
from bnnkit.bench.uci import FULL, PROTOCOL, QUICK, UCIData, make_report, run_uci, run_uci_arrays
from bnnkit.bench.uci.records import read_cells, same_run, seconds_total
from bnnkit.core.errors import BnnkitError, DivergenceError
from bnnkit.core.random import global_rng_seeded
from bnnkit.nets import mlp

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
needs_data = pytest.mark.skipif(not (DATA / "uci").exists(), reason="needs ../shared/data/uci")
QUIET = dict(quick=True, progress=False, log=lambda s: None)


def _arrays(n=80, d=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    return x, x[:, 0] + 0.1 * torch.randn(n, generator=g)


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
@needs_data
def test_uci_quick_runs_every_fit_method(tmp_path):
    state = torch.get_rng_state()
    report = run_uci(["boston"], list(METHODS), splits=1, out=tmp_path, root=str(DATA), **QUIET)
    assert torch.equal(torch.get_rng_state(), state)  # the caller's global RNG is left alone
    rows = list(csv.DictReader((tmp_path / "uci.csv").open()))
    assert [r["method"] for r in rows] == list(METHODS)
    from bnnkit.data import load_uci

    y_std = load_uci("boston", 0, root=str(DATA)).y_std
    for r in rows:  # quick mode is too short to converge: check the pipeline, not the accuracy
        assert 0.0 < float(r["rmse_std"]) < float("inf") and float(r["nll_std"]) < float("inf")
        assert abs(float(r["rmse"]) / float(r["rmse_std"]) - y_std) < 1e-3 * y_std  # unit conversion
        assert r["protocol"] == str(PROTOCOL) and len(r["data_sha256"]) == 64
    md = (tmp_path / "uci.md").read_text()
    assert "paper RMSE" in md and "| bostonHousing | sghmc |" in md and "1.31 +- 0.06" in md
    again = json.loads((tmp_path / "uci.json").read_text())
    assert again["command"] == report["command"] and again["quick"] is True
    assert again["protocol"]["hidden"] == QUICK.hidden and again["protocol"]["version"] == PROTOCOL


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_a_cell_is_what_fit_gives_with_its_defaults(tmp_path):
    """The full protocol's mcdropout cell on a split is ``bnnkit.fit(method="mcdropout")`` on that
    split with no option: the noise the bench passes is the one fit's own GP gives."""
    x, y = _arrays(60, 2)
    (cell,) = run_uci_arrays(x, y, splits=1, methods=["mcdropout"], name="mine", out=tmp_path, progress=False,
                             log=lambda s: None)["cells"]  # fmt: skip
    split = UCIData.from_arrays(x, y, 1, name="mine").split(0)
    with global_rng_seeded(0):
        net = mlp(2, FULL.hidden)
    f = fit(
        net, (split.x_train, split.y_train), method="mcdropout", seed=0, progress=False, standardize=False
    )
    m = f.evaluate(split.x_test, split.y_test)
    assert (cell["rmse_std"], cell["nll_std"]) == pytest.approx((m["rmse"], m["nll"]), rel=1e-6)
    assert cell["seconds_total"] == cell["seconds"] + cell["gp_fit_seconds"]


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_the_split_gp_is_fitted_once_and_only_for_the_methods_that_take_its_noise(tmp_path, monkeypatch):
    calls = []
    real = cell_module.split_gp
    monkeypatch.setattr(runner, "split_gp", lambda *a: (calls.append(a[2]), real(*a))[1])
    x, y = _arrays()
    alone = run_uci_arrays(x, y, splits=2, methods=["hmc"], out=tmp_path / "a", seed=3, **QUIET)["cells"]
    assert calls == []
    for c in alone:  # a sampler samples its noise: nothing of the GP in its cell, its total its own
        assert "gp_fit_seconds" not in c and c["seconds_total"] == c["seconds"]
        assert c["rhat"] >= 1.0 and c["draws_per_chain"] == QUICK.options["hmc"]["draws"]
    beside = run_uci_arrays(x, y, splits=2, methods=["hmc", "mcdropout", "bbb"], out=tmp_path / "b", seed=3,
                            **QUIET)["cells"]  # fmt: skip
    assert calls == [3, 4]  # once per split, seeded seed + split
    assert [(c["rmse"], c["nll"]) for c in alone] == [(c["rmse"], c["nll"]) for c in beside[::3]]
    vi = [c for c in beside if c["method"] != "hmc"]
    assert all(c["noise_std_standardised"] > 0 and c["gp_fit_seconds"] > 0 for c in vi)
    assert all(c["seconds_total"] == c["seconds"] + c["gp_fit_seconds"] for c in vi)


def test_the_report_shows_the_seconds_a_user_pays():
    def cell(method, split, seconds, gp=None, **kw):
        return dict(dataset="energy", split=split, method=method, rmse_std=0.1, nll_std=0.1, rmse=1.0, nll=1.0,
                    seconds=seconds, gp_fit_seconds=gp, **kw)  # fmt: skip

    # a cell written before seconds_total gets it computed: the GP counts only where its noise is used
    assert (
        seconds_total(cell("bbb", 0, 10.0, 5.0)) == 15.0
        and seconds_total(cell("default", 0, 10.0, 5.0)) == 10.0
    )
    cells = [
        cell("bbb", 0, 10.0, 5.0),
        cell("bbb", 1, 20.0, 7.0, seconds_total=27.0),
        cell("default", 0, 30.0, 6.0),
    ]
    rep = make_report(cells, ["energy"], ["bbb", "default"], 2, False, 0, "cmd")
    assert rep["summary"]["energy"]["bbb"]["seconds_total"][0] == 21.0
    assert rep["summary"]["energy"]["bbb"]["seconds"][0] == 15.0
    md = rep["markdown"]
    assert "| energy | bbb | 0.100 +- 0.000 |" in md and md.split("| energy | bbb |")[1].split("\n")[
        0
    ].endswith(" 21 |")
    assert md.split("| energy | default |")[1].split("\n")[0].endswith(" 30 |")
    assert "the GP fit that gives their noise" in md


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_uci_second_run_gives_the_same_numbers_and_a_stopped_run_rebuilds(tmp_path):
    x, y = _arrays()
    kw = dict(splits=1, methods=["sghmc", "fsgld"], name="mine", **QUIET)
    a = run_uci_arrays(x, y, out=tmp_path / "a", **kw)
    b = run_uci_arrays(x, y, out=tmp_path / "b", **kw)
    assert [c["rmse"] for c in a["cells"]] == [c["rmse"] for c in b["cells"]]
    assert (tmp_path / "a" / "uci.png").stat().st_size > 10_000  # RMSE / NLL per method
    if not (DATA / "uci").exists():
        return
    # a run stopped after its first cell: the tables come back from uci_cells.jsonl
    kw = dict(root=str(DATA), **QUIET)
    whole = run_uci(["yacht"], ["bbb", "mcdropout"], splits=1, out=tmp_path / "c", **kw)
    cells = tmp_path / "stopped.jsonl"
    cells.write_text((tmp_path / "c" / "uci_cells.jsonl").read_text().splitlines()[0] + "\n")
    r = run_uci(["yacht"], ["bbb", "mcdropout"], splits=3, out=tmp_path / "d", from_cells=cells, **kw)
    assert r["rebuilt_from_cells"] and [c["rmse"] for c in r["cells"]] == [whole["cells"][0]["rmse"]]
    assert "yacht [0]" in r["markdown"] and "over 3 split(s)" not in r["markdown"]
    assert "| mcdropout | no finished split |" in r["markdown"]  # no number invented for it
    with pytest.raises(BnnkitError, match="holds no cell"):
        run_uci(["boston"], ["bbb"], splits=1, out=tmp_path / "e", from_cells=cells, **kw)


@pytest.mark.parametrize("method", ["sgd", "fbnn", "csgld", "sgld"])
def test_a_method_fit_does_not_run_is_refused(tmp_path, method):
    with pytest.raises(BnnkitError, match=f"unknown method '{method}'; choose from default, sghmc, .*, bbb"):
        run_uci(["boston"], [method], out=tmp_path)


def test_a_diverged_chain_is_a_diverged_cell_not_an_error(tmp_path, monkeypatch):
    def diverges(*a, **k):
        raise DivergenceError("the chain diverged at step 3", [0], 3)

    monkeypatch.setattr(cell_module, "fit", diverges)
    x, y = _arrays()
    rep = run_uci_arrays(x, y, splits=2, methods=["default"], out=tmp_path, **QUIET)
    assert all(math.isnan(c["rmse"]) and "step 3" in c["diverged"] for c in rep["cells"])
    assert "| arrays | default | diverged in all 2 split(s) |" in rep["markdown"]


def test_diverged_splits_are_reported_not_averaged():
    def cell(split, method, r):
        return dict(
            dataset="energy", split=split, method=method, rmse_std=r, nll_std=r, rmse=r, nll=r, seconds=1.0
        )

    nan = float("nan")
    cells = [cell(0, "sghmc", 0.3), cell(1, "sghmc", nan), cell(0, "fsgld", nan), cell(1, "fsgld", nan)]
    rep = make_report(cells, ["energy"], ["sghmc", "fsgld"], 2, False, 0, "cmd")
    md = rep["markdown"]
    assert "| energy | sghmc (1 of 2 splits diverged, not averaged) | 0.300 |" in md
    assert "| energy | fsgld | diverged in all 2 split(s) |" in md
    assert rep["summary"]["energy"]["fsgld"] == {"diverged": 2}
    assert rep["summary"]["energy"]["sghmc"]["diverged"] == 1


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_resume_runs_only_the_missing_cells_and_gives_a_single_runs_numbers(tmp_path, monkeypatch):
    x, y = _arrays()
    kw = dict(name="mine", methods=["hmc", "bbb"], **QUIET)
    whole = run_uci_arrays(x, y, splits=2, out=tmp_path / "whole", **kw)

    # a run stopped inside split 1, killed while writing its last cell
    out = tmp_path / "stopped"
    run_uci_arrays(x, y, splits=1, out=out, **kw)
    lines = (out / "uci_cells.jsonl").read_text().splitlines()
    first_of_split1 = json.dumps(whole["cells"][2])
    (out / "uci_cells.jsonl").write_text("\n".join([*lines, first_of_split1, '{"dataset": "mi']) + "\n")
    ran = []
    real = runner.run_cell
    monkeypatch.setattr(runner, "run_cell", lambda m, *a, **k: (ran.append(m), real(m, *a, **k))[1])
    said = []
    resumed = run_uci_arrays(x, y, splits=2, out=out, resume=True, **{**kw, "log": said.append})
    assert ran == ["bbb"] and any("cut short" in s for s in said)  # only split 1's bbb was missing
    assert [c["rmse"] for c in resumed["cells"]] == [c["rmse"] for c in whole["cells"]]
    assert len((out / "uci_cells.jsonl").read_text().splitlines()) == 4

    # cells of another protocol are not reused, and --from-cells takes the rerun, not the stale line
    ran.clear()
    old = [json.loads(c) for c in (out / "uci_cells.jsonl").read_text().splitlines()]
    assert {c["protocol"] for c in old} == {PROTOCOL}
    old[0]["protocol"] = 10
    (out / "uci_cells.jsonl").write_text("".join(json.dumps(c) + "\n" for c in old))
    run_uci_arrays(x, y, splits=2, out=out, resume=True, **kw)
    assert ran == ["hmc"]


def test_from_cells_takes_one_protocol_and_the_later_of_two_lines(tmp_path):
    x, y = _arrays()
    kw = dict(name="mine", methods=["bbb"], **QUIET)
    run_uci_arrays(x, y, splits=1, out=tmp_path / "a", **kw)
    (c,) = [json.loads(line) for line in (tmp_path / "a" / "uci_cells.jsonl").read_text().splitlines()]
    joined = tmp_path / "joined.jsonl"
    joined.write_text(
        "".join(json.dumps(v) + "\n" for v in (c, {**c, "rmse_std": 9.0}, {**c, "protocol": 10}))
    )
    said = []
    got = read_cells(joined, ["mine"], ["bbb"], said.append, 0, True)
    assert [v["rmse_std"] for v in got] == [9.0]
    assert any("left out 1 cell" in s and "commit that wrote it" in s for s in said)
    assert any("superseded" in s for s in said)


def test_cells_are_matched_on_protocol_seed_mode_and_kind():
    cell = {"dataset": "toyset", "split": 1, "method": "bbb", "seed": 6, "quick": False, "protocol": PROTOCOL}
    assert same_run(cell, 5, False) and not same_run(cell, 0, False) and not same_run(cell, 5, True)
    assert not same_run(cell, 5, False, "gap") and same_run({**cell, "split_kind": "gap"}, 5, False, "gap")
    # protocol 10 ran default, ensemble, mcdropout, laplace and bbb as fit does: their full cells count
    assert same_run({**cell, "protocol": 10}, 5, False)
    assert not same_run({**cell, "protocol": 10, "quick": True}, 5, True)  # its quick mode was another
    assert not same_run({**cell, "protocol": 10, "method": "sghmc"}, 5, False)
    assert not same_run({**cell, "protocol": 9}, 5, False) and not same_run(
        {**cell, "protocol": None}, 5, False
    )


def test_the_protocol_is_one_frozen_config():
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        FULL.hidden = 10  # type: ignore[misc]
    with pytest.raises(TypeError):
        QUICK.options["bbb"]["draws"] = 5  # type: ignore[index]
    # the full protocol passes fit nothing beyond its defaults (and the batch it defaults to)
    from bnnkit.api import DEFAULT_RECIPE

    for m in METHODS:
        assert FULL.fit_options(m) == {"batch_size": 32, "recipe": DEFAULT_RECIPE}
    assert QUICK.fit_options("ensemble")["members"] == 2 and QUICK.max_rows == 200
    assert json.loads(json.dumps(QUICK.config()))["recipe"]["chains"] == QUICK.recipe.chains


@needs_data
def test_gp_fit_is_seeded_by_split_and_splits_past_a_sets_own_are_skipped(tmp_path, monkeypatch):
    from bnnkit.functional import GPPrior

    seen = []
    real = GPPrior.fit
    monkeypatch.setattr(GPPrior, "fit", lambda self, *a, **k: (seen.append(k["generator"].initial_seed()),
                                                                real(self, *a, **k))[1])  # fmt: skip
    torch.manual_seed(123)
    run_uci(["yacht"], ["bbb"], splits=2, out=tmp_path / "a", root=str(DATA), seed=5, **QUIET)
    assert seen == [5, 6]  # seed + split, whatever the global RNG holds
    # protein has 5 standard splits: `--splits 10` over several sets must not stop at its split 5
    assert runner.uci_num_splits("protein", root=str(DATA)) == 5
    import bnnkit.data.sources as sources

    for module in (runner, sources):
        monkeypatch.setattr(module, "uci_num_splits", lambda name, root=None: 1)
    said = []
    rep = run_uci(
        ["yacht"], ["bbb"], splits=3, out=tmp_path / "b", root=str(DATA), **{**QUIET, "log": said.append}
    )
    assert [c["split"] for c in rep["cells"]] == [0]
    assert any("only 1 standard splits: splits 1-2 are skipped" in s for s in said)


def test_first_split_runs_the_single_runs_later_splits(tmp_path):
    x, y = _arrays()
    kw = dict(name="mine", methods=["bbb"], **QUIET)
    whole = run_uci_arrays(x, y, splits=2, out=tmp_path / "a", **kw)["cells"]
    data = UCIData.from_arrays(x, y, 2, name="mine")
    folder = tmp_path / "data" / "uci" / "mine2"
    folder.mkdir(parents=True)
    np.savetxt(folder / "data.txt", np.column_stack([x.numpy(), y.numpy()]))
    (folder / "index_features.txt").write_text("0\n1\n2\n")
    (folder / "index_target.txt").write_text("3\n")
    for i, (train, test) in enumerate(data.splits):
        np.savetxt(folder / f"index_train_{i}.txt", train, fmt="%d")
        np.savetxt(folder / f"index_test_{i}.txt", test, fmt="%d")
    alone = run_uci(["mine2"], ["bbb"], splits=2, first_split=1, out=tmp_path / "b", root=str(tmp_path / "data"),
                    **QUIET)  # fmt: skip
    assert [c["split"] for c in alone["cells"]] == [1]
    assert alone["cells"][0]["rmse"] == pytest.approx(whole[1]["rmse"], rel=1e-5)
    assert "--first-split 1" in alone["markdown"] and "1 split(s) (1-1)" in alone["markdown"]
    for bad in (-1, 2):
        with pytest.raises(BnnkitError, match="first_split must lie in 0..1"):
            run_uci(
                ["mine2"], ["bbb"], splits=2, first_split=bad, out=tmp_path / "c", root=str(tmp_path / "data")
            )


def test_a_protocol_15_default_cell_is_taken_only_where_16s_drift_rule_cannot_apply():
    """16 samples again only where a GP was fitted, its noise not held, and the draws' sampled noise
    above 1.15x the MAP phase's held-out RMSE; a 15 cell records all three."""
    from bnnkit.bench.uci.records import same_run

    base = dict(dataset="energy", split=0, method="default", seed=0, quick=False, protocol=15)
    noisy = dict(base, map_heldout_rmse=0.3, noise_gp=None, noise_held=None, noise_sampled=0.3)
    held = dict(base, map_heldout_rmse=0.03, noise_gp=0.01, noise_held=0.01, noise_sampled=None)
    below = dict(base, map_heldout_rmse=0.04, noise_gp=0.03, noise_held=None, noise_sampled=0.046)
    drifted = dict(below, noise_sampled=0.047)  # 1.175x
    for cell, taken in ((noisy, True), (held, True), (below, True), (drifted, False)):
        assert same_run(cell, 0, False) == taken, cell
        assert same_run(dict(cell, method="sghmc"), 0, False) == taken
    assert not same_run(dict(below, noise_sampled=None), 0, False)  # a cell that cannot say
    assert not same_run(dict(base), 0, False)  # nor one without the MAP phase's record
    assert not same_run(dict(below, protocol=14), 0, False)


def test_protocol_14_cells_are_taken_only_for_methods_15_runs_the_same():
    from bnnkit.bench.uci.records import same_run

    def cell(method, protocol=14):
        return dict(dataset="yacht", split=2, method=method, seed=2, quick=False, protocol=protocol)

    assert PROTOCOL == 16
    for method in ("ensemble", "mcdropout", "laplace", "bbb", "nuts", "hmc", "fsgld", "fsghmc"):
        assert same_run(cell(method), 0, False), method  # 16 and 15 run them as 14 did
        assert same_run(cell(method, protocol=15), 0, False), method
    # 15 may hold their noise, and a 14 cell does not say whether it would have
    assert not same_run(cell("default"), 0, False) and not same_run(cell("sghmc"), 0, False)
    assert same_run(cell("default", protocol=16), 0, False)
    assert not same_run(cell("ensemble"), 0, True)  # not in quick mode
    assert not same_run(cell("fsgld", protocol=13), 0, False)  # 13's fsgld ran another MAP cap
    assert same_run(cell("nuts", protocol=13), 0, False)
