"""Test NLL against function-space R-hat, every split of every set: the samplers' cells side by side.

Reads the bench's cells (``docs/results/uci/*.jsonl`` or a run's ``uci_cells.jsonl``), keeps for
each (set, split, method) the latest cell of the protocol that defines that method's current recipe
(:data:`CURRENT`, as protocol 10 left them; and csgld's protocol 7 and Gibbs experiment, version 8),
and draws one panel per data set: each cell's R-hat
(maximum over the first 100 test inputs) against its test NLL in original units, with the 1.1
line.  Used for docs/archive/uci_results_protocols_2_11.md, "Protocol 10"::

    python -m experiments.uci_rhat_plot docs/results/uci/*.jsonl docs/results/uci_experiments/csgld_gibbs.jsonl \\
        --out docs/img/uci_rhat_nll.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

# (method, protocol: None for its current recipe, label, marker, colour)
SERIES = (
    ("csgld", None, "csgld, ladder of peaks (protocol 9)", "o", "C0"),
    ("csgld", 7, "csgld, one peak (protocol 7)", "o", "C7"),
    ("csgld", 8, "csgld + Gibbs noise draws (experiment, version 8)", "o", "C9"),
    ("sgld", None, "sgld (pSGLD, protocol 5)", "s", "C1"),
    ("sghmc", None, "sghmc, cyclical adaptive SGHMC ladder (protocol 10)", "^", "C2"),
    ("sghmc", 4, "sghmc, constant step (protocol 4)", "^", "C8"),
    ("fsgld", None, "fsgld (protocol 5)", "v", "C4"),
    ("fsghmc", None, "fsghmc (protocol 4)", "<", "C5"),
    ("nuts", None, "nuts (4 chains, protocol 6)", "D", "C3"),
)
SETS = (
    "bostonHousing",
    "yacht",
    "concrete",
    "energy",
    "wine-quality-red",
    "kin8nm",
    "protein-tertiary-structure",
)


# The protocol whose recipe for each method was protocol 10's (the bench's versions until issue 44,
# whose protocol runs every method through bnnkit.fit); a method not listed: protocol 3.
CURRENT = {"sghmc": 10, "fsghmc": 4, "sgld": 5, "fsgld": 5, "nuts": 6, "csgld": 9}


def current_version(method: str) -> int:
    """The protocol whose recipe for ``method`` was protocol 10's."""
    return CURRENT.get(method, 3)


def latest_cells(paths: list[Path]) -> dict[int, list[dict]]:
    """Per series (index into :data:`SERIES`), the latest cell of each (set, split) with an R-hat."""
    latest: dict[tuple, dict] = {}
    for path in paths:
        for line in path.open():
            c = json.loads(line)
            for i, (m, version, *_) in enumerate(SERIES):
                wanted = current_version(m) if version is None else version
                if c.get("method") == m and c.get("protocol") == wanted and c.get("rhat") is not None:
                    latest[(i, c["dataset"], c["split"])] = c
    out: dict[int, list[dict]] = {}
    for (i, _, _), c in latest.items():
        out.setdefault(i, []).append(c)
    return out


def plot(series: dict[int, list[dict]], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = [s for s in SETS if any(c["dataset"] == s for cells in series.values() for c in cells)]
    cols = min(4, len(sets))
    rows = -(-len(sets) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.0 * cols, 3.4 * rows), squeeze=False)
    for ax, ds in zip(axes.flat, sets):
        for i, (_, _, label, marker, colour) in enumerate(SERIES):
            mine = [c for c in series.get(i, []) if c["dataset"] == ds]
            if mine:
                ax.scatter([c["rhat"] for c in mine], [c["nll"] for c in mine], marker=marker, c=colour,
                           s=18, alpha=0.8, label=label)  # fmt: skip
        ax.axvline(1.1, color="grey", lw=0.8, ls="--")
        ax.set_title(ds, fontsize=9)
        ax.set_xlabel("function-space R-hat", fontsize=8)
        ax.set_ylabel("test NLL (original units)", fontsize=8)
    for ax in list(axes.flat)[len(sets) :]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower right", fontsize=7)
    fig.suptitle(
        "every split: lower is better on both axes; R-hat <= 1.1 left of the dashed line", fontsize=9
    )
    fig.tight_layout()
    fig.savefig(png, dpi=120)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("cells", nargs="+", type=Path, help="JSONL files of the bench's cells")
    p.add_argument("--out", type=Path, default=Path("uci_rhat_nll.png"))
    a = p.parse_args()
    series = latest_cells(a.cells)
    plot(series, a.out)
    print(f"{sum(len(v) for v in series.values())} cells -> {a.out}")


if __name__ == "__main__":
    main()
