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


# files a file manager or a VCS leaves in any folder: they do not make a folder someone else's
_HOUSEKEEPING = frozenset({".DS_Store", ".gitkeep", ".gitignore", "Thumbs.db", "desktop.ini"})


def output_folder(out: str | os.PathLike[str], marks: tuple[str, ...] = (), bench: str = "") -> Path:
    """The output folder ``out`` of a benchmark, checked and created before any work starts.

    Refused with a :class:`BnnkitError` that names the path: an existing file, a path under a
    file, a folder that cannot be created or written into, and (when ``marks`` are given) a folder
    that is not empty but holds none of ``marks`` (the files by which the ``bench`` knows its own
    output: its record file or report), whose files a run would overwrite or mix with its own.
    """
    path = Path(out).expanduser()
    if path.exists() and not path.is_dir():
        raise BnnkitError(
            f"the output folder {path} (out / --out) is an existing file, not a folder: pass the path of a "
            "folder (it is created if missing)."
        )
    if marks and path.is_dir():
        entries = sorted(p.name for p in path.iterdir() if p.name not in _HOUSEKEEPING)
        if entries and not any((path / m).exists() for m in marks):
            shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
            raise BnnkitError(
                f"the output folder {path} (out / --out) is not empty ({shown}) and is not the output of a "
                f"{bench} run (it holds no {marks[0]}): its files would be overwritten or mixed with this run's; "
                "pass a new or empty folder."
            )
    why = create_folder(path)
    if why is not None:
        raise BnnkitError(f"cannot create the output folder {path} (out / --out): {why}.")
    check_writable(path, "the output folder")
    return path


def check_writable(folder: Path, what: str) -> None:
    """Refuse ``folder`` (``what`` names it in the message) unless a file can be made in it
    (:func:`unwritable`)."""
    why = unwritable(folder)
    if why is not None:
        raise BnnkitError(f"cannot write into {what} {folder}: {why}.")


def create_folder(folder: Path) -> str | None:
    """Create ``folder`` and its missing parents; why that failed (the nearest of them that
    exists is a file, or the system's reason), or None."""
    for path in (folder, *folder.parents):
        if path.exists():
            if not path.is_dir():
                return f"{path} is a file, not a folder"
            break
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        return f"{err.strerror or err}"
    return None


def unwritable(folder: Path) -> str | None:
    """Why no file can be made in the existing ``folder`` (``"permission denied"``, or the
    system's reason), or None: a probe file is written and removed (``os.access`` alone passes
    for root on a read-only mode)."""
    if not os.access(folder, os.W_OK | os.X_OK):
        return "permission denied"
    probe = folder / f".bnnkit-write-probe-{os.getpid()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        return f"{err.strerror or err}"
    return None
