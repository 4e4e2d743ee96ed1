"""`bnnkit bench uci --quick` runs every method end to end and writes its tables."""

import csv
import json
import math
from pathlib import Path

import pytest
import torch

import bnnkit.bench.uci as uci
from bnnkit.bench.uci import DEFAULTS, METHODS, _epochs, default_step_size, friction, run_uci, run_uci_arrays
from bnnkit.core.errors import BnnkitError

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


@pytest.mark.skipif(not (DATA / "uci").exists(), reason="needs ../shared/data/uci")
def test_uci_quick_all_methods(tmp_path):
    asked = [{"nuts": "hmc"}.get(m, m) for m in METHODS]  # the gold standard under its alias
    state = torch.get_rng_state()
    report = run_uci(
        ["boston"],
        asked,
        splits=1,
        out=tmp_path,
        root=str(DATA),
        quick=True,
        progress=False,
        log=lambda s: None,
    )
    assert torch.equal(torch.get_rng_state(), state)  # the caller's global RNG is left alone
    rows = list(csv.DictReader((tmp_path / "uci.csv").open()))
    assert {r["method"] for r in rows} == set(METHODS)
    from bnnkit.data import load_uci

    y_std = load_uci("boston", 0, root=str(DATA)).y_std
    for r in rows:  # quick mode is too short to converge: check the pipeline, not the accuracy
        assert 0.0 < float(r["rmse_std"]) < float("inf") and float(r["nll_std"]) < float("inf")
        assert abs(float(r["rmse"]) / float(r["rmse_std"]) - y_std) < 1e-3 * y_std  # unit conversion
    md = (tmp_path / "uci.md").read_text()
    assert "paper RMSE" in md and "1.23 +- 0.06" in md  # published SGLD number beside ours
    assert "| hmc (NUTS) |" in md and "`hmc` is an alias of `nuts`" in md
    assert report["aliases"] == {"hmc": "nuts"} and "--methods " + ",".join(asked) in report["command"]
    asked_as = {"nuts": "hmc"}
    assert uci._method_label("nuts", asked_as) == "hmc (NUTS)"  # the table's and the plot's row
    assert uci._method_label("nuts", {}) == "nuts" and uci._method_label("sgld", asked_as) == "sgld"
    assert "| hmc (NUTS) |" in report["markdown"]
    again = json.loads((tmp_path / "uci.json").read_text())
    assert again["command"] == report["command"] and again["quick"] is True


def test_uci_second_run_gives_the_same_numbers(tmp_path):
    if not (DATA / "uci").exists():
        pytest.skip("needs ../shared/data/uci")
    kw = dict(splits=1, root=str(DATA), quick=True, progress=False, log=lambda s: None)
    a = run_uci(["yacht"], ["sghmc", "fsgld"], out=tmp_path / "a", **kw)
    b = run_uci(["yacht"], ["sghmc", "fsgld"], out=tmp_path / "b", **kw)
    assert [c["rmse"] for c in a["cells"]] == [c["rmse"] for c in b["cells"]]
    assert (tmp_path / "a" / "uci.png").stat().st_size > 10_000  # RMSE / NLL per method

    # a run stopped after its first cell: the tables come back from uci_cells.jsonl
    cells = tmp_path / "stopped.jsonl"
    cells.write_text((tmp_path / "a" / "uci_cells.jsonl").read_text().splitlines()[0] + "\n")
    kw["splits"] = 3
    r = run_uci(["yacht"], ["sghmc", "fsgld"], out=tmp_path / "c", from_cells=cells, **kw)
    assert r["rebuilt_from_cells"] and [c["rmse"] for c in r["cells"]] == [a["cells"][0]["rmse"]]
    assert "stopped before it finished" in r["markdown"] and "yacht [0]" in r["markdown"]
    assert "over 3 split(s)" not in r["markdown"]
    assert "| fsgld | no finished split |" in r["markdown"]  # no number invented for it
    with pytest.raises(BnnkitError, match="holds no cell"):
        run_uci(["boston"], ["sghmc"], out=tmp_path / "d", from_cells=cells, **kw)


def test_a_samplers_cell_does_not_depend_on_the_methods_run_beside_it(tmp_path):
    """nuts and asghmc sample the noise: the GP fit's noise, fitted when a VI baseline runs on the
    split, is the baselines' alone (a regression once gave it to them, fixed)."""
    if not (DATA / "uci").exists():
        pytest.skip("needs ../shared/data/uci")
    kw = dict(splits=1, root=str(DATA), quick=True, progress=False, log=lambda s: None)
    alone = run_uci(["yacht"], ["nuts", "asghmc"], out=tmp_path / "a", **kw)["cells"]
    beside = run_uci(["yacht"], ["nuts", "asghmc", "mcdropout"], out=tmp_path / "b", **kw)["cells"]
    assert alone[0]["noise_std_standardised"] is None and beside[0]["noise_std_standardised"] > 0
    for a, b in zip(alone, beside):
        assert a["method"] == b["method"] and (a["rmse"], a["nll"]) == (b["rmse"], b["nll"])


