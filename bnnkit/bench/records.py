"""JSON-lines record files of the benchmarks: one line per finished unit of work (a UCI cell, a
bandit run), appended as it finishes so that a stopped run loses only the unit in progress."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.errors import BnnkitError


def append_record(path: Path, record: dict[str, Any]) -> None:
    """Append ``record`` as one JSON line and flush it to disk."""
    with path.open("a") as f:
        f.write(json.dumps(record, default=float) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_records(path: Path, log: Callable[[str], None]) -> list[dict[str, Any]]:
    """The records of a JSON-lines file.  A last line that is not JSON (cut short when a run was
    killed while writing it) is dropped with a message; a bad line elsewhere is an error."""
    records = []
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as err:
            if i == len(lines) - 1:  # the record being written when the run was killed: it runs again
                log(f"{path}: dropped its last line, cut short when the run stopped")
                continue
            raise BnnkitError(
                f"{path}, line {i + 1}, is not JSON ({err}); delete that line and retry."
            ) from err
    return records


def start_records(path: Path, log: Callable[[str], None]) -> None:
    """Begin an empty record file at ``path``; a non-empty one already there (a run without
    ``--resume`` in the folder of an earlier run) is kept as ``<name>.previous.jsonl``."""
    if path.is_file() and path.stat().st_size > 0:
        kept = path.with_name(path.name.removesuffix(".jsonl") + ".previous.jsonl")
        path.replace(kept)
        log(f"{path} held records of an earlier run: kept as {kept} (pass --resume to reuse them)")
    path.write_text("")
