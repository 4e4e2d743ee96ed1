"""The bandit's report: the markdown table, ``bandit.json`` (with the protocol), the curves and plots."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ...core.files import pyplot, save_figure
from .protocol import GREEDY_EPSILON, PROTOCOL, RUNS_FILE


def _fmt_list(values: Sequence[Any]) -> str:
    return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)


def curve_index(steps: int, points: int) -> list[int]:
    """Interaction counts (1-based) at which the JSON keeps the cumulative regret; ends at ``steps``."""
    k = max(1, min(points, steps))
    return sorted({max(1, round(steps * (j + 1) / k)) for j in range(k)})


def _mean_sd(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (None for a single value: JSON has no NaN)."""
    n = len(values)
    m = sum(values) / n
    if n < 2:
        return m, None
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))


@dataclass(frozen=True)
class Command:
    """What a bandit command asks for: its runs, the configuration they share, its command line
    and the interaction counts ``grid`` at which the curves are kept."""

    methods: tuple[str, ...]
    patterns: tuple[float, ...]
    seeds: tuple[int, ...]
    steps: int
    quick: bool
    cfg: dict[str, Any]
    overrides: dict[str, Any]
    line: str
    grid: list[int]


def _report(
    command: Command, runs: list[dict[str, Any]], wall: float, reused: int, source: Path
) -> dict[str, Any]:
    """The JSON report of ``runs`` (its ``markdown`` the table of ``bandit.md``)."""
    summary = _summary(command, runs)
    return {
        "benchmark": "mushroom_bandit",
        "command": command.line,
        "config_overrides": command.overrides,
        "quick": command.quick,
        "methods": list(command.methods),
        "patterns": list(command.patterns),
        "seeds": list(command.seeds),
        "steps": command.steps,
        # the values it ran with; the rules in words: docs/bandit_protocol.md (one place)
        "protocol": {**command.cfg, "version": PROTOCOL},
        "summary": summary,
        "curve_interactions": command.grid,
        "runs": runs,
        "wall_clock_seconds": wall,
        "runs_reused": reused,
        "run_seconds_total": sum(r["seconds"] for r in runs),
        "torch_threads": torch.get_num_threads(),
        "markdown": _markdown(command, summary, runs, wall, reused, source),
    }