def test_unknown_method_is_refused(tmp_path):
    with pytest.raises(BnnkitError, match="unknown method.*ensemble, laplace, hmc"):
        run_uci(["boston"], ["sgd"], out=tmp_path)


def test_diverged_splits_are_reported_not_averaged():
    from bnnkit.bench.uci import DEFAULTS, _report

    def cell(split, method, r):
        return dict(
            dataset="energy", split=split, method=method, rmse_std=r, nll_std=r, rmse=r, nll=r, seconds=1.0
        )

    nan = float("nan")
    cells = [cell(0, "sgld", 0.3), cell(1, "sgld", nan), cell(0, "fsgld", nan), cell(1, "fsgld", nan)]
    rep = _report(cells, ["energy"], ["sgld", "fsgld"], 2, False, 0, DEFAULTS)
    md = rep["markdown"]
    assert "| energy | sgld (1 of 2 splits diverged, not averaged) | 0.300 |" in md
    assert "| energy | fsgld | diverged in all 2 split(s) |" in md
    assert rep["summary"]["energy"]["fsgld"] == {"diverged": 2}
    assert rep["summary"]["energy"]["sgld"]["diverged"] == 1


def test_a_method_asked_for_by_its_alias_reads_the_same_in_every_row():
    # NUTS ran on energy only: wine's row says it has no split, under the same name
    cells = [
        dict(
            dataset="energy",
            split=0,
            method="nuts",
            rmse_std=0.1,
            nll_std=0.1,
            rmse=0.1,
            nll=0.1,
            seconds=1.0,
        )
    ]
    rep = uci._report(cells, ["energy", "wine"], ["nuts"], 1, False, 0, DEFAULTS, ["hmc"], rebuilt=True)
    md = rep["markdown"]
    assert "| energy | hmc (NUTS) | 0.100 |" in md
    assert "| wine-quality-red | hmc (NUTS) | no finished split |" in md


def test_tune_chooses_step_sizes_from_the_grid_and_reports_them(tmp_path):
    if not (DATA / "uci").exists():
        pytest.skip("needs ../shared/data/uci")
    from bnnkit.bench.uci import DEFAULTS, QUICK_TUNE

    # protocol 4: sgld and fsgld by protocol 3's tuned recipe (protocol 5 runs them adaptive, untuned)
    rep = run_uci(["yacht"], ["sgld", "fsgld"], splits=1, root=str(DATA), quick=True, progress=False,
                  out=tmp_path, log=lambda s: None, tune=True, protocol=uci.stock_protocol(True, 4))  # fmt: skip
    for c in rep["cells"]:
        grid = [DEFAULTS["step_size"][c["method"]] * f for f in QUICK_TUNE["factors"]]
        assert any(math.isclose(c["step_size"], g) for g in grid), (c["method"], c["step_size"], grid)
        # the cell carries the table it was chosen from: the lowest finite held-out NLL
        table = c["tuning"]
        assert [r["step_size"] for r in table] == pytest.approx(grid)
        best = min((r for r in table if r["finite"]), key=lambda r: r["heldout_nll"])
        assert best["step_size"] == c["step_size"]
    assert "--tune" in rep["command"] and "chosen per split" in rep["markdown"]


