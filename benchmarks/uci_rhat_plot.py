"""Test NLL against function-space R-hat, every split of every set: the samplers' cells side by side.

Reads the bench's cells (``docs/results/uci/*.jsonl`` or a run's ``uci_cells.jsonl``), keeps for
each (set, split, method) the latest cell of the protocol that defines that method's current recipe
(``bnnkit.bench.uci.protocol.CHANGED_IN``), and draws one panel per data set: each cell's R-hat
(maximum over the first 100 test inputs) against its test NLL in original units, with the 1.1
line.  Used for docs/uci_results.md, "Protocol 7"::

    python -m benchmarks.uci_rhat_plot docs/results/uci/*.jsonl --out docs/img/uci_rhat_nll.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bnnkit.bench.uci.protocol import CHANGED_IN, PROTOCOL

METHODS = {  # method: (label, marker, colour)
    "csgld": ("csgld (cyclical pSGLD, protocol 7)", "o", "C0"),
    "sgld": ("sgld (pSGLD, protocol 5)", "s", "C1"),
    "sghmc": ("sghmc (adaptive SGHMC, protocol 4)", "^", "C2"),
    "fsgld": ("fsgld (protocol 5)", "v", "C4"),
    "fsghmc": ("fsghmc (protocol 4)", "<", "C5"),
    "nuts": ("nuts (4 chains, protocol 6)", "D", "C3"),
}
SETS = ("bostonHousing", "yacht", "concrete", "energy", "wine-quality-red", "kin8nm", "protein-tertiary-structure")


def current_version(method: str) -> int:
    """The protocol whose recipe for ``method`` is the current one."""
    return max((v for v, changed in CHANGED_IN.items() if method in changed and v <= PROTOCOL), default=3)


def latest_cells(paths: list[Path]) -> list[dict]:
    """The latest cell of each (set, split, method) at its method's current recipe, with an R-hat."""
    latest: dict[tuple, dict] = {}
    for path in paths:
        for line in path.open():
            c = json.loads(line)
            m = c.get("method")
            if m in METHODS and c.get("rhat") is not None and c.get("protocol") == current_version(m):
                latest[(c["dataset"], c["split"], m)] = c
    return list(latest.values())


def plot(cells: list[dict], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = [s for s in SETS if any(c["dataset"] == s for c in cells)]
    cols = min(4, len(sets))
    rows = -(-len(sets) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.0 * cols, 3.4 * rows), squeeze=False)
    for ax, ds in zip(axes.flat, sets):
        for m, (label, marker, colour) in METHODS.items():
            mine = [c for c in cells if c["dataset"] == ds and c["method"] == m]
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
    fig.suptitle("every split: lower is better on both axes; R-hat <= 1.1 left of the dashed line", fontsize=9)
    fig.tight_layout()
    fig.savefig(png, dpi=120)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("cells", nargs="+", type=Path, help="JSONL files of the bench's cells")
    p.add_argument("--out", type=Path, default=Path("uci_rhat_nll.png"))
    a = p.parse_args()
    cells = latest_cells(a.cells)
    plot(cells, a.out)
    print(f"{len(cells)} cells -> {a.out}")


if __name__ == "__main__":
    main()
