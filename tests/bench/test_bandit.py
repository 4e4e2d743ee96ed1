"""`bnnkit bench bandit`: the Mushroom contextual bandit (reward/regret logic, quick mode, errors)."""

import csv
import json
from pathlib import Path

import pytest
import torch

from bnnkit.bench import bandit
from bnnkit.bench.bandit import (
    EAT,
    METHODS,
    REJECT,
    cumulative_regret,
    expected_regret,
    oracle_actions,
    realised_rewards,
    run_bandit,
)
from bnnkit.core.errors import BnnkitError
from bnnkit.decisions import ReplayBuffer, one_hot_blocks

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
needs_data = pytest.mark.skipif(
    not (DATA / "mushroom" / "agaricus-lepiota.data").exists(), reason="needs ../shared/data/mushroom"
)


def quiet(_):
    pass


# ---------------------------------------------------------------------------- reward and regret logic
@pytest.mark.parametrize("p", [0.4, 0.5, 0.6])
def test_expected_regret_per_cell(p):
    edible = torch.tensor([True, True, False, False])
    actions = torch.tensor([EAT, REJECT, EAT, REJECT])
    assert expected_regret(edible, actions, p).tolist() == pytest.approx([0.0, 5.0, 40 * p - 5, 0.0])


@pytest.mark.parametrize("p", [0.4, 0.5, 0.6, 1.0])
def test_oracle_has_zero_regret_and_any_agent_a_non_decreasing_one(p):
    g = torch.Generator().manual_seed(0)
    edible = torch.rand(500, generator=g) < 0.52
    assert cumulative_regret(edible, oracle_actions(edible), p).abs().max() == 0
    actions = torch.randint(2, (500,), generator=g)
    cum = cumulative_regret(edible, actions, p)
    assert bool((cum.diff() >= 0).all()) and cum[-1] > 0


def test_realised_rewards_follow_the_rule():
    edible = torch.tensor([True, True, False, False, False])
    actions = torch.tensor([EAT, REJECT, EAT, EAT, REJECT])
    poisoned = torch.tensor([True, True, True, False, True])
    assert realised_rewards(edible, actions, poisoned).tolist() == [5.0, 0.0, -35.0, 5.0, 0.0]


def test_environment_is_the_same_for_every_method_and_pattern():
    a = bandit.environment(8124, 50, seed=3)
    b = bandit.environment(8124, 50, seed=3)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], bandit.environment(8124, 50, seed=4)[0])


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"patterns": (1.5,)}, "not a probability"),
        ({"patterns": (-0.1,)}, "not a probability"),
        ({"methods": ("sgld", "ucb")}, "unknown method"),
        ({"steps": 0}, "steps"),
        ({"seeds": ()}, "no seeds"),
        ({"config": {"lr": 1.0}}, "unknown config key"),
        ({"patterns": "0.4,0.5"}, "patterns must be a sequence"),
        ({"seeds": (0, 0)}, "repeat"),
        ({"seeds": (1.5,)}, "seeds must be non-negative integers"),
    ],
)
def test_bad_input_is_refused(tmp_path, kwargs, match):
    with pytest.raises(BnnkitError, match=match):
        run_bandit(out=tmp_path, root=str(DATA), progress=False, log=quiet, **kwargs)


# ---------------------------------------------------------------------------- with the data
def test_the_command_line_of_a_run():
    cmd = bandit.command_line(("sgld",), (0.4, 0.5), (0, 1), 10_000, False)
    assert cmd == "bnnkit bench bandit --methods sgld --patterns 0.4,0.5 --seeds 0,1 --steps 10000"


@needs_data
@pytest.mark.parametrize("method", ["fsgld", "fsghmc", "fbnn"])
def test_agents_scale_by_the_buffer_size_and_learn(method):
    from bnnkit.data.mushroom import load_mushroom

    contexts, _ = load_mushroom(DATA)
    cfg = {**bandit.DEFAULTS, **bandit.QUICK}
    agent = bandit.make_agent(method, 119, cfg, 0, one_hot_blocks(contexts))
    assert hasattr(agent.posterior, "gp")  # all three put the GP prior on the reward function
    start = agent.q.mu.detach().clone() if method == "fbnn" else None
    first = agent.posterior
    buf = ReplayBuffer(8, 119)
    gen = torch.Generator().manual_seed(0)
    for i in range(12):
        buf.add(torch.cat([contexts[i], torch.tensor([1.0, 0.0])]), 0.25)
        agent.update(buf, gen)
        if method == "fbnn":  # the data size is an argument of the ELBO terms; the posterior is not changed
            assert agent.posterior is first and first.num_data == 1
        else:  # a posterior (and target) per buffer size, not a mutated one
            assert agent.posterior.num_data == buf.size == min(i + 1, 8)
            assert first.num_data == 1
    assert agent.finite() and agent.act(contexts[0], gen) in (EAT, REJECT)
    if method == "fsghmc":  # the momentum is kept across interactions
        assert float(agent.state.momentum.abs().sum()) > 0
    if method == "fbnn":
        # the batch contexts are already measurement points (both actions): not added twice
        assert not agent.fbnn.include_batch and not torch.equal(agent.q.mu, start)
        # Thompson: each decision uses a fresh weight draw from q
        assert not torch.equal(agent.q.sample(1, gen)[0], agent.q.sample(1, gen)[0])