def _summary(command: Command, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per pattern and method: the final regrets' mean, sd and range over seeds, and the timings
    (None where no run is there)."""
    summary: dict[str, Any] = {}
    for p in command.patterns:
        for m in command.methods:
            sel = [r for r in runs if r["method"] == m and r["pattern"] == p]
            if not sel:  # rebuilt from a record file that lacks these runs
                summary.setdefault(f"{p:g}", {})[m] = None
                continue
            exp = [r["final_expected_regret"] for r in sel]
            mean, sd = _mean_sd(exp)
            summary.setdefault(f"{p:g}", {})[m] = {
                "seeds": [r["seed"] for r in sel],
                "final_expected_regret_mean": mean,
                "final_expected_regret_sd": sd,
                "final_expected_regret_min": min(exp),
                "final_expected_regret_max": max(exp),
                "final_realised_regret_mean": _mean_sd([r["final_realised_regret"] for r in sel])[0],
                "seconds_mean": _mean_sd([r["seconds"] for r in sel])[0],
                "ms_per_interaction_mean": _mean_sd([r["ms_per_interaction"] for r in sel])[0],
            }
    return summary


def _markdown(command: Command, summary: dict[str, Any], runs, wall: float, reused: int, source: Path) -> str:
    """``bandit.md``: the table of final expected regrets, with the command and the timings."""
    seeds, patterns, methods = command.seeds, command.patterns, command.methods

    def cell(s: dict | None) -> str:
        if s is None:
            return "-"
        m, sd = s["final_expected_regret_mean"], s["final_expected_regret_sd"]
        text = f"{m:.0f}" if sd is None else f"{m:.0f} +- {sd:.0f}"
        return text if len(s["seeds"]) == len(seeds) else f"{text} (n = {len(s['seeds'])})"

    overrides = command.overrides
    lines = [
        f"# Mushroom contextual bandit ({'quick mode: a smoke test, not results' if command.quick else 'Blundell et al. protocol'})",
        "",
        f"Command: `{command.line}`"
        + (f" with config overrides `{json.dumps(overrides)}`" if overrides else "")
        + ".",
        f"Seeds {_fmt_list(seeds)} (one run per seed; the seed fixes the mushroom sequence, the poison",
        "outcomes, the initial weights and the agent's random numbers). Cells: cumulative *expected* regret",
        f"after {command.steps} interactions (E[oracle reward] - E[reward of the chosen action], summed), mean +- sd",
        "over seeds. The oracle eats exactly the edible mushrooms. Lower is better.",
        "",
        "| method | " + " | ".join(f"p = {p:g}" for p in patterns) + " |",
        "|---|" + "---|" * len(patterns),
    ]
    for m in methods:
        lines.append(f"| {m} | " + " | ".join(cell(summary[f"{p:g}"][m]) for p in patterns) + " |")
    timing = ", ".join(
        f"{m} {_mean_sd([r['ms_per_interaction'] for r in runs if r['method'] == m])[0]:.1f}"
        for m in methods
        if any(r["method"] == m for r in runs)
    )
    run_seconds = sum(r["seconds"] for r in runs)
    if reused:
        when = (
            f"{wall:.0f} s for this command, which reused {reused} of its {len(runs)} runs from "
            f"`{source}` ({run_seconds:.0f} s summed over the runs, each with the threads of its own command)"
        )
    else:
        when = f"{wall:.0f} s in all with {torch.get_num_threads()} torch thread(s)"
    lines += [
        "",
        f"Wall-clock time (varies between runs, unlike the regrets): {when}; ms per interaction: {timing}.",
        "Curves: `bandit_p<p>.png` (mean over seeds, min-max band). Per-run numbers: `bandit.csv`, `bandit.json`,",
        f"`{RUNS_FILE}` (each run as it finished; `--resume` and `--from-runs` read it).",
        "Protocol choices (bnnkit's where the paper is silent): `protocol` in `bandit.json` and",
        "docs/bandit_protocol.md.",
    ]
    return "\n".join(lines) + "\n"


COLOURS = {
    "sgld": "tab:orange",
    "fsgld": "tab:blue",
    "bbb": "tab:green",
    "greedy0": "tab:red",
    "greedy1": "tab:purple",
    "greedy5": "tab:brown",
    "sghmc": "tab:olive",
    "fsghmc": "tab:cyan",
    "fbnn": "tab:pink",
    "laplace": "tab:gray",
    "default": "black",
}


def plot_regret_curves(
    path: Path, p: float, curves: dict[str, list[list[float]]], grid: list[int], seeds, cmd
) -> None:
    """Mean cumulative expected regret over seeds with a min-max band, one line per method that
    has runs; ``curves[m]`` holds one curve per seed at the interaction counts ``grid``."""
    fig, ax = pyplot().subplots(figsize=(7, 4.5))
    x = torch.tensor([0, *grid]).numpy()  # no regret before the first interaction
    for m, runs in curves.items():
        if not runs:
            continue
        c = torch.nn.functional.pad(torch.tensor(runs, dtype=torch.float64), (1, 0))
        ax.fill_between(
            x, c.min(0).values.numpy(), c.max(0).values.numpy(), color=COLOURS[m], alpha=0.2, lw=0
        )
        n = "" if len(runs) == len(seeds) else f", n = {len(runs)}"
        ax.plot(
            x,
            c.mean(0).numpy(),
            color=COLOURS[m],
            ls="--" if m in GREEDY_EPSILON else "-",  # the baselines apart from the Bayesian agents
            lw=1.6,
            label=f"{m} ({float(c[:, -1].mean()):.0f}{n})",
        )
    ax.set_xlabel("interaction")
    ax.set_ylabel("cumulative expected regret")
    ax.set_title(f"Mushroom bandit, p = {p:g}: mean over seeds {_fmt_list(seeds)}, min-max band", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", title="method (final mean; dashed: greedy)", title_fontsize=8)
    ax.grid(alpha=0.3)
    fig.text(0.01, 0.005, cmd, fontsize=6, color="grey")
    save_figure(fig, path, 110, rect=(0, 0.02, 1, 1))
