"""The UCI benchmark's report, made from the cells alone (a stopped run's tables rebuild from its
``uci_cells.jsonl``): the markdown table (the paper's standardised numbers and the published
original-unit ones of :mod:`bnnkit.bench.published` beside bnnkit's), ``uci.json``, ``uci.csv``
and the ``uci.png`` plot."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...core.files import pyplot, save_figure, write_report_files
from ...data.uci import uci_dataset_name
from ..published import SOURCES, published
from .protocol import FULL, QUICK
from .records import seconds_total

# The paper's Table 2 (RMSE) and Table 3 (NLL), standardised units, mean and sd over 10 splits:
# per data set, (RMSE of fsgld, sghmc, fsghmc) then (NLL of the same).
_PAPER_METHODS = ("fsgld", "sghmc", "fsghmc")
_PAPER_ROWS = {
    "yacht": ((0.41, 0.10), (1.19, 0.10), (0.25, 0.13), (-2.46, 0.28), (-2.06, 0.10), (-3.37, 0.69)),
    "bostonHousing": ((0.36, 0.09), (1.31, 0.06), (0.24, 0.10), (-2.20, 0.20), (-2.25, 0.08), (-3.26, 0.33)),
    "concrete": ((0.45, 0.04), (1.15, 0.06), (0.28, 0.05), (-1.63, 0.14), (-2.51, 0.08), (-2.74, 0.18)),
    "energy": ((0.24, 0.03), (1.07, 0.08), (0.18, 0.03), (-2.25, 0.25), (-2.39, 0.09), (-4.29, 0.23)),
    "wine-quality-red": ((0.71, 0.05), (1.14, 0.09), (0.62, 0.04), (-2.53, 0.15), (-2.50, 0.10), (-2.34, 0.25)),
    "kin8nm": ((0.74, 0.02), (1.26, 0.03), (0.37, 0.01), (-2.24, 0.09), (-2.29, 0.04), (-2.00, 0.12)),
    "protein-tertiary-structure": (
        (0.84, 0.01), (1.21, 0.01), (0.83, 0.01), (-2.10, 0.08), (-2.20, 0.01), (-2.02, 0.06),
    ),
}  # fmt: skip
PAPER = {
    metric: {ds: dict(zip(_PAPER_METHODS, row[3 * i : 3 * i + 3])) for ds, row in _PAPER_ROWS.items()}
    for i, metric in enumerate(("rmse", "nll"))
}
KIND_NOTES = {
    "gap": "Gap splits (in-between uncertainty, Foong et al. 2019): split s holds out the middle third of the "
    "rows sorted by one input dimension (`bnnkit.data.splits`; one split per dimension that gives one, the "
    "cells' `split_dim`); the paper's numbers are of random splits and are not shown.",
    "tail": "Tail splits (extrapolation): split s holds out the top and bottom sixths of the rows sorted by one "
    "input dimension (`bnnkit.data.splits`; one split per dimension that gives one, the cells' `split_dim`); "
    "the paper's numbers are of random splits and are not shown.",
}


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error (nan for one value)."""
    n = len(values)
    m = sum(values) / n
    if n < 2:
        return m, float("nan")
    var = sum((v - m) ** 2 for v in values) / (n - 1)
    return m, math.sqrt(var / n)


def write(out: Path, report: dict[str, Any], cells: list[dict[str, Any]]) -> None:
    """``uci.json``, ``uci.csv`` (one row per cell), ``uci.md`` and ``uci.png`` in ``out``."""
    write_report_files(out, "uci", report, cells, report["markdown"])
    _plot(out / "uci.png", report)


def _plot(path: Path, report: dict[str, Any]) -> None:
    """RMSE and NLL (standardised) per method, one row per data set: mean +- s.e. over splits,
    the paper's value (where published) as a red cross."""
    summary = report["summary"]
    standard = report.get("split_kind", "random") == "random"  # the paper's numbers are of random splits
    # a data set with no finished cell (a stopped run) gets no empty panel
    names = [n for n in summary if any("rmse_std" in v for v in summary[n].values())] or list(summary)
    fig, axes = pyplot().subplots(len(names), 2, figsize=(10, 0.5 + 0.42 * len(report["methods"]) * len(names) + 0.8),
                             squeeze=False)  # fmt: skip
    for row, name in zip(axes, names):
        methods = [m for m in report["methods"] if "rmse_std" in summary[name].get(m, {})]
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
            ax.set_yticks(list(ys), methods)
            ax.invert_yaxis()
            ax.set_title(f"{name}: {title} (standardised; lower is better)", fontsize=9)
            ax.grid(axis="x", alpha=0.3)
        row[0].legend(fontsize=7, loc="best")
    save_figure(fig, path, 100)


