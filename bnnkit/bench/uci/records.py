"""The UCI benchmark's records: one JSON line per finished cell in ``uci_cells.jsonl``, and which
of them a run may reuse.  A cell carries what its numbers depend on beyond data set, split, method
and seed (``quick``, the protocol, the kind of split: :func:`same_run`) and a checksum of its
split's data (``data_sha256``): ``--resume`` and ``--from-cells`` never mix cells of two protocols,
kinds of split or versions of the data in one table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...core.errors import BnnkitError
from ...core.files import read_records
from ...data.uci import uci_dataset_name
from .protocol import CARRIED, PROTOCOL, drift_cannot_apply, uses_gp_noise

CELLS_FILE = "uci_cells.jsonl"
# the files by which a folder is known as a UCI bench output (bnnkit.core.files.output_folder)
OUTPUT_MARKS = (CELLS_FILE, "uci_cells.previous.jsonl", "uci.json")
DATA_KEY = "data_sha256"  # a cell's checksum of its split's data


def same_run(cell: dict[str, Any], seed: int, quick: bool, split_kind: str = "random") -> bool:
    """Whether ``cell`` is what a run with these arguments writes for it (an older protocol's cell
    of a method that protocol ran as this one does, :data:`CARRIED`, counts)."""
    version = cell.get("protocol")
    carried = not quick and (cell.get("method") in CARRIED.get(version, frozenset()) or drift_cannot_apply(cell))
    current = version == PROTOCOL or carried
    return (
        current
        and cell.get("quick") == quick
        and cell.get("split_kind", "random") == split_kind
        and cell.get("seed") == seed + cell.get("split", -1)
    )


def read_cells(
    path: Path,
    datasets: Sequence[str],
    methods: Sequence[str],
    log: Callable[[str], None],
    seed: int,
    quick: bool,
    split_kind: str = "random",
) -> list[dict[str, Any]]:
    """The cells of ``path`` that a run with these arguments writes, the latest line of each."""
    if not path.is_file():
        raise BnnkitError(
            f"{path} does not exist; pass the uci_cells.jsonl that a `bnnkit bench uci` run wrote."
        )
    names = {uci_dataset_name(d) for d in datasets}
    latest: dict[tuple, dict[str, Any]] = {}  # a later line for the same cell (a rerun) supersedes
    asked = [c for c in read_records(path, log) if c.get("dataset") in names and c.get("method") in methods]
    # Cells of another seed, mode, protocol or kind of split are not this command's numbers.
    lines = [c for c in asked if same_run(c, seed, quick, split_kind)]
    if len(lines) < len(asked):
        log(
            f"{path}: left out {len(asked) - len(lines)} cell(s) of another seed, --quick setting, protocol "
            "or --split-kind (another command's table: an earlier protocol's is rebuilt at the commit that wrote it)"
        )
    for c in lines:
        latest[(c["dataset"], c["split"], c["method"])] = c
    if len(latest) < len(lines):
        log(f"{path}: {len(lines) - len(latest)} cell(s) superseded by a later line for the same cell")
    cells = list(latest.values())
    seen: dict[tuple, tuple[str, str]] = {}  # (data set, split) -> (checksum, method of the first cell)
    for c in cells:
        digest = c.get(DATA_KEY)
        if digest is None:
            continue
        key = (c["dataset"], c["split"])
        first = seen.setdefault(key, (digest, c["method"]))
        if first[0] != digest:
            raise BnnkitError(
                f"{path} holds cells of {key[0]} split {key[1]} computed on different data ({first[1]}: data "
                f"checksum {first[0][:12]}..., {c['method']}: {digest[:12]}...): their numbers do not belong "
                "in one table; rebuild from the cells of one data set."
            )
    if not cells:
        raise BnnkitError(
            f"{path} holds no cell of datasets {sorted(names)} and methods {list(methods)}"
            + (f" with --split-kind {split_kind}" if split_kind != "random" else "")
            + "; check the arguments."
        )
    return cells


def seconds_total(cell: dict[str, Any]) -> float:
    """What the cell's method costs a user of :func:`bnnkit.fit`: its ``seconds`` plus, for a method
    that takes the GP's noise, the split's GP fit (computed for a cell written before it was kept)."""
    if cell.get("seconds_total") is not None:
        return cell["seconds_total"]
    gp = cell.get("gp_fit_seconds") if uses_gp_noise(cell["method"]) else None
    return cell["seconds"] + (gp or 0.0)
