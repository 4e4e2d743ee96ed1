"""Files of long runs: JSON-lines records (one line per finished unit of work, e.g. a benchmark's
cell, appended and flushed as it finishes so that a stop loses only the unit in progress), a
checked output folder, a report's JSON / CSV / markdown and its figures."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import BnnkitError


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


def reopen_records(
    path: Path, resume: bool, log: Callable[[str], None], check: Callable[[list], Any] | None = None
) -> list[dict[str, Any]]:
    """The records a resumed run keeps: those of ``path`` (``check`` may refuse them; then the file
    is rewritten without a last line cut short).  Without ``resume``, or with no file, none, and
    ``path`` starts afresh (:func:`start_records`)."""
    if not (resume and path.is_file()):
        start_records(path, log)
        return []
    kept = read_records(path, log)
    if check is not None:
        check(kept)
    path.write_text("".join(json.dumps(r) + "\n" for r in kept))
    return kept


def write_report_files(out: Path, stem: str, report: dict, rows: list[dict], markdown: str) -> None:
    """``<stem>.json`` (the report), ``<stem>.csv`` (one line per row, a column per key of any row)
    and ``<stem>.md`` in ``out``."""
    (out / f"{stem}.json").write_text(json.dumps(report, indent=2, default=float))
    with (out / f"{stem}.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in rows for k in r)), restval="")
        w.writeheader()
        w.writerows(rows)
    (out / f"{stem}.md").write_text(markdown)


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path, dpi: int, **layout: Any) -> None:
    """Lay ``fig`` out tightly, write it to ``path`` and close it."""
    fig.tight_layout(**layout)
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)


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
    """The output folder ``out``, checked and created before any work starts.  Refused: an existing
    file, a path under a file, a folder that cannot be created or written into, and (with ``marks``,
    the files by which the ``bench`` knows its own output) a non-empty folder holding none of them."""
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
    why = unwritable(path)
    if why is not None:
        raise BnnkitError(f"cannot write into the output folder {path}: {why}.")
    return path


def create_folder(folder: Path) -> str | None:
    """Create ``folder`` and its missing parents; why that failed, or None."""
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
    """Why no file can be made in the existing ``folder``, or None: a probe file is written and
    removed (``os.access`` alone passes for root on a read-only mode)."""
    if not os.access(folder, os.W_OK | os.X_OK):
        return "permission denied"
    probe = folder / f".bnnkit-write-probe-{os.getpid()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        return f"{err.strerror or err}"
    return None