def make_report(
    cells: list[dict[str, Any]],
    datasets: Sequence[str],
    methods: Sequence[str],
    splits: int,
    quick: bool,
    seed: int,
    command: str,
    rebuilt: bool = False,
    first_split: int = 0,
    split_kind: str = "random",
) -> dict[str, Any]:
    """The report of ``cells``: the markdown table, a summary per data set and method, the protocol
    and the cells.  ``command`` is the run's (a ``bnnkit bench uci`` line or the in-memory call);
    ``rebuilt``: the cells came from ``--from-cells``.  The paper's and the published numbers, of the
    standard random splits, are shown beside ``split_kind="random"`` cells only."""
    standard = split_kind == "random"
    coverage = any(c.get("coverage_95") is not None for c in cells)
    summary: dict[str, dict[str, Any]] = {}
    shown: dict[str, dict[str, dict[str, tuple[float, float]]]] = {}  # published rows in the table
    rows = []
    for ds in datasets:
        name = uci_dataset_name(ds)
        for m in methods:
            every = [c for c in cells if c["dataset"] == name and c["method"] == m]
            summary.setdefault(name, {})[m] = stats = _stats(every)
            rows.append(_row(name, m, stats, len(every), coverage, standard))
        anchors = _published_anchors(name) if standard else {}
        if anchors:
            shown[name] = anchors
        rows += [_published_row(name, pm, pub, coverage) for pm, pub in anchors.items()]
    head = _header(cells, datasets, splits, quick, seed, command, rebuilt, first_split, split_kind, coverage)
    lines = head + _table_head(coverage) + rows + _rhat_lines(summary) + _source_lines(shown)
    return {
        "benchmark": "uci_regression",
        "command": command,
        "methods": list(methods),
        "quick": quick,
        "split_kind": split_kind,
        "protocol": (QUICK if quick else FULL).config(),
        "summary": summary,
        # data set -> method -> {"rmse": (mean, spread), "nll": ...}, original units; sources in SOURCES
        "published": shown,
        "cells": cells,
        "markdown": "\n".join(lines) + "\n",
        "rebuilt_from_cells": rebuilt,
    }


def _header(
    cells, datasets, splits, quick, seed, command, rebuilt, first_split, split_kind, coverage
) -> list[str]:
    """The title and the notes above the table."""
    standard = split_kind == "random"
    # the splits run: fewer than asked where a set has fewer (protein's 5; one gap split per input dimension)
    ran = max(
        [len({c["split"] for c in cells if c["dataset"] == uci_dataset_name(d)}) for d in datasets] or [0]
    )
    ran = ran or splits - first_split
    span = f" ({first_split}-{first_split + ran - 1})." if first_split else "."
    present = "; ".join(
        f"{uci_dataset_name(d)} {sorted({c['split'] for c in cells if c['dataset'] == uci_dataset_name(d)})}"
        for d in datasets
    )
    hidden = (QUICK if quick else FULL).hidden
    lines = [
        f"# UCI regression ({'quick mode: a smoke test, not results' if quick else 'full protocol'})"
        + ("" if standard else f", {split_kind} splits"),
        "",
        *([KIND_NOTES[split_kind]] if split_kind in KIND_NOTES else []),
        f"Command: `{command}`; split s uses seed {seed} + s. Mean +- standard error over "
        + ("the splits present (see below)." if rebuilt else f"{ran} split(s){span}"),
        "Every row is `bnnkit.fit(net, (x, y), method=M, standardize=False)` with M's defaults "
        "(`bnnkit.api.METHODS`) on the split's rows standardised by their training statistics, net "
        f"d -> {hidden} -> {hidden} -> 1 (tanh); ensemble, mcdropout, laplace and bbb take the noise of an "
        "RBF GP fitted to the training rows (fitted once per split, as fit fits it)."
        + (
            " Quick mode: 200 training rows, short runs (`bnnkit.bench.uci.protocol.QUICK`)." if quick else ""
        ),
    ]
    if standard:
        lines += [
            "RMSE/NLL in standardised units (the paper's scale) and in original units. Paper: Table 2/3 of",
            "Wu, Xuan & Lu (mean +- sd over their 10 random splits; their step sizes, thinning and noise",
            "model are unknown, so a difference may come from protocol, not method).",
        ]
    else:
        lines.append("RMSE/NLL in standardised units (the training rows' mean and sd) and in original units.")
    lines.append(
        "s/split: what `bnnkit.fit(method=M)` costs, the method's seconds plus, for ensemble, mcdropout, "
        "laplace and bbb, the GP fit that gives their noise (fsgld and fsghmc fit their GP prior inside "
        "fit); the CSV/JSON keep `seconds` and `gp_fit_seconds` apart."
    )
    if rebuilt:
        lines.append(
            f"Rebuilt from the `uci_cells.jsonl` of this command: the rows average the splits present, {present}."
        )
    if coverage:
        lines.append(
            "Coverage: the share of test targets inside the central 95 % predictive interval (a Gaussian "
            "with the predictive's mean and total variance); 0.95 is calibrated."
        )
    return [*lines, ""]