def test_resume_runs_only_the_missing_cells_and_gives_a_single_runs_numbers(tmp_path, monkeypatch):
    if not (DATA / "uci").exists():
        pytest.skip("needs ../shared/data/uci")

    kw = dict(root=str(DATA), quick=True, progress=False, log=lambda s: None)
    whole = run_uci(["yacht"], ["sghmc", "bbb"], splits=2, out=tmp_path / "whole", **kw)

    # a run stopped inside split 1, killed while writing its last cell
    out = tmp_path / "stopped"
    run_uci(["yacht"], ["sghmc", "bbb"], splits=1, out=out, **kw)
    lines = (out / "uci_cells.jsonl").read_text().splitlines()
    first_of_split1 = json.dumps(whole["cells"][2])
    (out / "uci_cells.jsonl").write_text("\n".join([*lines, first_of_split1, '{"dataset": "yac']) + "\n")

    ran = []
    real = uci._run_method
    # the runner module calls it (bnnkit.bench.uci re-exports it)
    monkeypatch.setattr(uci.runner, "_run_method", lambda m, *a, **k: (ran.append(m), real(m, *a, **k))[1])
    said = []
    resumed = run_uci(
        ["yacht"], ["sghmc", "bbb"], splits=2, out=out, resume=True, **{**kw, "log": said.append}
    )
    assert ran == ["bbb"]  # only split 1's bbb was missing
    assert any("cut short" in s for s in said)
    assert [c["rmse"] for c in resumed["cells"]] == [c["rmse"] for c in whole["cells"]]
    assert len((out / "uci_cells.jsonl").read_text().splitlines()) == 4

    # a run of split 1 alone (beside one of split 0) gives the single run's split-1 cells
    ran.clear()
    alone = run_uci(["yacht"], ["sghmc", "bbb"], splits=2, first_split=1, out=tmp_path / "alone", **kw)
    assert ran == ["sghmc", "bbb"] and [c["split"] for c in alone["cells"]] == [1, 1]
    assert [c["rmse"] for c in alone["cells"]] == [c["rmse"] for c in whole["cells"][2:]]
    assert "--first-split 1" in alone["markdown"] and "1 split(s) (1-1)" in alone["markdown"]
    for bad in (-1, 2):
        with pytest.raises(BnnkitError, match="first_split must lie in 0..1"):
            run_uci(["yacht"], ["sghmc"], splits=2, first_split=bad, out=tmp_path / "bad", **kw)

    # cells of an older protocol (written before the key existed: protocol 1) are not reused
    ran.clear()
    old = [json.loads(x) for x in (out / "uci_cells.jsonl").read_text().splitlines()]
    assert {c["protocol"] for c in old} == {uci.PROTOCOL}
    old[0].pop("protocol")
    (out / "uci_cells.jsonl").write_text("".join(json.dumps(c) + "\n" for c in old))
    run_uci(["yacht"], ["sghmc", "bbb"], splits=2, out=out, resume=True, **kw)
    assert ran == ["sghmc"]

    # --from-cells takes the rerun of a cell, not the stale line of the older protocol as well
    said.clear()
    rebuilt = run_uci(
        ["yacht"], ["sghmc", "bbb"], splits=2, out=tmp_path / "rebuilt", from_cells=out / "uci_cells.jsonl",
        **{**kw, "log": said.append},
    )  # fmt: skip
    assert len(rebuilt["cells"]) == 4 and any("left out 1 cell" in s for s in said)
    # two lines for one cell of the same run (files joined by hand): the later one counts
    joined = tmp_path / "joined.jsonl"
    last = json.loads((out / "uci_cells.jsonl").read_text().splitlines()[-1])
    joined.write_text((out / "uci_cells.jsonl").read_text() + json.dumps({**last, "rmse_std": 9.0}) + "\n")
    said.clear()
    again = run_uci(
        ["yacht"],
        ["sghmc", "bbb"],
        splits=2,
        out=tmp_path / "again",
        from_cells=joined,
        **{**kw, "log": said.append},
    )
    assert len(again["cells"]) == 4 and 9.0 in [c["rmse_std"] for c in again["cells"]]
    assert any("superseded" in s for s in said)

    # --tune changes the tuned SG-MCMC cells only; the adaptive table's sghmc has no step to tune, so its
    # cells are reused (as bbb's are)
    ran.clear()
    run_uci(["yacht"], ["sghmc", "bbb"], splits=1, out=out, resume=True, tune=True, **kw)
    assert ran == []
    assert (
        not uci._settings("sgld", False, True)["tuned"] and not uci._settings("sghmc", False, True)["tuned"]
    )
    assert uci._settings("sgld", False, True, version=4)["tuned"]
    assert uci._settings("sghmc", False, True, version=3)["tuned"]
    with pytest.raises(BnnkitError, match="pass one"):
        run_uci(
            ["yacht"], ["sghmc"], splits=1, out=out, resume=True, from_cells=out / "uci_cells.jsonl", **kw
        )


def test_tuned_step_is_the_best_finite_held_out_nll_whatever_the_stationarity_test_says():
    from bnnkit.bench.uci import _choose_step

    def row(eps, nll, stationary=False, finite=True):
        return {"setting": {"step_size": eps}, "heldout_nll": nll, "stationary": stationary, "finite": finite}

    # Boston split 0, SGHMC: 0.3x passed the noisy stationarity test at NLL 2.53 and its run ended
    # at the prior's spread (test RMSE 1.07); 1x failed it at 0.91.
    boston = [row(3e-4, 5.71), row(9e-4, 2.53, True), row(3e-3, 0.91), row(9e-3, 1.30)]
    assert _choose_step(boston) == 3e-3
    # nothing stationary (energy split 0, fSGHMC, run-length chains): the best finite NLL, not
    # the default (2.4e-3, which then gave test RMSE 2.7)
    energy = [
        row(2.4e-4, -0.839),
        row(7.3e-4, -0.472),
        row(2.4e-3, 0.351),
        row(7.3e-3, float("inf"), finite=False),
    ]
    assert _choose_step(energy) == 2.4e-4
    with pytest.raises(BnnkitError, match="diverged"):
        _choose_step([row(3e-4, float("inf"), finite=False)])


def test_vi_epochs_are_capped_by_an_optimiser_step_budget_on_large_sets():
    # kin8nm (7,373 training rows) keeps the plain budgets; protein (41,157) is capped.
    c = DEFAULTS
    assert [_epochs(c[m], 7373, c) for m in ("bbb", "fbnn", "mcdropout", "ensemble")] == [300, 100, 300, 300]
    per_epoch = math.ceil(41157 / 32)
    assert _epochs(c["bbb"], 41157, c) == 100_000 // per_epoch == 77
    assert _epochs(c["fbnn"], 41157, c) == 25_000 // per_epoch == 19
    assert _epochs({"epochs": 5, "max_steps": 1}, 41157, c) == 1  # at least one epoch
    assert _epochs({"epochs": 5}, 41157, c) == 5  # no cap given


