"""Running the bandit: one agent for one run (:func:`play`) and the benchmark (:func:`run_bandit`),
which writes a record per finished run and the report."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from tqdm.auto import tqdm

from ...core.errors import BnnkitError
from ...core.files import append_record, output_folder, read_records, reopen_records, write_report_files
from ...core.random import make_generator
from ...decisions import ReplayBuffer, action_inputs, one_hot_blocks
from ..methods import canonical_methods
from .agents import make_agent
from .protocol import (
    DEFAULTS,
    EAT,
    EDIBLE_REWARD,
    METHODS,
    PATTERNS,
    POISON_REWARD,
    PROTOCOL,
    QUICK_PATTERNS,
    QUICK_SEEDS,
    QUICK_STEPS,
    REJECT,
    REJECT_REWARD,
    RETIRED,
    RUNS_FILE,
    SEEDS,
    STEPS,
    cumulative_regret,
    environment,
    plain_config,
    realised_rewards,
)
from .report import Command, _fmt_list, _report, curve_index, plot_regret_curves

_BAR = dict(unit="step", mininterval=0.5, dynamic_ncols=True, leave=False)  # a run's progress bar


# ---------------------------------------------------------------------------- one run
def play(
    method: str,
    contexts: Tensor,
    edible: Tensor,
    p: float,
    steps: int,
    seed: int,
    cfg: dict,
    progress: bool = False,
) -> dict[str, Any]:
    """One agent for ``steps`` interactions; returns actions, rewards and regrets (tensors)."""
    idx, u = environment(contexts.shape[0], steps, seed)
    agent_gen = make_generator(seed, 2 + METHODS.index(method))
    d = contexts.shape[1] + 2
    agent = make_agent(method, d, cfg, seed, one_hot_blocks(contexts))
    buf = ReplayBuffer(cfg["buffer"], d)
    actions = torch.empty(steps, dtype=torch.long)
    rewards = torch.empty(steps, dtype=torch.float64)
    scale = cfg["reward_scale"]
    bar = tqdm(total=steps, desc=f"{method} p={p:g} seed {seed}", disable=not progress, **_BAR)
    t0 = time.perf_counter()
    for t in range(steps):
        if buf.size:
            agent.update(buf, agent_gen)
        i = int(idx[t])
        ctx = contexts[i]
        a = agent.act(ctx, agent_gen)
        is_edible = bool(edible[i])
        if a == EAT:
            r = EDIBLE_REWARD if (is_edible or float(u[t]) >= p) else POISON_REWARD
        else:
            r = REJECT_REWARD
        actions[t], rewards[t] = a, r
        buf.add(action_inputs(ctx[None], 2)[a], r * scale)  # the context with the action's code
        bar.update(1)
        if (t + 1) % 500 == 0 or t + 1 == steps:
            _check_finite(agent, method, p, seed, t + 1)
    seconds = time.perf_counter() - t0
    bar.close()
    ed = edible[idx]
    assert torch.equal(rewards, realised_rewards(ed, actions, u < p))  # the inline rule is the documented one
    oracle = torch.where(ed, torch.tensor(EDIBLE_REWARD), torch.tensor(REJECT_REWARD)).double()
    return {
        "actions": actions,
        "rewards": rewards,
        "cumulative_regret": cumulative_regret(ed, actions, p),
        "realised_regret": float((oracle - rewards).sum()),
        "poisonous_eaten": int(((actions == EAT) & ~ed).sum()),
        "edible_rejected": int(((actions == REJECT) & ed).sum()),
        "seconds": seconds,
        "fits": getattr(agent, "fits", None),  # a refitting agent's fits (rows, seconds, R-hat)
    }


def _check_finite(agent: Any, method: str, p: float, seed: int, t: int) -> None:
    if not agent.finite():
        raise BnnkitError(
            f"{method} diverged (non-finite weights) after {t} interactions on pattern p={p:g}, seed {seed}: "
            "lower its step size (config sgld_lr / sgld_max_step, fsgld_lr / fsgld_max_step, bbb_lr, greedy_lr)."
        )


# ---------------------------------------------------------------------------- the benchmark
def _check_inputs(methods, patterns, seeds, steps) -> None:
    if not methods:
        raise BnnkitError(f"no methods given; choose from {', '.join(METHODS)}.")
    canonical_methods(methods, METHODS)
    if not patterns:
        raise BnnkitError("no reward patterns given; the paper's are p = 0.4, 0.5, 0.6.")
    for p in patterns:
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not (0.0 <= float(p) <= 1.0):
            raise BnnkitError(
                f"reward pattern p={p!r} is not a probability: p is the chance that eating a poisonous "
                "mushroom gives -35 and must lie in [0, 1] (the paper uses 0.4, 0.5, 0.6)."
            )
    if not seeds:
        raise BnnkitError("no seeds given; pass e.g. seeds=(0, 1, 2).")
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise BnnkitError(f"seeds must be non-negative integers, got {s!r}.")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise BnnkitError(f"steps (interactions per run) must be an integer >= 1, got {steps!r}.")


DEFAULT_EXAMPLE = {"methods": "'sgld', 'bbb'", "patterns": "0.4, 0.5", "seeds": "0, 1"}


def _distinct(values: Sequence[Any], name: str) -> tuple[Any, ...]:
    """``values`` as a tuple (integer patterns as floats); a string or a repeat is refused."""
    if isinstance(values, str):  # the command line splits its comma lists; a string here is a slip
        raise BnnkitError(
            f"{name} must be a sequence, e.g. {name}=({DEFAULT_EXAMPLE[name]}), got {values!r}."
        )
    out = tuple(float(v) if name == "patterns" and type(v) is int else v for v in values)
    if len(set(out)) != len(out):
        raise BnnkitError(f"{name} repeat an entry ({_fmt_list(out)}); give each once.")
    return out


def command_line(methods, patterns, seeds, steps, quick) -> str:
    return (
        f"bnnkit bench bandit --methods {','.join(methods)} --patterns {_fmt_list([float(p) for p in patterns])} "
        f"--seeds {_fmt_list(seeds)} --steps {steps}" + (" --quick" if quick else "")
    )


def run_bandit(
    methods: Sequence[str] = METHODS,
    patterns: Sequence[float] | None = None,
    seeds: Sequence[int] | None = None,
    steps: int | None = None,
    out: str | Path = "bnnkit-out/bandit",
    root: str | None = None,
    quick: bool = False,
    progress: bool = True,
    log: Callable[[str], None] = print,
    config: dict[str, Any] | None = None,
    resume: bool = False,
    from_runs: str | Path | None = None,
) -> dict[str, Any]:
    """Run the Mushroom bandit for every method, pattern and seed; write PNGs, JSON, CSV, markdown.

    ``methods`` of :data:`METHODS` (all by default); ``patterns``: the probabilities ``p`` that
    eating a poisonous mushroom gives -35 (default 0.4, 0.5, 0.6; quick: 0.5); one run per seed of
    ``seeds`` (default 0, 1, 2; quick: 0, 1); ``steps`` interactions per run (default 10,000;
    quick: 300).  ``root`` holds ``mushroom/agaricus-lepiota.data``; ``quick`` is a smoke test (20
    hidden units); ``config`` overrides :data:`DEFAULTS` (written into the report).  Every finished
    run is appended to ``out/bandit_runs.jsonl``: ``resume`` reuses the runs there of a requested
    method, pattern and seed with the same steps and configuration and plays the others;
    ``from_runs`` plays nothing and builds the report from such a file (a missing run is left out:
    ``n = k`` marks a cell with fewer seeds, ``-`` one with none).  Returns the JSON report, whose
    command line reproduces every number (with the default config).
    """
    from ...data.mushroom import load_mushroom

    command = _command(methods, patterns, seeds, steps, quick, config)
    if from_runs is not None and resume:
        raise BnnkitError(
            "from_runs rebuilds the report and plays nothing, resume plays the missing runs: pass one."
        )
    marks = (RUNS_FILE, RUNS_FILE.removesuffix(".jsonl") + ".previous.jsonl", "bandit.json")
    out = output_folder(out, marks, "bnnkit bench bandit")
    contexts, edible = load_mushroom(root)
    runs_path = out / RUNS_FILE
    source = Path(from_runs) if from_runs is not None else runs_path
    stored = _stored_runs(source, runs_path, from_runs is not None, resume, log)
    t_all = time.perf_counter()
    runs, missing, reused = _play_all(
        command, stored, from_runs is None, contexts, edible, runs_path, progress, log
    )
    if reused:
        log(f"{source}: reused {reused} of the {len(runs)} runs")
    if missing:
        log(
            f"{source}: holds no run of this command for {len(missing)} of the requested: {', '.join(missing)}"
        )
    if not runs:
        raise BnnkitError(
            f"{source} holds no run of methods {list(command.methods)}, patterns {list(command.patterns)}, seeds "
            f"{list(command.seeds)} with {command.steps} interactions and this configuration; check the arguments."
        )
    report = _report(command, runs, time.perf_counter() - t_all, reused, source)
    _write_report(out, report, runs, command)
    return report


def _command(methods, patterns, seeds, steps, quick: bool, config: dict[str, Any] | None) -> Command:
    """The command's runs and configuration, with the quick mode's defaults, checked."""
    if patterns is None:
        patterns = QUICK_PATTERNS if quick else PATTERNS
    if seeds is None:
        seeds = QUICK_SEEDS if quick else SEEDS
    methods, patterns, seeds = (
        _distinct(v, k) for v, k in ((methods, "methods"), (patterns, "patterns"), (seeds, "seeds"))
    )
    steps = steps if steps is not None else (QUICK_STEPS if quick else STEPS)
    _check_inputs(methods, patterns, seeds, steps)
    overrides = dict(config or {})
    for k in overrides:
        if k in RETIRED:
            raise BnnkitError(
                f"config key {k!r} has left the protocol (measured, not kept: docs/bandit_results.md); "
                "the runs that used it reproduce at commit 6fd8c02."
            )
        if k not in DEFAULTS:
            raise BnnkitError(f"unknown config key {k!r}; keys are: {', '.join(DEFAULTS)}.")
    cfg = plain_config(quick, overrides)
    line = command_line(methods, patterns, seeds, steps, quick)
    grid = curve_index(steps, cfg["curve_points"])
    return Command(methods, patterns, seeds, steps, quick, cfg, overrides, line, grid)


def _stored_runs(
    source: Path, runs_path: Path, rebuild: bool, resume: bool, log: Callable[[str], None]
) -> list[dict[str, Any]]:
    """The records a command reuses: all of ``source`` when it rebuilds the report, those already
    in ``runs_path`` when it resumes; otherwise none, and ``runs_path`` starts afresh."""
    if not rebuild:
        return reopen_records(runs_path, resume, log)
    if not source.is_file():
        raise BnnkitError(
            f"{source} does not exist; pass the {RUNS_FILE} that a `bnnkit bench bandit` run wrote."
        )
    return read_records(source, log)


def _play_all(
    command: Command,
    stored: list[dict[str, Any]],
    play_missing: bool,
    contexts: Tensor,
    edible: Tensor,
    runs_path: Path,
    progress: bool,
    log: Callable[[str], None],
) -> tuple[list[dict[str, Any]], list[str], int]:
    """Every requested run: reused from ``stored``, else played (and recorded as it finishes) or,
    when ``play_missing`` is false, listed as missing; returns the runs, the missing ones and how
    many were reused."""
    from ... import __version__

    record_cfg = json.loads(json.dumps(command.cfg))  # as a record file gives it back, for the comparison
    base = json.loads(json.dumps(plain_config(command.quick)))
    runs: list[dict[str, Any]] = []
    missing: list[str] = []
    reused = 0
    for p in command.patterns:
        for method in command.methods:
            for seed in command.seeds:
                # a later line for the same run (a rerun) supersedes an earlier one
                found = [r for r in stored if same_run(r, method, p, seed, command.steps, record_cfg, base)]
                if found:
                    runs.append(public_record(found[-1]))
                    reused += 1
                    continue
                if not play_missing:
                    missing.append(f"{method} p={p:g} seed {seed}")
                    continue
                res = play(method, contexts, edible, p, command.steps, seed, command.cfg, progress)
                run = _run_row(method, p, seed, command, res)
                append_record(
                    runs_path,
                    {**run, "config": record_cfg, "protocol": PROTOCOL, "bnnkit_version": __version__},
                )
                runs.append(run)
                log(
                    f"p={p:g} {method:8s} seed {seed}: expected regret {run['final_expected_regret']:.0f} "
                    f"(realised {run['final_realised_regret']:.0f}; ate {run['poisonous_eaten']} poisonous, "
                    f"rejected {run['edible_rejected']} edible) {res['seconds']:.1f} s "
                    f"({run['ms_per_interaction']:.2f} ms/interaction)"
                )
    return runs, missing, reused


def _run_row(method: str, p: float, seed: int, command: Command, res: dict[str, Any]) -> dict[str, Any]:
    """A played run as the report and the record file hold it (its curve at ``command.grid``)."""
    cum = res["cumulative_regret"]
    return {
        "method": method,
        "pattern": p,
        "seed": seed,
        "final_expected_regret": float(cum[-1]),
        "final_realised_regret": res["realised_regret"],
        "poisonous_eaten": res["poisonous_eaten"],
        "edible_rejected": res["edible_rejected"],
        "seconds": res["seconds"],
        "ms_per_interaction": 1e3 * res["seconds"] / command.steps,
        "steps": command.steps,
        "curve": [float(cum[i - 1]) for i in command.grid],
        **({"fits": res["fits"]} if res.get("fits") else {}),
    }


def _write_report(out: Path, report: dict[str, Any], runs: list[dict[str, Any]], command: Command) -> None:
    """``bandit.json``, ``bandit.csv`` (records may carry keys of their own, e.g. a ``note``: each
    gets a column), ``bandit.md`` and a plot per pattern in ``out``."""
    rows = [{k: v for k, v in r.items() if k != "curve"} for r in runs]
    write_report_files(out, "bandit", report, rows, report["markdown"])
    for p in command.patterns:
        runs_at = {
            m: [r["curve"] for r in runs if r["method"] == m and r["pattern"] == p] for m in command.methods
        }
        plot_regret_curves(out / f"bandit_p{p:g}.png", p, runs_at, command.grid, command.seeds, command.line)


def same_run(
    r: dict[str, Any], method: str, p: float, seed: int, steps: int, cfg: dict[str, Any], base: dict[str, Any]
) -> bool:
    """Whether the record ``r`` is the run this command plays for ``(method, p, seed)``.

    A record written before a key joined :data:`DEFAULTS` lacks that key; it is read with the key's
    default (``base``), since a new key's default keeps the earlier behaviour.  A key the record has
    and the configuration does not (one since removed) never matches unless it holds the value it
    had (:data:`~bnnkit.bench.bandit.protocol.RETIRED`), nor does a record of another
    protocol version (:data:`~bnnkit.bench.bandit.protocol.PROTOCOL`; none: version 1).
    """
    stored = r.get("config")
    if not isinstance(stored, dict) or r.get("protocol", 1) != PROTOCOL:
        return False
    stored = {k: v for k, v in stored.items() if k not in RETIRED or v != RETIRED[k]}
    key = (r.get("method"), r.get("pattern"), r.get("seed"), r.get("steps"))
    return key == (method, p, seed, steps) and {**base, **stored} == cfg


def public_record(record: dict[str, Any]) -> dict[str, Any]:
    """A run as the report holds it: the record less its configuration (the report has one)."""
    return {k: v for k, v in record.items() if k not in ("config", "protocol", "bnnkit_version")}