def test_sghmc_agents_drift_like_the_sgld_agents_at_the_same_step():
    # Settled momentum moves lr g / a per step = eps g / C; SGLD moves (eps_sgld / 2) g.
    from bnnkit.functional import FSGHMC
    from bnnkit.sgmcmc import SGHMC

    for kind in (SGHMC, FSGHMC):
        alg = bandit.hmc_like(kind, 0.1)(1e-3)
        assert isinstance(alg, kind)
        c = alg.config()
        assert c["step_size"] * c["friction"] == pytest.approx(0.1)  # momentum decay a
        assert c["step_size"] / c["friction"] == pytest.approx(1e-3 / 2)


@needs_data
def test_sghmc_agent_plays_a_short_run():
    from bnnkit.data.mushroom import load_mushroom

    contexts, edible = load_mushroom(DATA)
    cfg = {**bandit.DEFAULTS, **bandit.QUICK}
    run = bandit.play("sghmc", contexts, edible, 0.5, 40, 0, cfg)
    assert run["cumulative_regret"].shape == (40,) and run["cumulative_regret"][-1] >= 0


# covered fast by test_the_same_command_gives_the_same_numbers (run_bandit end to end and its files),
# test_agents_scale_by_the_buffer_size_and_learn and test_sghmc_agent_plays_a_short_run (the agents)
@pytest.mark.slow
@needs_data
def test_quick_mode_runs_every_method_and_writes_its_files(tmp_path):
    # quick defaults (300 interactions, pattern 0.5, 20 hidden units), one seed to keep the test short
    state = torch.get_rng_state()
    report = run_bandit(quick=True, seeds=(0,), out=tmp_path, root=str(DATA), progress=False, log=quiet)
    assert torch.equal(torch.get_rng_state(), state)  # the caller's global RNG is left alone
    assert report["methods"] == list(METHODS) and report["patterns"] == [0.5]
    assert report["steps"] == bandit.QUICK_STEPS == 300 and report["protocol"]["hidden"] == 20
    for name in ("bandit.json", "bandit.md", "bandit.csv", "bandit_p0.5.png"):
        assert (tmp_path / name).stat().st_size > 0, name
    saved = json.loads((tmp_path / "bandit.json").read_text())
    assert saved["command"] == report["command"]
    assert "--patterns 0.5 --seeds 0 --steps 300 --quick" in saved["command"]
    rows = list(csv.DictReader((tmp_path / "bandit.csv").open()))
    assert len(rows) == len(METHODS)
    for run in saved["runs"]:
        curve = run["curve"]
        assert len(curve) == len(saved["curve_interactions"]) and saved["curve_interactions"][-1] == 300
        assert all(b >= a for a, b in zip(curve, curve[1:]))  # expected regret never decreases
        assert curve[-1] == run["final_expected_regret"] > 0
        assert run["ms_per_interaction"] > 0
    md = (tmp_path / "bandit.md").read_text()
    assert report["command"] in md
    for m in METHODS:
        assert f"| {m} |" in md
    assert saved["summary"]["0.5"]["sgld"]["final_expected_regret_sd"] is None  # one seed: no sd