def test_default_steps_shrink_with_the_training_set_past_step_rows():
    c = DEFAULTS
    # Up to Boston's 455 training rows the defaults chosen there are used as they are.
    for n in (277, 455):
        assert [default_step_size(m, n, c) for m in c["step_size"]] == list(c["step_size"].values())
        assert friction(n, c) == c["friction"]
    n = 41157  # protein
    r = 455 / n
    assert default_step_size("sgld", n, c) == pytest.approx(c["step_size"]["sgld"] * r, rel=1e-5)
    assert default_step_size("fsgld", n, c) == pytest.approx(c["step_size"]["fsgld"] * r, rel=1e-5)
    eps = default_step_size("sghmc", n, c)
    assert eps == pytest.approx(c["step_size"]["sghmc"] * math.sqrt(r), rel=1e-5)
    # SGHMC keeps the default's momentum decay eps * C and so its learning rate eps^2 falls as 1/N.
    assert eps * friction(n, c) == pytest.approx(c["step_size"]["sghmc"] * c["friction"], rel=1e-5)


def test_tuning_chains_burn_in_as_long_as_the_run_they_tune(monkeypatch):
    # After a short burn-in a small step's chain has hardly moved and scores best (concrete split 0:
    # the 0.1x SGLD step won at 500 steps and was worst but one at the run's 4000).
    import torch

    import bnnkit.sgmcmc.tune as tune_module

    seen = {}

    def fake_tune(make, grid, post, stream, heldout, **kw):
        seen.update(kw, grid=grid)
        raise RuntimeError("stop")

    monkeypatch.setattr(tune_module, "tune", fake_tune)
    cfg = {**uci.DEFAULTS, "tune": uci.TUNE}
    x, y = torch.randn(40, 3), torch.randn(40)
    with pytest.raises(RuntimeError, match="stop"):
        uci._tuned_step_size("sgld", x, y, cfg, None, 0)
    assert uci.TUNE["burn_in"] is None and seen["num_warmup"] == cfg["burn_in"] == 4000
    assert seen["chain_method"] == "vectorized"  # the pair shares each step's measurement points
    assert seen["grid"]["step_size"] == [uci.DEFAULTS["step_size"]["sgld"] * f for f in uci.TUNE["factors"]]


def test_gp_fit_subset_is_seeded_by_split_and_older_cells_are_reused_only_where_it_was_not_drawn(
    tmp_path, monkeypatch
):
    if not (DATA / "uci").exists():
        pytest.skip("needs ../shared/data/uci")
    from bnnkit.data import load_uci
    from bnnkit.functional import GPPrior

    # protocol 2 and 3 differ only where the GP fit draws a subset: the listed sets never do
    for name in ("boston", "concrete", "energy", "yacht", "wine", "kin8nm"):
        rows = load_uci(name, 0, root=str(DATA)).x_train.shape[0]
        assert (rows <= uci.GP_FIT_MAX_POINTS) == (uci.resolve_uci_name(name) in uci.NO_GP_SUBSET), name

    # the fit's generator is seeded with seed + split, whatever the global RNG holds
    seen = []
    real = GPPrior.fit
    monkeypatch.setattr(
        GPPrior,
        "fit",
        lambda self, *a, **k: (seen.append(k["generator"].initial_seed()), real(self, *a, **k))[1],
    )
    torch.manual_seed(123)
    kw = dict(root=str(DATA), quick=True, progress=False, log=lambda s: None, seed=5)
    run_uci(["yacht"], ["bbb"], splits=2, out=tmp_path / "a", **kw)
    assert seen == [5, 6]

    cell = {"dataset": "yacht", "split": 1, "method": "bbb", "seed": 6, "quick": False, "tuned": False}
    assert uci._same_run({**cell, "protocol": 2}, 5, False, False)
    assert uci._same_run({**cell, "protocol": 3}, 5, False, False)
    assert not uci._same_run({**cell, "protocol": 1}, 5, False, False)
    wine = {**cell, "dataset": "wine-quality-red"}
    assert not uci._same_run({**wine, "protocol": 2}, 5, False, False)
    assert uci._same_run({**wine, "protocol": 3}, 5, False, False)
    # a protocol's cells count for a later one where only other methods' recipes changed: sghmc's
    # protocol-4 cells are protocol 5's, its protocol-3 cells are not; sgld changed in 5
    assert uci.PROTOCOL == 10
    sghmc = {**cell, "method": "sghmc"}
    assert uci._same_run({**sghmc, "protocol": 4}, 5, False, False, version=9)
    assert not uci._same_run({**sghmc, "protocol": 3}, 5, False, False, version=9)
    # 10 changed sghmc (cyclical, a ladder of rungs): only its own cells count for it
    assert not uci._same_run({**sghmc, "protocol": 9}, 5, False, False)
    assert uci._same_run({**sghmc, "protocol": 10}, 5, False, False)
    assert uci._same_run({**sghmc, "protocol": 3}, 5, False, False, version=3)
    sgld = {**cell, "method": "sgld"}
    assert not uci._same_run({**sgld, "protocol": 4}, 5, False, False)
    assert uci._same_run({**sgld, "protocol": 3}, 5, False, False, version=4)
    assert uci._same_run({**sgld, "protocol": 5}, 5, False, False)
    assert uci.adaptive_methods(4) == {"sghmc", "fsghmc"} and uci.adaptive_methods(3) == set()
    # protocol 7 added csgld and changed nothing else: protocol 6's cells are its cells; version 8
    # (csgld with Gibbs noise draws, an experiment) and 9 (csgld's ladder of peaks) count no csgld
    # cell but their own, and the other methods' cells of 6 and 7 as theirs
    nuts = {**cell, "method": "nuts"}
    assert uci._same_run({**nuts, "protocol": 6}, 5, False, False)
    assert not uci._same_run({**nuts, "protocol": 5}, 5, False, False)
    csgld = {**cell, "method": "csgld"}
    assert uci._same_run({**csgld, "protocol": 7}, 5, False, False, version=7)
    assert not uci._same_run({**csgld, "protocol": 7}, 5, False, False, version=8)
    assert uci._same_run({**csgld, "protocol": 8}, 5, False, False, version=8)
    assert not uci._same_run({**csgld, "protocol": 7}, 5, False, False, version=9)
    assert not uci._same_run({**csgld, "protocol": 8}, 5, False, False, version=9)
    assert uci._same_run({**csgld, "protocol": 9}, 5, False, False)
    assert uci._same_run({**nuts, "protocol": 6}, 5, False, False, version=8)
    assert uci._same_run({**nuts, "protocol": 6}, 5, False, False, version=10)
    assert not uci._same_run({**nuts, "protocol": 6}, 5, False, False, version=11)  # past PROTOCOL
    assert uci.adaptive_methods(7) == uci.adaptive_methods(9) == {"sghmc", "fsghmc", "sgld", "fsgld", "csgld"}


