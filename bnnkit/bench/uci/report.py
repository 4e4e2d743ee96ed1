"""The UCI benchmark's report: the markdown table (the functional SG-MCMC paper's standardised
numbers and the published original-unit numbers of :mod:`bnnkit.bench.published` beside
bnnkit's), ``uci.json``, ``uci.csv`` and the ``uci.png`` plot, all made from the cells alone (so a
stopped run's tables can be rebuilt from its ``uci_cells.jsonl``).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...data.uci import is_known_uci, uci_dataset_name
from ..methods import MOMENTUM
from ..published import SOURCES, published
from .protocol import ALIASES, SG_METHODS, VI_METHODS, adaptive_methods

# The paper's Table 2 (RMSE) and Table 3 (NLL): mean and sd over 10 splits, standardised units.
PAPER = {
    "rmse": {
        "yacht": {"sgld": (1.09, 0.10), "fsgld": (0.41, 0.10), "sghmc": (1.19, 0.10), "fsghmc": (0.25, 0.13)},
        "bostonHousing": {
            "sgld": (1.23, 0.06),
            "fsgld": (0.36, 0.09),
            "sghmc": (1.31, 0.06),
            "fsghmc": (0.24, 0.10),
        },
        "concrete": {
            "sgld": (1.10, 0.07),
            "fsgld": (0.45, 0.04),
            "sghmc": (1.15, 0.06),
            "fsghmc": (0.28, 0.05),
        },
        "energy": {
            "sgld": (1.04, 0.06),
            "fsgld": (0.24, 0.03),
            "sghmc": (1.07, 0.08),
            "fsghmc": (0.18, 0.03),
        },
        "wine-quality-red": {
            "sgld": (1.08, 0.09),
            "fsgld": (0.71, 0.05),
            "sghmc": (1.14, 0.09),
            "fsghmc": (0.62, 0.04),
        },
        "kin8nm": {
            "sgld": (1.20, 0.02),
            "fsgld": (0.74, 0.02),
            "sghmc": (1.26, 0.03),
            "fsghmc": (0.37, 0.01),
        },
        "protein-tertiary-structure": {
            "sgld": (1.12, 0.01),
            "fsgld": (0.84, 0.01),
            "sghmc": (1.21, 0.01),
            "fsghmc": (0.83, 0.01),
        },
    },
    "nll": {
        "yacht": {
            "sgld": (-0.37, 0.08),
            "fsgld": (-2.46, 0.28),
            "sghmc": (-2.06, 0.10),
            "fsghmc": (-3.37, 0.69),
        },
        "bostonHousing": {
            "sgld": (-0.60, 0.11),
            "fsgld": (-2.20, 0.20),
            "sghmc": (-2.25, 0.08),
            "fsghmc": (-3.26, 0.33),
        },
        "concrete": {
            "sgld": (-0.54, 0.05),
            "fsgld": (-1.63, 0.14),
            "sghmc": (-2.51, 0.08),
            "fsghmc": (-2.74, 0.18),
        },
        "energy": {
            "sgld": (-0.58, 0.09),
            "fsgld": (-2.25, 0.25),
            "sghmc": (-2.39, 0.09),
            "fsghmc": (-4.29, 0.23),
        },
        "wine-quality-red": {
            "sgld": (-0.90, 0.12),
            "fsgld": (-2.53, 0.15),
            "sghmc": (-2.50, 0.10),
            "fsghmc": (-2.34, 0.25),
        },
        "kin8nm": {
            "sgld": (-0.60, 0.04),
            "fsgld": (-2.24, 0.09),
            "sghmc": (-2.29, 0.04),
            "fsghmc": (-2.00, 0.12),
        },
        "protein-tertiary-structure": {
            "sgld": (-0.60, 0.01),
            "fsgld": (-2.10, 0.08),
            "sghmc": (-2.20, 0.01),
            "fsghmc": (-2.02, 0.06),
        },
    },
}


def _mean_se(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    m = sum(values) / n
    if n < 2:
        return m, float("nan")
    var = sum((v - m) ** 2 for v in values) / (n - 1)
    return m, math.sqrt(var / n)


mean_se = _mean_se  # the public name (experiments/ and benchmarks/ use it)


def _write(out: Path, report: dict[str, Any], cells: list[dict[str, Any]]) -> None:
    (out / "uci.json").write_text(json.dumps(report, indent=2, default=float))
    with (out / "uci.csv").open("w", newline="") as f:
        keys = list(dict.fromkeys(k for c in cells for k in c))  # cells of older runs may lack a key
        w = csv.DictWriter(f, fieldnames=keys, restval="")
        w.writeheader()
        w.writerows(cells)
    (out / "uci.md").write_text(report["markdown"])
    _plot(out / "uci.png", report)


def _method_label(method: str, asked_as: dict[str, str]) -> str:
    """A row's name in the table and the plot: ``hmc (NUTS)`` where NUTS was asked for as ``hmc``
    (``asked_as`` maps a method to the alias it was asked for by, e.g. ``{"nuts": "hmc"}``)."""
    return f"{asked_as[method]} (NUTS)" if method in asked_as else method


def _plot(path: Path, report: dict[str, Any]) -> None:
    """RMSE and NLL (standardised) per method, one row per data set: mean +- s.e. over splits,
    the paper's value (where published) as a red cross."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = report["summary"]
    standard = report.get("split_kind", "random") == "random"  # the paper's numbers are of random splits
    # a data set with no finished cell (a stopped run) gets no empty panel
    names = [n for n in summary if any("rmse_std" in v for v in summary[n].values())] or list(summary)
    fig, axes = plt.subplots(len(names), 2, figsize=(10, 0.5 + 0.42 * len(report["methods"]) * len(names) + 0.8),
                             squeeze=False)  # fmt: skip
    asked_as = {t: a for a, t in report["aliases"].items()}  # e.g. {"nuts": "hmc"}
    for row, name in zip(axes, names):
        methods = [m for m in report["methods"] if "rmse_std" in summary[name].get(m, {})]
        labels = [_method_label(m, asked_as) for m in methods]
        for ax, key, title, paper in (
            (row[0], "rmse_std", "test RMSE", PAPER["rmse"]),
            (row[1], "nll_std", "test NLL", PAPER["nll"]),
        ):
            ys = range(len(methods))
            mean = [summary[name][m][key][0] for m in methods]
            se = [summary[name][m][key][1] for m in methods]
            se = [0.0 if math.isnan(e) else e for e in se]  # one split: no standard error
            ax.errorbar(mean, list(ys), xerr=se, fmt="o", color="tab:blue", capsize=3, label="bnnkit")
            px = [(paper.get(name, {}).get(m) or (None,))[0] if standard else None for m in methods]
            pts = [(x, y) for x, y in zip(px, ys) if x is not None]
            if pts:
                ax.plot([x for x, _ in pts], [y for _, y in pts], "x", color="tab:red", ms=8, label="paper")
            ax.set_yticks(list(ys), labels)
            ax.invert_yaxis()
            ax.set_title(f"{name}: {title} (standardised; lower is better)", fontsize=9)
            ax.grid(axis="x", alpha=0.3)
        row[0].legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _report(
    cells,
    datasets,
    methods,
    splits,
    quick,
    seed,
    cfg,
    requested=None,
    rebuilt=False,
    first_split=0,
    *,
    command: str | None = None,
    root: str | Path | None = None,
    split_kind: str = "random",
) -> dict[str, Any]:
    """The report of ``cells`` (a dict with the markdown table, a summary per data set and method,
    the protocol and the cells).  ``command`` replaces the ``bnnkit bench uci`` command line the
    report names (the in-memory entry point names its call); ``root`` is named as ``--data`` where
    a data set is the user's own folder (the known sets are found by name).  ``split_kind`` is the
    cells' kind of split: the paper's and the published numbers, of the standard random splits,
    are shown beside random splits only.  The table has a column of 95 % interval coverage where
    the cells report it (``coverage_95``)."""
    standard = split_kind == "random"  # the paper's and published numbers are of these splits
    requested = list(methods) if requested is None else list(requested)
    aliased = {ALIASES[m]: m for m in requested if m in ALIASES}  # e.g. {"nuts": "hmc"}
    own_data = root is not None and not all(is_known_uci(d) for d in datasets)
    cmd = command or (
        f"bnnkit bench uci --datasets {','.join(datasets)} --methods {','.join(requested)} --splits {splits}"
        + (f" --first-split {first_split}" if first_split else "")
        + (f" --data {root}" if own_data else "")
        + (" --quick" if quick else "")
        + (" --tune" if cfg.get("tune") else "")
        + (f" --seed {seed}" if seed else "")
        + ("" if standard else f" --split-kind {split_kind}")
    )
    adaptive = [m for m in methods if m in adaptive_methods(cfg["version"])] if cfg.get("adaptive") else []
    sg_run = {m: cfg["step_size"][m] for m in methods if m in SG_METHODS and m not in adaptive}
    a = cfg.get("adaptive") or {}
    sghmc_ladder = a.get("cyclical_sghmc_ladder")
    cyc_hmc = ["sghmc"] if sghmc_ladder and "sghmc" in adaptive else []
    rungs = ", ".join(map(str, map(tuple, sghmc_ladder or ())))
    hmc = [m for m in adaptive if m in MOMENTUM and m not in cyc_hmc]
    langevin = [m for m in adaptive if m not in MOMENTUM and m != "csgld"]
    ladder = a.get("cyclical_ladder")
    kernels = (
        (
            [f"{', '.join(hmc)}: scale-adapted SGHMC (eps {a['step_size']}, mdecay {a['mdecay']})"]
            if hmc
            else []
        )
        + (
            [
                "sghmc: cyclical scale-adapted SGHMC (eps_t = a x (cos(pi r_t) + 1) / 2 over csgld's cycles, the "
                "mass re-estimated over at most w steps where a cycle explores and frozen where it samples; "
                + (
                    f"(a, w) each of {rungs}, keeping among those whose chains agree (R-hat <= {a['rhat']}) the one "
                    "that fits the training rows best (in-sample log pointwise predictive density; none agree: the "
                    "lowest R-hat))"
                    if a.get("rung_choice", "first") != "first"
                    else f"(a, w) the first of {rungs} whose chains agree, by csgld's rule)"
                )
            ]
            if cyc_hmc
            else []
        )
        + (
            [f"{', '.join(langevin)}: pSGLD (eps {a['sgld_step_size']} / N, alpha {a['sgld_alpha']})"]
            if langevin
            else []
        )
        + (
            [
                "csgld: cyclical pSGLD (eps_t = "
                + (
                    f"a / N x (cos(pi r_t) + 1) / 2, the peak a the first of {', '.join(map(str, ladder))} whose "
                    f"chains agree, R-hat <= {a['rhat']} when the run ends (none: the one of lowest R-hat; the cell's "
                    "seconds are every peak it ran)"
                    if ladder
                    else f"{a['cyclical_peak']} / N x (cos(pi r_t) + 1) / 2"
                )
                + f" over cycles of "
                f"{a['cyclical_cycle']:,} steps, the first {a['cyclical_exploration']:.0%} of each without noise or "
                f"draws, one cycle of burn-in, draws thinned by {a['cyclical_thin']}, at most "
                f"{a['cyclical_draws']} per chain, the rule checked every {a['cyclical_min_draws']}"
                + (
                    f"; the noise precision drawn by Gibbs every {a['cyclical_gibbs_every']} steps, so its chains "
                    "run one at a time, spend the whole budget and have their R-hat measured at the end)"
                    if a.get("cyclical_gibbs_every")
                    else ")"
                )
            ]
            if "csgld" in adaptive
            else []
        )
    )
    adaptive_note = (
        f"{'; '.join(kernels)}; "
        f"{a['chains']} vectorised chains, each warm started by at most {a['map_max_steps']:,} steps of Adam "
        f"(lr {a['map_lr']}) from PyTorch's default initialisation, early-stopped on a held-out "
        f"{a['map_holdout']:.0%} of the training rows (patience {a['map_patience']} scores), "
        f"{a['burn_in']} burn-in steps, then draws thinned by {a['thin']} until the function-space R-hat at "
        f"{a['check_inputs']} test inputs is <= {a['rhat']} with ESS >= {a['ess']} (checked every "
        f"{a['min_draws']} draws per chain) or {a['draws']} draws per chain are spent"
        + (
            "; the functional methods' GP prior in its Vecchia form"
            if {"fsghmc", "fsgld"} & set(adaptive)
            else ""
        )
        + ". Each cell's R-hat, ESS, draws per chain and what stopped it are in the JSON."
        if adaptive
        else ""
    )
    scaled = (
        f" (for Boston's {cfg['step_rows']} training rows; on N > {cfg['step_rows']} rows, with "
        f"r = {cfg['step_rows']}/N, SGLD's x r, SGHMC's x sqrt(r) with the friction / sqrt(r))"
    )
    if not sg_run:
        step_note = ""
    elif cfg.get("tune"):
        t = cfg["tune"]
        step_note = (
            f"SG-MCMC step sizes: chosen per split from {t['factors']} x the defaults {sg_run}{scaled} by "
            f"chains ({cfg['burn_in'] if t['burn_in'] is None else t['burn_in']} burn-in, {t['draws']} draws, "
            "2 chains) on 80/20 of the training "
            "rows: the lowest held-out NLL among the settings that stayed finite; the chosen values are in "
            "the CSV/JSON (`step_size`), each cell's tuning table in the JSON and uci_cells.jsonl (`tuning`)."
        )
    else:
        step_note = f"SG-MCMC step sizes: fixed at {sg_run}{scaled} (chosen on Boston split 0; `--tune` chooses them per split)."
    vi_run = [m for m in methods if m in VI_METHODS]
    vi_note = (
        "VI baselines: "
        + ", ".join(
            f"{m} {cfg[m]['epochs']} epochs (at most {cfg[m]['max_steps']:,} optimiser steps"
            + (" per member)" if m == "ensemble" else ")")
            for m in vi_run
        )
        + "; the epochs run are in the CSV/JSON (`epochs`)."
        if vi_run and not quick
        else ""
    )
    summary: dict[str, Any] = {}
    shown: dict[str, dict[str, dict[str, tuple[float, float]]]] = {}  # published rows in the table
    coverage = any(c.get("coverage_95") is not None for c in cells)
    # the splits run: fewer than asked where a set has fewer (protein's 5 standard ones; gap and tail
    # splits, one per input dimension)
    ran = max(
        [len({c["split"] for c in cells if c["dataset"] == uci_dataset_name(d)}) for d in datasets] or [0]
    )
    ran = ran or splits - first_split
    kind_note = {
        "gap": "Gap splits (in-between uncertainty, Foong et al. 2019): split s holds out the middle third of the "
        "rows sorted by one input dimension (`bnnkit.data.splits`; one split per dimension that gives one, "
        "the cells' `split_dim`); the paper's numbers are of random splits and are not shown.",
        "tail": "Tail splits (extrapolation): split s holds out the top and bottom sixths of the rows sorted by one "
        "input dimension (`bnnkit.data.splits`; one split per dimension that gives one, the cells' `split_dim`); "
        "the paper's numbers are of random splits and are not shown.",
    }
    lines = [
        f"# UCI regression ({'quick mode: a smoke test, not results' if quick else 'full protocol'})"
        + ("" if standard else f", {split_kind} splits"),
        "",
        *([kind_note[split_kind]] if split_kind in kind_note else []),
        f"Command: `{cmd}`; split s uses seed {seed} + s. Mean +- standard error over "
        + (
            "the splits present (see below)."
            if rebuilt
            else f"{ran} split(s)" + (f" ({first_split}-{first_split + ran - 1})." if first_split else ".")
        ),
        *(
            [
                "RMSE/NLL in standardised units (the paper's scale) and in original units. Paper: Table 2/3 of",
                "Wu, Xuan & Lu (mean +- sd over their 10 random splits; their step sizes, thinning and noise",
                "model are unknown, so a difference may come from protocol, not method).",
            ]
            if standard
            else ["RMSE/NLL in standardised units (the training rows' mean and sd) and in original units."]
        ),
        *[
            f"`{a}` is an alias of `{t}`: the gold standard is run with NUTS (full-batch No-U-Turn HMC, "
            f"{cfg['nuts'].get('chains', 1)} chain(s), each {cfg['nuts']['warmup']} warm-up steps and "
            f"{cfg['nuts']['draws']} draws, tree depth <= "
            f"{cfg['nuts']['max_tree_depth']}); its rows read `{a} (NUTS)`."
            for t, a in aliased.items()
        ],
        *([step_note] if step_note else []),
        *([adaptive_note] if adaptive_note else []),
        *([vi_note] if vi_note else []),
        *(
            [
                "Rebuilt from the `uci_cells.jsonl` of this command (or of a run that stopped before it "
                "finished): the rows "
                "average the splits present, "
                + "; ".join(
                    f"{uci_dataset_name(d)} {sorted({c['split'] for c in cells if c['dataset'] == uci_dataset_name(d)})}"
                    for d in datasets
                )
                + " (the last split may lack some methods)."
            ]
            if rebuilt
            else []
        ),
        *(
            [
                "Coverage: the share of test targets inside the central 95 % predictive interval (a Gaussian "
                "with the predictive's mean and total variance); 0.95 is calibrated."
            ]
            if coverage
            else []
        ),
        "",
        "| dataset | method | RMSE (std.) | paper RMSE | NLL (std.) | paper NLL | RMSE (orig.) | NLL (orig.) | "
        + ("95% coverage | " if coverage else "")
        + "s/split |",
        "|---|---|---|---|---|---|---|---|" + ("---|" if coverage else "") + "---|",
    ]
    dashes = "- | " * (5 + coverage)  # the columns between the note and s/split of an empty row
    for ds in datasets:
        name = uci_dataset_name(ds)
        for m in methods:
            label = _method_label(m, aliased)  # every row of a method reads the same
            every = [c for c in cells if c["dataset"] == name and c["method"] == m]
            # A chain that diverged gives non-finite predictions: count it, average the others.
            sel = [c for c in every if math.isfinite(c["rmse_std"]) and math.isfinite(c["nll_std"])]
            diverged = len(every) - len(sel)
            if not every:  # a stopped run that never reached this method
                summary.setdefault(name, {})[m] = {"finished_splits": 0}
                lines.append(f"| {name} | {label} | no finished split | {dashes}- |")
                continue
            if not sel:
                summary.setdefault(name, {})[m] = {"diverged": diverged}
                lines.append(f"| {name} | {label} | diverged in all {diverged} split(s) | {dashes}- |")
                continue
            stats = {
                k: _mean_se([c[k] for c in sel]) for k in ("rmse_std", "nll_std", "rmse", "nll", "seconds")
            }
            covered = [c["coverage_95"] for c in sel if c.get("coverage_95") is not None]
            covered = [v for v in covered if math.isfinite(v)]
            if covered:
                stats["coverage_95"] = _mean_se(covered)
            stats["diverged"] = diverged
            rhats = [c["rhat"] for c in sel if c.get("rhat") is not None]
            if rhats:  # protocol 4's convergence-checked cells
                stats["rhat_median"] = float(sorted(rhats)[len(rhats) // 2])
                stats["rhat_at_most_1.1"] = sum(r <= 1.1 for r in rhats)
                stats["rhat_cells"] = len(rhats)
            ladders = [c for c in sel if c.get("ladder")]
            if ladders:  # csgld (9), sghmc (10): the rung each split kept, and how many runs it took
                kept = [
                    c["peak"] if c.get("window") is None else f"{c['peak']} (window {c['window']})"
                    for c in ladders
                ]
                stats["peaks_kept"] = {str(p): kept.count(p) for p in sorted(set(kept), key=str)}
                stats["ladder_runs"] = sum(len(c["ladder"]) for c in ladders)
            summary.setdefault(name, {})[m] = stats
            p_r = PAPER["rmse"].get(name, {}).get(m) if standard else None
            p_n = PAPER["nll"].get(name, {}).get(m) if standard else None

            def f(t):
                return f"{t[0]:.3f} +- {t[1]:.3f}" if t[1] == t[1] else f"{t[0]:.3f}"

            if diverged:
                label += f" ({diverged} of {len(every)} splits diverged, not averaged)"
            lines.append(
                f"| {name} | {label} | {f(stats['rmse_std'])} | {f'{p_r[0]:.2f} +- {p_r[1]:.2f}' if p_r else '-'} | "
                f"{f(stats['nll_std'])} | {f'{p_n[0]:.2f} +- {p_n[1]:.2f}' if p_n else '-'} | "
                f"{f(stats['rmse'])} | {f(stats['nll'])} | "
                + ((f(stats["coverage_95"]) if "coverage_95" in stats else "-") + " | " if coverage else "")
                + f"{stats['seconds'][0]:.0f} |"
            )
        # Published original-unit numbers on the same splits, as rows of their own (their networks and
        # splits counts differ from ours: anchors, not a like-for-like comparison).  None for own sets.
        anchors = _published_anchors(name) if standard else {}
        if anchors:
            shown[name] = anchors
        for pm, pub in anchors.items():
            lines.append(
                f"| {name} | published {pm} | - | - | - | - | {_pub(pub.get('rmse'))} | {_pub(pub.get('nll'))} | "
                + ("- | " if coverage else "")
                + "- |"
            )
    converged = [
        f"{name} {m}: median {st['rhat_median']:.2f}, {st['rhat_at_most_1.1']} of {st['rhat_cells']} cells <= 1.1"
        for name, by in summary.items()
        for m, st in by.items()
        if st.get("rhat_cells")
    ]
    if converged:
        lines += ["", "Function-space R-hat of the convergence-checked cells: " + "; ".join(converged) + "."]
    peaks = [
        f"{name} {m}: "
        + ", ".join(f"{p} on {k}" for p, k in st["peaks_kept"].items())
        + f" ({st['ladder_runs']} runs for {sum(st['peaks_kept'].values())} splits)"
        for name, by in summary.items()
        for m, st in by.items()
        if st.get("peaks_kept")
    ]
    if peaks:
        lines += [
            "",
            "The rung each ladder cell (csgld, protocol 10's sghmc) kept (splits per rung): "
            + "; ".join(peaks)
            + ".",
        ]
    if shown:
        lines += [
            "",
            "Rows `published <method>`: numbers published on the same standard splits, in original units "
            "(`bnnkit.bench.published`; smaller networks than ours, 50 hidden units (100 for protein), and 20 "
            "splits (5 for protein), so anchors for what the field reaches on this data, not a like-for-like "
            "comparison):",
            *(f"- `{pm}`: {SOURCES[pm]}" for pm in SOURCES if any(pm in a for a in shown.values())),
        ]
    protocol = {k: v for k, v in cfg.items()}
    return {
        "benchmark": "uci_regression",
        "command": cmd,
        "methods": list(methods),
        "aliases": {a: t for t, a in aliased.items()},
        "quick": quick,
        "split_kind": split_kind,
        "protocol": protocol,
        "summary": summary,
        # data set -> method -> {"rmse": (mean, spread), "nll": ...}, original units; sources in SOURCES
        "published": shown,
        "cells": cells,
        "markdown": "\n".join(lines) + "\n",
        "rebuilt_from_cells": rebuilt,
    }


def _published_anchors(name: str) -> dict[str, dict[str, tuple[float, float]]]:
    """``{method: {"rmse": (mean, spread), "nll": (mean, spread)}}`` published for the data set
    ``name`` (canonical), original units; empty for a set with none (the user's own)."""
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for metric in ("rmse", "nll"):
        for m, v in published(metric, name).items():
            out.setdefault(m, {})[metric] = v
    return out


def _pub(v: tuple[float, float] | None) -> str:
    """A published mean +- spread, to 2 decimals, or 3 where it was published with 3 (0.098)."""

    def num(x: float) -> str:
        return f"{x:.2f}" if round(x, 2) == x else f"{x:.3f}"

    return "-" if v is None else f"{num(v[0])} +- {num(v[1])}"