@needs_data
def test_a_shorter_run_is_a_prefix_of_a_longer_one():
    from bnnkit.data.mushroom import load_mushroom

    contexts, edible = load_mushroom(DATA)
    cfg = {**bandit.DEFAULTS, **bandit.QUICK}
    short = bandit.play("sgld", contexts, edible, 0.4, 30, 5, cfg)
    long = bandit.play("sgld", contexts, edible, 0.4, 50, 5, cfg)
    assert torch.equal(short["actions"], long["actions"][:30])
    assert torch.equal(short["cumulative_regret"], long["cumulative_regret"][:30])


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
@needs_data
def test_the_same_command_gives_the_same_numbers(tmp_path):
    kw = dict(
        methods=("sgld", "fsgld", "bbb", "greedy5"),
        patterns=(0.6,),
        steps=60,
        root=str(DATA),
        quick=True,
        progress=False,
        log=quiet,
    )
    kw["seeds"] = (3, 4)
    a = run_bandit(out=tmp_path / "a", **kw)
    b = run_bandit(out=tmp_path / "b", **kw)
    assert a["command"] == b["command"]
    assert a["summary"]["0.6"]["bbb"]["final_expected_regret_sd"] is not None
    assert [r["curve"] for r in a["runs"]] == [r["curve"] for r in b["runs"]]
    assert [r["final_realised_regret"] for r in a["runs"]] == [r["final_realised_regret"] for r in b["runs"]]


# ---------------------------------------------------------------------------- records, resume, rebuild
def _short(tmp, **kw):
    args = dict(methods=("sgld", "greedy0"), patterns=(0.5,), seeds=(0, 1), steps=40, quick=True)
    args.update(kw)
    return run_bandit(out=tmp, root=str(DATA), progress=False, log=quiet, **args)


def _finals(report):
    return {
        (r["method"], r["pattern"], r["seed"]): (r["final_expected_regret"], r["curve"])
        for r in report["runs"]
    }


@needs_data
def test_a_stopped_command_keeps_its_finished_runs_and_resume_plays_only_the_rest(tmp_path, monkeypatch):
    full = _short(tmp_path / "full")
    real_play, calls = bandit.play, []

    def dies_on_the_third_run(*args, **kw):
        calls.append(args[0])
        if len(calls) == 3:
            raise KeyboardInterrupt  # the user stops the command mid-way
        return real_play(*args, **kw)

    monkeypatch.setattr(bandit.runner, "play", dies_on_the_third_run)
    with pytest.raises(KeyboardInterrupt):
        _short(tmp_path / "run")
    records = (tmp_path / "run" / bandit.RUNS_FILE).read_text().splitlines()
    assert len(records) == 2 and json.loads(records[0])["config"]["hidden"] == 20
    # a line cut short by a kill while it was written is dropped, not an error
    with (tmp_path / "run" / bandit.RUNS_FILE).open("a") as f:
        f.write('{"method": "greedy0", "pat')
    calls.clear()
    monkeypatch.setattr(bandit.runner, "play", lambda *a, **k: (calls.append(a[0]), real_play(*a, **k))[1])
    resumed = _short(tmp_path / "run", resume=True)
    assert calls == ["greedy0", "greedy0"]  # both sgld runs were reused
    assert _finals(resumed) == _finals(full) and resumed["runs_reused"] == 2
    assert len((tmp_path / "run" / bandit.RUNS_FILE).read_text().splitlines()) == 4
    assert "reused 2 of its 4 runs" in (tmp_path / "run" / "bandit.md").read_text()
    # another configuration is another run: nothing is reused
    calls.clear()
    _short(tmp_path / "run", resume=True, config={"noise": 0.3}, methods=("sgld",), seeds=(0,))
    assert calls == ["sgld"]


@needs_data
def test_records_older_than_a_config_key_are_read_with_its_default(tmp_path):
    first = _short(tmp_path, methods=("greedy0",), seeds=(0,))
    record = json.loads((tmp_path / bandit.RUNS_FILE).read_text())
    older = dict(record, config={k: v for k, v in record["config"].items() if k != "curve_points"})
    (tmp_path / "older.jsonl").write_text(json.dumps(older) + "\n")
    rebuilt = _short(tmp_path / "r", methods=("greedy0",), seeds=(0,), from_runs=tmp_path / "older.jsonl")
    assert _finals(rebuilt) == _finals(first)
    # ... but not when the command sets that key to another value than the default
    with pytest.raises(BnnkitError, match="holds no run"):
        _short(
            tmp_path / "r",
            methods=("greedy0",),
            seeds=(0,),
            from_runs=tmp_path / "older.jsonl",
            config={"curve_points": 100},
        )
    # a key the current configuration does not know (one since removed) never matches
    newer = dict(record, config={**record["config"], "retired_key": 1})
    (tmp_path / "newer.jsonl").write_text(json.dumps(newer) + "\n")
    with pytest.raises(BnnkitError, match="holds no run"):
        _short(tmp_path / "r", methods=("greedy0",), seeds=(0,), from_runs=tmp_path / "newer.jsonl")