@pytest.mark.skipif(not (DATA / "uci").exists(), reason="needs ../shared/data/uci")
def test_splits_past_a_sets_standard_splits_are_skipped_not_an_error(tmp_path, monkeypatch):
    # protein has 5 standard splits: `--splits 10` over several sets must not stop at its split 5
    assert uci.uci_num_splits("protein", root=str(DATA)) == 5
    assert uci.uci_num_splits("yacht", root=str(DATA)) == 20
    monkeypatch.setattr(uci.runner, "uci_num_splits", lambda name, root=None: 1)
    said = []
    rep = run_uci(
        ["yacht"],
        ["sghmc"],
        splits=3,
        out=tmp_path,
        root=str(DATA),
        quick=True,
        progress=False,
        log=said.append,
    )
    assert [c["split"] for c in rep["cells"]] == [0]
    assert any("only 1 standard splits: splits 1-2 are skipped" in s for s in said)


def test_protocol_5_runs_sgld_and_fsgld_as_psgld_from_map_warm_starts(tmp_path, monkeypatch):
    """Protocol 5's sgld / fsgld cells: pSGLD at the adaptive table's per-datum step, MAP warm
    starts and the convergence rule, as sghmc's cells are (R-hat, ESS and what stopped the run
    in the cell)."""
    if not (DATA / "uci").exists():
        pytest.skip("needs ../shared/data/uci")
    from bnnkit.sgmcmc import AdaptiveSGHMC, PreconditionedSGLD

    used = []
    real = uci.inference.sample_or_diverged
    monkeypatch.setattr(
        uci.inference, "sample_or_diverged", lambda alg, *a, **k: (used.append(alg), real(alg, *a, **k))[1]
    )
    p9 = uci.stock_protocol(True, 9)  # sghmc at its constant step (protocol 10 makes it cyclical)
    rep = run_uci(["yacht"], ["sgld", "fsgld", "sghmc"], splits=1, root=str(DATA), quick=True, progress=False,
                  out=tmp_path, log=lambda s: None, tune=True, protocol=p9)  # fmt: skip
    a = p9.config()["adaptive"]
    assert [type(u) for u in used] == [PreconditionedSGLD, PreconditionedSGLD, AdaptiveSGHMC]
    for c in rep["cells"]:
        assert c["protocol"] == 9 and c["tuned"] is False and c["stopped"] is not None and c["map_steps"]
        assert math.isfinite(c["rmse"]) and c["rhat"] is not None
        if c["method"] != "sghmc":
            assert c["step_size"] == pytest.approx(a["sgld_step_size"] / uci.QUICK_PROTOCOL.max_rows)
    assert "pSGLD" in rep["markdown"] and "scale-adapted SGHMC" in rep["markdown"]