def _table_head(coverage: bool) -> list[str]:
    return [
        "| dataset | method | RMSE (std.) | paper RMSE | NLL (std.) | paper NLL | RMSE (orig.) | NLL (orig.) | "
        + ("95% coverage | " if coverage else "")
        + "s/split |",
        "|---|---|---|---|---|---|---|---|" + ("---|" if coverage else "") + "---|",
    ]


def _stats(every: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean +- s.e. of a method's cells on one data set; a cell whose chain diverged (non-finite
    scores) is counted, not averaged."""
    sel = [c for c in every if math.isfinite(c["rmse_std"]) and math.isfinite(c["nll_std"])]
    diverged = len(every) - len(sel)
    if not every:  # a stopped run that never reached this method
        return {"finished_splits": 0}
    if not sel:
        return {"diverged": diverged}
    stats: dict[str, Any] = {
        k: mean_se([c[k] for c in sel]) for k in ("rmse_std", "nll_std", "rmse", "nll", "seconds")
    }
    stats["seconds_total"] = mean_se([seconds_total(c) for c in sel])
    covered = [c["coverage_95"] for c in sel if c.get("coverage_95") is not None]
    covered = [v for v in covered if math.isfinite(v)]
    if covered:
        stats["coverage_95"] = mean_se(covered)
    stats["diverged"] = diverged
    rhats = [c["rhat"] for c in sel if c.get("rhat") is not None]
    if rhats:
        stats["rhat_median"] = float(sorted(rhats)[len(rhats) // 2])
        stats["rhat_at_most_1.1"] = sum(r <= 1.1 for r in rhats)
        stats["rhat_cells"] = len(rhats)
    return stats


def _row(name: str, m: str, stats: dict[str, Any], cells: int, coverage: bool, standard: bool) -> str:
    """One method's row of the table."""
    dashes = "- | " * (5 + coverage)  # the columns between the note and s/split of an empty row
    if "finished_splits" in stats:
        return f"| {name} | {m} | no finished split | {dashes}- |"
    if "rmse" not in stats:
        return f"| {name} | {m} | diverged in all {stats['diverged']} split(s) | {dashes}- |"

    def f(t):
        return f"{t[0]:.3f} +- {t[1]:.3f}" if t[1] == t[1] else f"{t[0]:.3f}"

    def paper(metric):
        p = PAPER[metric].get(name, {}).get(m) if standard else None
        return f"{p[0]:.2f} +- {p[1]:.2f}" if p else "-"

    label = m + (
        f" ({stats['diverged']} of {cells} splits diverged, not averaged)" if stats["diverged"] else ""
    )
    cover = ((f(stats["coverage_95"]) if "coverage_95" in stats else "-") + " | ") if coverage else ""
    return (
        f"| {name} | {label} | {f(stats['rmse_std'])} | {paper('rmse')} | {f(stats['nll_std'])} | {paper('nll')} | "
        f"{f(stats['rmse'])} | {f(stats['nll'])} | {cover}{stats['seconds_total'][0]:.0f} |"
    )


def _published_row(name: str, pm: str, pub: dict[str, tuple[float, float]], coverage: bool) -> str:
    """A row of published original-unit numbers on the same splits (their networks and split counts
    differ from ours: anchors, not a like-for-like comparison)."""
    return (
        f"| {name} | published {pm} | - | - | - | - | {_pub(pub.get('rmse'))} | {_pub(pub.get('nll'))} | "
        + ("- | " if coverage else "")
        + "- |"
    )


def _rhat_lines(summary: dict[str, dict[str, Any]]) -> list[str]:
    converged = [
        f"{name} {m}: median {st['rhat_median']:.2f}, {st['rhat_at_most_1.1']} of {st['rhat_cells']} cells <= 1.1"
        for name, by in summary.items()
        for m, st in by.items()
        if st.get("rhat_cells")
    ]
    if not converged:
        return []
    return [
        "",
        "Function-space R-hat of the sampler cells (bnnkit.fit's diagnostics): " + "; ".join(converged) + ".",
    ]


def _source_lines(shown: dict[str, Any]) -> list[str]:
    if not shown:
        return []
    return [
        "",
        "Rows `published <method>`: numbers published on the same standard splits, in original units "
        "(`bnnkit.bench.published`; smaller networks than ours, 50 hidden units (100 for protein), and 20 "
        "splits (5 for protein), so anchors for what the field reaches on this data, not a like-for-like "
        "comparison):",
        *(f"- `{pm}`: {SOURCES[pm]}" for pm in SOURCES if any(pm in a for a in shown.values())),
    ]


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