@needs_data
def test_a_run_without_resume_keeps_the_earlier_records_aside(tmp_path):
    _short(tmp_path, methods=("greedy0",), seeds=(0,))
    before = (tmp_path / bandit.RUNS_FILE).read_text()
    _short(tmp_path, methods=("greedy5",), seeds=(0,))
    assert (tmp_path / "bandit_runs.previous.jsonl").read_text() == before
    assert json.loads((tmp_path / bandit.RUNS_FILE).read_text())["method"] == "greedy5"


@needs_data
def test_the_report_is_rebuilt_from_records_of_separate_commands(tmp_path):
    a = _short(tmp_path / "a", seeds=(0,))
    b = _short(tmp_path / "b", seeds=(1,), methods=("sgld",))
    both = tmp_path / "both.jsonl"
    noted = [json.loads(line) for line in (tmp_path / "b" / bandit.RUNS_FILE).read_text().splitlines()]
    noted[0]["note"] = "converted from an older report"  # a record with a key of its own
    both.write_text(
        (tmp_path / "a" / bandit.RUNS_FILE).read_text() + "".join(json.dumps(r) + "\n" for r in noted)
    )
    lines = []
    rebuilt = run_bandit(
        out=tmp_path / "r",
        root=str(DATA),
        methods=("sgld", "greedy0", "bbb"),
        patterns=(0.5,),
        seeds=(0, 1),
        steps=40,
        quick=True,
        progress=False,
        log=lines.append,
        from_runs=both,
    )
    assert _finals(rebuilt) == {**_finals(a), **_finals(b)}
    assert rebuilt["summary"]["0.5"]["sgld"]["seeds"] == [0, 1]
    assert rebuilt["summary"]["0.5"]["bbb"] is None
    md = (tmp_path / "r" / "bandit.md").read_text()
    assert "| greedy0 | " in md and "(n = 1)" in md.split("| greedy0 |")[1].splitlines()[0]
    assert "| bbb | - |" in md
    assert any("bbb p=0.5 seed 0" in line and "greedy0 p=0.5 seed 1" in line for line in lines)
    assert (tmp_path / "r" / "bandit_p0.5.png").stat().st_size > 0
    rows = list(csv.DictReader((tmp_path / "r" / "bandit.csv").open()))
    assert [r["note"] for r in rows] == [
        "",
        "converted from an older report",
        "",
    ]  # sgld 0, sgld 1, greedy0 0
    assert not (tmp_path / "r" / bandit.RUNS_FILE).exists()  # a rebuild plays and records nothing
    # nothing of the arguments in the file, a missing file, and both modes at once are refused
    with pytest.raises(BnnkitError, match="holds no run"):
        _short(tmp_path / "r", from_runs=both, steps=41)
    with pytest.raises(BnnkitError, match="does not exist"):
        _short(tmp_path / "r", from_runs=tmp_path / "nope.jsonl")
    with pytest.raises(BnnkitError, match="pass one"):
        _short(tmp_path / "r", from_runs=both, resume=True)


@needs_data
def test_laplace_agent_refits_on_the_buffer_and_thompson_samples(tmp_path):
    # 60 interactions, refit every 20: three last-layer Laplace fits; same seed, same play
    kw = dict(
        methods=("laplace",),
        patterns=(0.5,),
        seeds=(0,),
        steps=60,
        root=str(DATA),
        quick=True,
        progress=False,
        log=quiet,
        config={"laplace_every": 20},
    )
    a = run_bandit(out=tmp_path / "a", **kw)
    b = run_bandit(out=tmp_path / "b", **kw)
    assert [r["final_realised_regret"] for r in a["runs"]] == [r["final_realised_regret"] for r in b["runs"]]
    assert a["summary"]["0.5"]["laplace"]["final_expected_regret_mean"] >= 0
    assert a["protocol"]["laplace_every"] == 20 and a["protocol"]["version"] == bandit.PROTOCOL


@needs_data
def test_the_default_agent_refits_bnnkit_fit_at_doubling_sizes_and_replays_the_same(tmp_path):
    # 70 interactions, quick recipe: fits after 4, 8, 16, 32 and 64 interactions
    kw = dict(methods=("default",), patterns=(0.5,), seeds=(0,), steps=70, root=str(DATA), quick=True,
              progress=False, log=quiet, config={"default_first_fit": 4})  # fmt: skip
    a = run_bandit(out=tmp_path / "a", **kw)
    b = run_bandit(out=tmp_path / "b", **kw)
    (run,) = a["runs"]
    assert [f["rows"] for f in run["fits"]] == [4, 8, 16, 32, 64]
    assert run["final_realised_regret"] == b["runs"][0]["final_realised_regret"]
    assert run["curve"] == b["runs"][0]["curve"]
    assert a["protocol"]["default_first_fit"] == 4