def test_csgld_is_cyclical_psgld_on_the_tables_cycle_and_can_draw_its_noise_by_gibbs(tmp_path, monkeypatch):
    """csgld: pSGLD on the adaptive table's cosine cycle (peak a / N, one cycle of burn-in, the
    cyclical thinning and budget), from the MAP warm starts; protocol 7 moves the noise precision with
    the gradient (vectorised chains, the stopping rule), the experiment ``gibbs_csgld_protocol``
    (version 8) draws it by Gibbs every ``cyclical_gibbs_every`` steps (chains one at a time, the
    whole budget, R-hat measured at the end).  Its cell records the peak step.  Protocol 6 has no
    recipe for it and says so before running."""
    from bnnkit.sgmcmc import PreconditionedSGLD
    from bnnkit.sgmcmc.schedules import CosineCycle

    calls = []
    real = uci.inference.sample_or_diverged
    monkeypatch.setattr(
        uci.inference,
        "sample_or_diverged",
        lambda alg, *a, **k: (calls.append((alg, k)), real(alg, *a, **k))[1],
    )
    g = torch.Generator().manual_seed(0)
    x = torch.randn(80, 3, generator=g)
    y = x[:, 0] + 0.1 * torch.randn(80, generator=g)
    kw = dict(splits=1, methods=["csgld"], quick=True, progress=False, log=lambda s: None)
    a = uci.QUICK_PROTOCOL.config()["adaptive"]
    n = 72  # 90 % of 80 rows train
    cells = {}
    for version, protocol in ((8, uci.gibbs_csgld_protocol(True)), (7, uci.stock_protocol(True, 7))):
        out = tmp_path / str(version)
        (cells[version],) = run_uci_arrays(x, y, out=out, protocol=protocol, **kw)["cells"]
    (alg8, k8), (alg7, k7) = calls
    for alg, k in calls:
        assert isinstance(alg, PreconditionedSGLD) and isinstance(alg.step_size, CosineCycle)
        assert alg.step_size(0) == pytest.approx(a["cyclical_peak"] / n)
        # the first cyclical_exploration of a cycle explores; the step decays towards 0 at its end
        assert alg.step_size(a["cyclical_cycle"] - 1) < 0.05 * alg.step_size(0)
        assert k["num_warmup"] == a["cyclical_cycle"] and k["thin"] == a["cyclical_thin"]
        assert k["num_samples"] == a["cyclical_draws"] and k["chunk_size"] == a["cyclical_min_draws"]
    assert alg8.gibbs_every == 5 and alg7.gibbs_every is a["cyclical_gibbs_every"] is None
    assert uci.gibbs_csgld_protocol().config()["adaptive"]["cyclical_gibbs_every"] == 50
    assert k8["chain_method"] == "sequential" and k8["stop_when"] is None
    assert k7["chain_method"] == "vectorized" and k7["stop_when"] is not None
    for version, cell in cells.items():
        assert cell["protocol"] == version and cell["step_size"] == pytest.approx(a["cyclical_peak"] / n)
        assert math.isfinite(cell["nll"]) and cell["rhat"] is not None and cell["stopped"] is not None
    # protocol 8's chains spend the budget; the R-hat of all their draws is in the cell
    assert (
        cells[8]["draws_per_chain"] == a["cyclical_draws"] and "fixed length" in cells[8]["stopped"]["reason"]
    )
    assert "drawn by Gibbs every 5 steps" in (tmp_path / "8" / "uci.md").read_text()
    assert "Gibbs" not in (tmp_path / "7" / "uci.md").read_text()
    with pytest.raises(BnnkitError, match="new in protocol 7"):
        run_uci_arrays(x, y, out=tmp_path / "6", protocol=uci.stock_protocol(True, 6), **kw)
    assert not (tmp_path / "6" / "uci_cells.jsonl").exists()


def test_csgld_ladder_keeps_the_smallest_peak_whose_chains_converge(tmp_path, monkeypatch):
    """Protocol 9's csgld climbs ``cyclical_ladder`` from the same MAP warm starts and seed: each rung
    is the protocol-7 cell at that peak (the same chains: the MAP phase runs once per chain and is
    replayed), the first rung whose chains agree (R-hat <= the table's, whatever the ESS) ends the
    climb, and when none does the rung of lowest R-hat is kept.  The cell lists every rung it ran."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(80, 3, generator=g)
    y = x[:, 0] + 0.1 * torch.randn(80, generator=g)
    kw = dict(splits=1, methods=["csgld"], quick=True, progress=False, log=lambda s: None)
    n = 72
    map_runs = []
    real_map = uci.inference.map_warm_start

    def counted(*a, **k):
        init = real_map(*a, **k)

        def run(chain, gen):
            map_runs.append(chain)
            return init(chain, gen)

        run.map_steps, run.__name__ = init.map_steps, init.__name__
        return run

    monkeypatch.setattr(uci.inference, "map_warm_start", counted)
    p9 = uci.stock_protocol(True, 9)
    ladder = p9.config()["adaptive"]["cyclical_ladder"]
    assert p9.version == 9 and list(ladder) == [0.02, 0.05, 0.1]
    assert uci.QUICK_PROTOCOL.config()["adaptive"]["cyclical_ladder"] == ladder  # protocol 10 kept csgld's
    assert uci.FULL_PROTOCOL.config()["adaptive"]["cyclical_ladder"] == [0.02, 0.05, 0.1]
    assert uci.stock_protocol(False, 7).config()["adaptive"]["cyclical_ladder"] is None
    (c9,) = run_uci_arrays(x, y, out=tmp_path / "9", protocol=p9, **kw)["cells"]
    chains = p9.config()["adaptive"]["chains"]
    assert sorted(map_runs) == list(range(chains))  # one MAP phase per chain for all three rungs
    (c7,) = run_uci_arrays(x, y, out=tmp_path / "7", protocol=uci.stock_protocol(True, 7), **kw)["cells"]
    rungs = c9["ladder"]
    # the quick chains are too short to converge: every rung ran, and the lowest R-hat is kept
    assert [r["peak"] for r in rungs] == ladder and not any(r["converged"] for r in rungs)
    best = min(rungs, key=lambda r: r["rhat"])
    assert c9["rhat"] == best["rhat"] and c9["step_size"] == pytest.approx(best["peak"] / n) == c9["peak"] / n
    assert "peak" not in c7 or c7["peak"] is None
    # the 0.05 rung is protocol 7's cell, chain for chain
    (mid,) = [r for r in rungs if r["peak"] == 0.05]
    assert mid["rhat"] == c7["rhat"] and mid["draws_per_chain"] == c7["draws_per_chain"]
    assert c9["seconds"] >= sum(r["seconds"] for r in rungs) and "ladder" not in c7 or c7["ladder"] is None
    # an R-hat every run meets: the first rung ends the climb, though its ESS is short of the target
    a = {**p9.config()["adaptive"], "rhat": 1e9, "ess": 1e9}
    (c,) = run_uci_arrays(x, y, out=tmp_path / "loose", protocol=p9.replace(version=99, adaptive=a), **kw)[
        "cells"
    ]
    assert [r["peak"] for r in c["ladder"]] == [0.02] and c["ladder"][0]["converged"]
    assert (
        c["peak"] == 0.02 and "0.02 on 1 (1 runs for 1 splits)" in (tmp_path / "loose" / "uci.md").read_text()
    )
    assert c["step_size"] == pytest.approx(0.02 / n) and "budget spent" in c["stopped"]["reason"]
    assert (
        "the first of 0.02, 0.05, 0.1 whose chains agree, R-hat <= 1.1"
        in (tmp_path / "9" / "uci.md").read_text()
    )


def test_protocol_10_sghmc_is_cyclical_adaptive_sghmc_climbing_peak_and_window_rungs(tmp_path, monkeypatch):
    """Protocol 10's sghmc: scale-adapted SGHMC on csgld's cosine cycle, each rung a (peak eps,
    exploration window) pair, climbed from the same warm starts by csgld's rule (first rung whose
    chains agree, else the lowest R-hat); the cell keeps the rung's peak, window and step, and
    the report says which rung each split kept.  Protocol 9's sghmc is the constant step."""
    from bnnkit.sgmcmc import AdaptiveSGHMC
    from bnnkit.sgmcmc.schedules import CosineCycle

    g = torch.Generator().manual_seed(0)
    x = torch.randn(80, 3, generator=g)
    y = x[:, 0] + 0.1 * torch.randn(80, generator=g)
    kw = dict(splits=1, methods=["sghmc"], quick=True, progress=False, log=lambda s: None)
    used = []
    real = uci.inference.sample_or_diverged
    monkeypatch.setattr(
        uci.inference, "sample_or_diverged", lambda alg, *a, **k: (used.append(alg), real(alg, *a, **k))[1]
    )
    p10 = uci.QUICK_PROTOCOL
    a = p10.config()["adaptive"]
    rungs = [[0.05, 100], [0.05, 1000], [0.07, 100]]
    assert p10.version == 10 and a["cyclical_sghmc_ladder"] == rungs
    assert uci.FULL_PROTOCOL.config()["adaptive"]["cyclical_sghmc_ladder"] == rungs
    assert uci.stock_protocol(False, 9).config()["adaptive"]["cyclical_sghmc_ladder"] is None
    (c,) = run_uci_arrays(x, y, out=tmp_path / "10", protocol=p10, **kw)["cells"]
    assert [(u.step_size, u.explore_window) for u in used] == [
        (CosineCycle(p, a["cyclical_cycle"], a["cyclical_exploration"]), w) for p, w in rungs
    ]
    assert all(type(u) is AdaptiveSGHMC and u.mdecay == a["mdecay"] for u in used)
    # the quick chains are too short to converge: every rung ran, and the lowest R-hat is kept
    assert [[r["peak"], r["window"]] for r in c["ladder"]] == rungs
    best = min(c["ladder"], key=lambda r: r["rhat"])
    assert (c["rhat"], c["peak"], c["window"]) == (best["rhat"], best["peak"], best["window"])
    assert c["step_size"] == best["peak"] and c["protocol"] == 10
    md = (tmp_path / "10" / "uci.md").read_text()
    assert (
        "cyclical scale-adapted SGHMC" in md
        and f"{best['peak']} (window {best['window']}) on 1 (3 runs" in md
    )
    # an R-hat every run meets: the first rung ends the climb
    loose = p10.replace(version=99, adaptive={**a, "rhat": 1e9})
    (c,) = run_uci_arrays(x, y, out=tmp_path / "loose", protocol=loose, **kw)["cells"]
    assert [[r["peak"], r["window"]] for r in c["ladder"]] == rungs[:1] and (c["peak"], c["window"]) == (
        0.05,
        100,
    )
    # protocol 9: one constant-step run, no ladder
    used.clear()
    (c9,) = run_uci_arrays(x, y, out=tmp_path / "9", protocol=uci.stock_protocol(True, 9), **kw)["cells"]
    assert [u.step_size for u in used] == [a["step_size"]] and not c9.get("ladder") and "window" not in c9


def test_the_fit_rungs_experiment_runs_every_rung_and_keeps_the_best_fit_among_those_that_agree(tmp_path):
    """fit_rungs_protocol (version 11): every rung of sghmc's ladder runs and records its fit (the
    training rows' in-sample lppd and PSIS-LOO, the test RMSE / NLL that no rule reads); the cell
    keeps the converged rung of highest lppd; where none converges it keeps the lowest R-hat, as
    protocol 10."""
    from bnnkit.bench.uci.inference import fit_rung

    g = torch.Generator().manual_seed(0)
    x = torch.randn(80, 3, generator=g)
    y = x[:, 0] + 0.1 * torch.randn(80, generator=g)
    kw = dict(splits=1, methods=["sghmc"], quick=True, progress=False, log=lambda s: None)
    p11 = uci.fit_rungs_protocol(True)
    a = p11.config()["adaptive"]
    assert p11.version == 11 and a["rung_choice"] == "lppd" and uci.protocol.CHANGED_IN[11] == {"sghmc"}
    assert "rung_choice" not in uci.QUICK_PROTOCOL.config()["adaptive"]  # protocol 10: the first that agrees
    rungs = [list(r) for r in a["cyclical_sghmc_ladder"]]
    # an R-hat every rung meets: all three run and are scored; the best-fitting one is kept
    loose = p11.replace(version=98, adaptive={**a, "rhat": 1e9})
    (c,) = run_uci_arrays(x, y, out=tmp_path / "loose", protocol=loose, **kw)["cells"]
    assert [[r["peak"], r["window"]] for r in c["ladder"]] == rungs
    lppd = [r["train_lppd"] for r in c["ladder"]]
    # the quick cycle explores for fewer than 100 steps, so windows 100 and 1,000 give one chain
    assert all(math.isfinite(e) for e in lppd) and lppd[0] == lppd[1] != lppd[2]
    kept = c["ladder"][max(range(3), key=lambda i: lppd[i])]
    assert (c["peak"], c["window"], c["rhat"]) == (kept["peak"], kept["window"], kept["rhat"])
    # the rung's test numbers are the cell's (the same draws), and the in-sample fit is at least LOO's
    assert (kept["test_rmse"], kept["test_nll"]) == pytest.approx((c["rmse"], c["nll"]), rel=1e-6)
    assert all(r["train_lppd"] >= r["loo_elpd"] and r["bad_k"] >= 0 for r in c["ladder"])
    # the quick chains do not converge at the protocol's R-hat: every rung runs, lowest R-hat kept
    (c,) = run_uci_arrays(x, y, out=tmp_path / "11", protocol=p11, **kw)["cells"]
    assert len(c["ladder"]) == 3 and all("train_lppd" in r for r in c["ladder"])
    assert c["rhat"] == min(r["rhat"] for r in c["ladder"]) and c["protocol"] == 11
    assert "the one that fits the training rows best" in (tmp_path / "11" / "uci.md").read_text()
    # the rule alone: a converged rung of lower fit loses to a later one; unconverged fit is ignored
    ladder = [
        {"rhat": 1.05, "train_lppd": -0.9},
        {"rhat": 1.3, "train_lppd": 0.5},
        {"rhat": 1.08, "train_lppd": -0.2},
    ]
    assert fit_rung(ladder, 1.1, "train_lppd") == 2
    assert fit_rung([{"rhat": 1.3}, {"rhat": 1.2}], 1.1, "train_lppd") == 1
    assert fit_rung([{"rhat": 1.05, "loo_elpd": math.nan}, {"rhat": 1.06, "loo_elpd": -3.0}], 1.1, "loo_elpd") == 1
    with pytest.raises(BnnkitError, match="rung_choice is 'first'"):
        p11.replace(version=97, adaptive={**a, "rung_choice": "loo"})


@pytest.mark.parametrize(
    "key, ladder, message",
    [
        ("cyclical_ladder", (0.02, 0.0), "cyclical_ladder holds csgld's peaks"),
        ("cyclical_ladder", (0.02, float("nan")), "cyclical_ladder"),
        ("cyclical_sghmc_ladder", ((0.05, 0),), "cyclical_sghmc_ladder holds"),
        ("cyclical_sghmc_ladder", ((-0.05, 100),), "cyclical_sghmc_ladder"),
        ("cyclical_sghmc_ladder", (0.05,), "cyclical_sghmc_ladder"),
        ("cyclical_sghmc_ladder", ((0.05, 2.5),), "cyclical_sghmc_ladder"),
    ],
)
def test_a_bad_ladder_rung_is_refused_when_the_protocol_is_built(key, ladder, message):
    a = uci.FULL_PROTOCOL.config()["adaptive"]
    with pytest.raises(BnnkitError, match=message):
        uci.FULL_PROTOCOL.replace(version=99, adaptive={**a, key: ladder})
