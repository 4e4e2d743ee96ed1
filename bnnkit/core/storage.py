"""Streaming draws to disk in chunks, with verified checkpoints for exact resume.

Layout of an output directory (format 2)::

    config.json                        the run's configuration and its fingerprint (a resumed run
                                       must match both)
    chain_000/draws_000000.pt          positions [n, D] and per-draw stats, one file per chunk
    chain_000/checkpoint_000000120.pt  sampler, adaptation, generator and stream state at an iteration
    chain_000/index.json               SHA-256 of every chunk and checkpoint; the source of truth
    chain_000/lock                     held while a process writes the chain (pid, host, start time)
    chain_000/done                     written when the chain has all its draws
    chain_000/diverged.json            the chain stopped on a non-finite state (on_divergence="warn")

Every write is atomic and every read verified; :class:`RunStore` lists the safety and recovery rules.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import socket
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from .errors import BnnkitError
from .flat import FlatView
from .samples import Samples

FORMAT = 2
INDEX = "index.json"
LEGACY_CHECKPOINT = "checkpoint.pt"


class RunDirectoryError(BnnkitError):
    """A run directory is damaged, locked by another writer, or in a format bnnkit will not open."""


class RunWriteError(RunDirectoryError):
    """A file of a run directory could not be written (a full disk, no permission).

    Attributes:
        path: the file that could not be written.
    """

    def __init__(self, message: str, path: Path | None = None):
        super().__init__(message)
        self.path = path


def _write_error(path: Path, err: BaseException, root: Path | None) -> RunWriteError:
    why = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else err!r}"
    if root is None:
        return RunWriteError(f"could not write {path} ({why}).", path)
    return RunWriteError(
        f"could not write {path} ({why}); the run stops here. The draws and checkpoints written before "
        f"it are safe in {root}: free disk space (or make the folder writable) and rerun the same call; "
        "it resumes from the last checkpoint and gives the same draws as an uninterrupted run.",
        path,
    )


# ----------------------------------------------------------------------------- file primitives
def _tmp_name(path: Path) -> Path:
    # Unique per process: ranks of a chain-parallel job write into the same directory at once.
    return path.with_suffix(f"{path.suffix}.{os.getpid()}.tmp")


def _replace(tmp: Path, path: Path) -> None:
    os.replace(tmp, path)


def _atomic_save(obj: Any, path: Path, root: Path | None = None) -> str:
    """Write ``obj`` with ``torch.save`` under a temporary name, rename it; return its SHA-256.

    A failed write (``OSError``, or the ``RuntimeError`` torch's zip writer raises on a full disk)
    removes the temporary file and raises :class:`RunWriteError` naming ``path``.
    """
    tmp = _tmp_name(path)
    try:
        torch.save(obj, tmp)
        digest = _sha256(tmp)
        _replace(tmp, path)
    except OSError as err:
        _discard(tmp)
        raise _write_error(path, err, root) from err
    except RuntimeError as err:
        _discard(tmp)
        if any(s in str(err) for s in _ZIP_WRITE_FAILURES):
            raise _write_error(path, err, root) from err
        raise
    except BaseException:
        _discard(tmp)  # e.g. Ctrl-C: the temporary file is of no use to a resume
        raise
    return digest


# How torch's zip writer reports a write that failed (a full disk): a RuntimeError, not an OSError.
_ZIP_WRITE_FAILURES = ("inline_container", "PytorchStreamWriter", "file write failed", "No space left")


def _atomic_write_text(text: str, path: Path, root: Path | None = None) -> None:
    tmp = _tmp_name(path)
    try:
        tmp.write_text(text)
        _replace(tmp, path)
    except OSError as err:
        _discard(tmp)
        raise _write_error(path, err, root) from err
    except BaseException:
        _discard(tmp)
        raise


def _discard(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


def _tmp_pid(path: Path) -> int | None:
    """The writer's pid in a temporary name ``<file>.<pid>.tmp`` (None if it has none)."""
    parts = path.name.split(".")
    if len(parts) >= 3 and parts[-1] == "tmp" and parts[-2].isdigit():
        return int(parts[-2])
    return None


def _remove_stale_tmp(folder: Path, any_pid: bool) -> int:
    """Remove the temporary files a killed writer left in ``folder``; return how many.

    ``any_pid``: the caller holds the lock of the folder, so no other process writes there and
    every temporary file is stale; otherwise only those of processes that are gone (or of this
    process, which is not writing there now) are removed.
    """
    n = 0
    for f in folder.glob("*.tmp"):
        pid = _tmp_pid(f)
        if pid is None:
            continue
        if any_pid or pid == os.getpid() or not _alive(pid, None):
            _discard(f)
            n += 1
    return n


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _safe_load(path: Path, mmap: bool = False) -> Any:
    """``torch.load`` that can execute no code, with a bnnkit error for an unreadable file."""
    try:
        return torch.load(path, weights_only=True, mmap=mmap)
    except Exception as e:  # a truncated zip, a foreign pickle, a file that is not a tensor file
        raise RunDirectoryError(f"{path} cannot be read: {type(e).__name__}: {str(e).splitlines()[0]}") from e


def _type_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _resolve_type(name: str) -> type:
    """The NamedTuple class ``module:qualname``, from an already-imported module only.

    Nothing is imported: a checkpoint can only name classes the reading process already has (the
    algorithm being resumed imported its own state class when it was built).
    """
    module_name, _, qualname = name.partition(":")
    module = sys.modules.get(module_name)
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    if not (isinstance(obj, type) and issubclass(obj, tuple) and hasattr(obj, "_fields")):
        raise RunDirectoryError(
            f"the checkpoint names the state class {name!r}, which is not a NamedTuple of a loaded module; "
            "resume with the same algorithm that wrote the run."
        )
    return obj


# ----------------------------------------------------------------------------- lock
def _process_start(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (guards against a reused pid), where /proc has it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _alive(pid: int, start: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    now = _process_start(pid)
    return start is None or now is None or now == start


class ChainLock:
    """An exclusive lock on one chain directory of a run, held by this process."""

    def __init__(self, chain_dir: Path):
        self.path = chain_dir / "lock"
        self.held = False

    def acquire(self) -> None:
        me = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "start": _process_start(os.getpid()),
            "since": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = self._holder()
                if holder is None:
                    continue  # removed (or half-written) in between: try again
                if holder.get("pid") == me["pid"] and holder.get("host") == me["host"]:
                    raise RunDirectoryError(
                        f"{self.path.parent} is already being written by this process (pid {me['pid']}); "
                        "two sample() calls of one process cannot share an output directory."
                    ) from None
                if holder.get("host") == me["host"] and not _alive(int(holder["pid"]), holder.get("start")):
                    warnings.warn(
                        f"{self.path} was left by process {holder['pid']}, which is gone (killed?); taking "
                        "the chain over.",
                        stacklevel=4,
                    )
                    self.path.unlink(missing_ok=True)
                    continue
                raise RunDirectoryError(
                    f"{self.path.parent} is being written by process {holder.get('pid')} on "
                    f"{holder.get('host')} (since {holder.get('since')}). Wait for it to finish, or pass "
                    f"another output path. If that process no longer exists, delete {self.path}."
                ) from None
            except OSError as err:  # a read-only folder, no permission, a full disk
                raise RunWriteError(
                    f"cannot write to {self.path.parent} ({type(err).__name__}: {err.strerror or err}); "
                    "pass an output path in a folder you can write to.",
                    self.path,
                ) from err
            with os.fdopen(fd, "w") as f:
                json.dump(me, f)
            self.held = True
            return
        raise RunDirectoryError(f"could not take the lock {self.path}; another process keeps replacing it.")

    def _holder(self) -> dict | None:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            # A lock file is written in one small write right after it is created: an empty one
            # older than a few seconds was left by a process killed in between.
            try:
                if time.time() - self.path.stat().st_mtime > 5:
                    self.path.unlink(missing_ok=True)
            except OSError:
                pass
            return None

    def release(self) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False


# ----------------------------------------------------------------------------- fingerprints
def _close(a: float | None, b: float | None, rtol: float, atol: float) -> bool:
    if a is None or b is None:
        return True  # not evaluated (the log density failed there): nothing to compare
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= atol + rtol * max(abs(a), abs(b))


def _chain_list(chains: list[int]) -> str:
    shown = ", ".join(str(c) for c in chains[:6]) + (", ..." if len(chains) > 6 else "")
    return f"chain {shown}" if len(chains) == 1 else f"chains {shown}"


def fingerprint_differences(old: dict | None, new: dict | None) -> list[str]:
    """What differs between a stored run's fingerprint and this call's, in words (empty: nothing).

    A fingerprint (made by :func:`bnnkit.core.driver.sample`) holds ``data`` (a SHA-256 of the
    data, or of a minibatch stream's rows and batching), ``init`` (a SHA-256 of each chain's
    initial position) and ``function`` (per chain: the log density, the gradient's norm and its
    cosine with a fixed direction, at the initial position on a fixed batch), compared with a
    tolerance that absorbs float rounding (e.g. another number of threads).  Where the data or a
    chain's initial values differ, the log density there is not compared: it differs anyway.
    """
    if not old or not new:
        return []
    problems: list[str] = []
    if old.get("data") != new.get("data"):
        problems.append(
            "the data differ from the stored run's (other values, shapes or dtypes, or a minibatch stream over "
            "other rows or with another batch size)"
        )
    old_init, new_init = old.get("init") or [], new.get("init") or []
    moved = [c for c, (a, b) in enumerate(zip(old_init, new_init)) if a != b]
    if moved:
        problems.append(
            f"the initial values of {_chain_list(moved)} differ from the stored run's (another init=, "
            "another module's weights with init='module', or another prior)"
        )
    if problems and old.get("data") != new.get("data"):
        return problems
    low = str(new.get("dtype", "")) not in ("torch.float64", "float64")
    rtol, atol = (1e-4, 1e-4) if low else (1e-8, 1e-8)
    old_f, new_f = old.get("function") or [], new.get("function") or []
    changed = []
    for c, (a, b) in enumerate(zip(old_f, new_f)):
        if c in moved or a is None or b is None:
            continue
        if not all(_close(x, y, rtol, atol) for x, y in zip(a, b)):
            changed.append(c)
    if changed:
        c = changed[0]
        problems.append(
            f"the log density differs from the stored run's at the initial values of {_chain_list(changed)} "
            f"(chain {c}: {old_f[c][0]:.6g} stored, {new_f[c][0]:.6g} now, gradient norm {old_f[c][1]:.6g} "
            f"stored, {new_f[c][1]:.6g} now): another model (e.g. another activation with the same parameter "
            "shapes), likelihood, prior or log-density function"
        )
    return problems


# ----------------------------------------------------------------------------- the store
class RunStore:
    """The run directory of one ``sample(..., output=...)`` call: created, or checked and resumed.

    ``fingerprint`` (stored in ``config.json`` beside the configuration) identifies the data, the
    chains' initial values and the log density at them (:func:`fingerprint_differences`); a
    directory whose configuration or fingerprint differs is refused with what differs.

    Safety and recovery:

    - Every file is written to a temporary name and renamed, and the index is rewritten (atomically)
      only after the files it lists are in place, so a kill at any point leaves a consistent index.
    - Chunks and checkpoints hold only tensors, numbers and strings, and are read with
      ``torch.load(weights_only=True)``: opening a run directory received from someone else never
      executes code from it.  State classes are looked up by name among the modules the reader has
      already imported; nothing is imported or unpickled from the file.
    - Every read is checked against the index's SHA-256.  A damaged chunk gives an error naming the
      file and how to go on; resume restarts from the newest intact checkpoint at or before the first
      damaged chunk and regenerates the draws after it (bit-identical, since the checkpoint holds the
      generator state).  A checkpoint is kept at every chunk boundary, so only the damaged part and
      what follows it is recomputed.
    - A chain being written is locked: a second writer is refused with the holder's pid and host; a
      lock whose process is gone (killed) is taken over with a warning, and the temporary files a
      killed writer left are removed when the lock is taken.
    - ``config.json`` holds a fingerprint of the data and of the log density at each chain's initial
      point (see :func:`bnnkit.core.driver.sample`): a resume with other data, another model or log
      density, or other initial values is refused, saying what differs.
    - A chain directory without its index has nothing to check its chunks against: reading it is
      refused unless the caller asks for an unchecked read (``load_samples(..., unchecked=True)``),
      and a resume regenerates it.
    - A write that fails (a full disk, a folder made read-only) ends the run with a
      :class:`RunWriteError` naming the file; once the cause is fixed, the same call resumes from the
      last checkpoint and gives the same draws.
    """

    def __init__(self, root: str | os.PathLike, config: dict, fingerprint: dict | None = None):
        self.root = Path(root)
        self.config = json.loads(json.dumps(config, default=str))
        self.fingerprint = None if fingerprint is None else json.loads(json.dumps(fingerprint))
        self.locks: dict[int, ChainLock] = {}
        self.unchecked = False
        if self.root.exists() and not self.root.is_dir():
            raise BnnkitError(
                f"output path {str(self.root)!r} is an existing file, not a directory; pass a directory path "
                "for the run (it is created if missing)."
            )
        cfg_path = self.root / "config.json"
        if cfg_path.exists():
            old = _read_json(cfg_path)
            old_fp = old.pop("fingerprint", None)
            diff = sorted(k for k in set(old) | set(self.config) if old.get(k) != self.config.get(k))
            problems = fingerprint_differences(old_fp, self.fingerprint)
            if diff or problems:
                what = []
                if diff:
                    what.append(f"another configuration (differs in: {', '.join(diff)})")
                what += problems
                raise BnnkitError(
                    f"output path {str(self.root)!r} already holds a run of another configuration or posterior: "
                    f"{'; '.join(what)}. Resuming would mix draws of two different runs. To start afresh, pass a "
                    "new output path, or delete that directory (its draws are lost); to resume it, call "
                    "bnnkit.sample with the same data, model, log density, init and settings as the stored run."
                )
            if old_fp is None and self.fingerprint is not None:
                warnings.warn(
                    f"{cfg_path} was written by a bnnkit without run fingerprints: resuming it cannot check that "
                    "the data, the model and the initial values are the run's own. Pass a new output path to be "
                    "sure.",
                    stacklevel=3,
                )
            _remove_stale_tmp(self.root, any_pid=False)
        elif self.root.exists() and any(
            not p.name.startswith(("config.json", "chain_")) for p in self.root.iterdir()
        ):
            raise BnnkitError(
                f"output path {str(self.root)!r} exists and is not a bnnkit run directory; choose an empty "
                "or new directory."
            )
        else:
            record = dict(self.config)
            if self.fingerprint is not None:
                record["fingerprint"] = self.fingerprint
            try:
                self.root.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise RunWriteError(
                    f"cannot create the output directory {str(self.root)!r} ({type(err).__name__}: "
                    f"{err.strerror or err}); pass an output path in a folder you can write to.",
                    self.root,
                ) from err
            _remove_stale_tmp(self.root, any_pid=False)
            try:
                _atomic_write_text(json.dumps(record, indent=2, sort_keys=True), cfg_path)
            except RunWriteError as err:
                raise RunWriteError(
                    f"cannot write {cfg_path} ({err.__cause__}); pass an output path in a folder you can "
                    "write to.",
                    cfg_path,
                ) from err.__cause__

    @classmethod
    def open(cls, root: str | os.PathLike, unchecked: bool = False) -> RunStore:
        """An existing run directory, for reading (no configuration check).

        ``unchecked``: read chunk files of a chain that has no index (nothing to check them
        against) instead of refusing them.
        """
        root = Path(root)
        cfg_path = root / "config.json"
        if not cfg_path.exists():
            raise BnnkitError(
                f"{str(root)!r} is not a bnnkit run directory (no config.json); pass the output= path of "
                "a bnnkit.sample run."
            )
        store = cls.__new__(cls)
        store.root = root
        store.config = _read_json(cfg_path)
        store.fingerprint = store.config.get("fingerprint")
        store.locks = {}
        store.unchecked = bool(unchecked)
        return store

    # ------------------------------------------------------------------ chains and locks
    def done_chains(self) -> list[int]:
        """Indices of the chains that have all their draws."""
        return sorted(
            int(d.name[len("chain_") :]) for d in self.root.glob("chain_*") if (d / "done").exists()
        )

    def diverged_chains(self) -> dict[int, dict]:
        """Chains stopped on a non-finite state, with what was recorded about it."""
        return {
            int(d.parent.name[len("chain_") :]): _read_json(d)
            for d in self.root.glob("chain_*/diverged.json")
        }

    def chain_dir(self, chain: int) -> Path:
        d = self.root / f"chain_{chain:03d}"
        try:
            d.mkdir(exist_ok=True)
        except OSError as err:
            raise RunWriteError(
                f"cannot create {d} ({type(err).__name__}: {err.strerror or err}); pass an output path in a "
                "folder you can write to.",
                d,
            ) from err
        return d

    def lock(self, chains: list[int]) -> None:
        """Take the write lock of each chain (all or none), then remove the temporary files that a
        killed writer left in the chains' directories (nobody else writes there now)."""
        taken = []
        try:
            for c in chains:
                lock = ChainLock(self.chain_dir(c))
                lock.acquire()
                taken.append(lock)
                self.locks[c] = lock
            for c in chains:
                _remove_stale_tmp(self.chain_dir(c), any_pid=True)
        except BaseException:
            for lock in taken:
                lock.release()
            raise

    def unlock(self) -> None:
        for lock in self.locks.values():
            lock.release()
        self.locks = {}

    def is_done(self, chain: int) -> bool:
        return (self.chain_dir(chain) / "done").exists()

    def verify(self, chain: int) -> list[str]:
        """What is damaged or missing among the chain's indexed chunks (empty: all intact)."""
        damage: list[str] = []
        self._intact_prefix(chain, damage)
        return damage

    def reopen(self, chain: int) -> None:
        """Mark a finished chain unfinished (a damaged chunk is to be regenerated)."""
        (self.chain_dir(chain) / "done").unlink(missing_ok=True)

    def mark_done(self, chain: int) -> None:
        _atomic_write_text("ok\n", self.chain_dir(chain) / "done", self.root)

    def mark_diverged(self, chain: int, record: dict) -> None:
        _atomic_write_text(json.dumps(record, indent=2), self.chain_dir(chain) / "diverged.json", self.root)

    def write_stop(self, chain: int, report: dict) -> None:
        """Why a run with a stopping rule ended (``stop.json`` of the unit's home chain)."""
        _atomic_write_text(json.dumps(report, indent=1), self.chain_dir(chain) / "stop.json", self.root)

    def is_diverged(self, chain: int) -> bool:
        return (self.chain_dir(chain) / "diverged.json").exists()

    # ------------------------------------------------------------------ index
    def _index_path(self, chain: int) -> Path:
        return self.chain_dir(chain) / INDEX

    def read_index(self, chain: int) -> dict:
        p = self._index_path(chain)
        if not p.exists():
            return {"format": FORMAT, "chunks": [], "checkpoints": []}
        index = _read_json(p)
        if index.get("format") != FORMAT:
            raise RunDirectoryError(
                f"{p} has format {index.get('format')!r}; this bnnkit reads format {FORMAT}. Rerun into a new "
                "output directory."
            )
        return index

    def _write_index(self, chain: int, index: dict) -> None:
        _atomic_write_text(json.dumps(index, indent=1), self._index_path(chain), self.root)

    def _unindexed(self, chain: int) -> list[Path]:
        """Chunk files of a chain that has no index: nothing says they are this run's own."""
        d = self.chain_dir(chain)
        if (d / INDEX).exists():
            return []
        return sorted(d.glob("draws_*.pt"))

    # ------------------------------------------------------------------ writing
    def write_chunk(self, chain: int, index: int, positions: Tensor, stats: dict[str, Tensor]) -> None:
        name = f"draws_{index:06d}.pt"
        digest = _atomic_save(
            {"positions": positions, "stats": stats}, self.chain_dir(chain) / name, self.root
        )
        idx = self.read_index(chain)
        idx["chunks"] = [c for c in idx["chunks"] if c["file"] < name]
        idx["chunks"].append({"file": name, "sha256": digest, "draws": int(positions.shape[0])})
        self._write_index(chain, idx)

    def save_checkpoint(self, chain: int, payload: dict) -> None:
        """Save the resumable state of ``chain`` (or of a vectorised group whose home it is).

        ``payload`` holds tensors, numbers and NamedTuple states; the states are stored as their
        fields plus the class name, so the file holds nothing that unpickling could run.
        """
        data = dict(payload)
        for key in ("state", "adapt"):
            value = data.pop(key)
            data[key] = None if value is None else dict(value._asdict())
            data[f"{key}_type"] = None if value is None else _type_name(type(value))
        data["format"] = FORMAT
        name = f"checkpoint_{int(data['iteration']):09d}.pt"
        d = self.chain_dir(chain)
        digest = _atomic_save(data, d / name, self.root)
        idx = self.read_index(chain)
        entry = {"file": name, "sha256": digest, "iteration": int(data["iteration"])}
        entry["num_chunks"] = int(data["num_chunks"])
        kept = [c for c in idx["checkpoints"] if c["iteration"] < entry["iteration"]]
        # Keep one checkpoint per chunk boundary (a damaged chunk costs only itself and what follows)
        # and, within warm-up or a chunk, only the newest.
        kept = [c for c in kept if c["num_chunks"] != entry["num_chunks"]]
        idx["checkpoints"] = [*kept, entry]
        self._write_index(chain, idx)
        names = {c["file"] for c in idx["checkpoints"]}
        for f in d.glob("checkpoint_*.pt"):
            if f.name not in names:
                f.unlink(missing_ok=True)

    # ------------------------------------------------------------------ resume
    def load_checkpoint(self, chain: int, group: list[int] | None = None) -> dict | None:
        """The newest intact checkpoint of ``chain`` whose draws are all intact, ready to resume.

        ``group`` lists the chains whose chunks the checkpoint counts (a vectorised group; default
        the chain alone).  Chunk files past the checkpoint are removed (they are regenerated), and
        a warning says what a damaged file cost.  ``None`` when the chain must start afresh.
        """
        group = group or [chain]
        d = self.chain_dir(chain)
        if (d / LEGACY_CHECKPOINT).exists():
            raise RunDirectoryError(
                f"{d / LEGACY_CHECKPOINT} was written by bnnkit before format 2; such a checkpoint is a pickle that "
                "can run code when opened, so bnnkit no longer opens it. If you wrote it yourself, convert "
                f"it with bnnkit.core.storage.convert_legacy_run({str(self.root)!r}, trust=True); otherwise "
                "delete the run directory and sample again."
            )
        damage: list[str] = []
        intact_chunks = min(self._intact_prefix(c, damage) for c in group)
        index = self.read_index(chain)
        chosen = None
        for entry in sorted(index["checkpoints"], key=lambda e: e["iteration"], reverse=True):
            if entry["num_chunks"] > intact_chunks:
                continue
            path = d / entry["file"]
            if not path.exists() or _sha256(path) != entry["sha256"]:
                damage.append(f"{path} is damaged or missing (checksum mismatch)")
                continue
            try:
                ckpt = _safe_load(path)
                ckpt["state_type"] = _resolve_type(ckpt["state_type"])
                if ckpt["adapt_type"] is not None:
                    ckpt["adapt_type"] = _resolve_type(ckpt["adapt_type"])
            except RunDirectoryError as e:
                damage.append(str(e))
                continue
            chosen = (entry, ckpt)
            break
        keep_chunks = chosen[0]["num_chunks"] if chosen is not None else 0
        lost = sum(self._truncate(c, keep_chunks) for c in group)
        if chosen is not None:
            index = self.read_index(chain)
            index["checkpoints"] = [
                e for e in index["checkpoints"] if e["iteration"] <= chosen[0]["iteration"]
            ]
            self._write_index(chain, index)
        if damage:
            where = (
                f"the checkpoint at iteration {chosen[0]['iteration']}" if chosen is not None else "the start"
            )
            warnings.warn(
                f"chain {chain}: {'; '.join(damage)}. Resuming from {where}: {lost} stored draws are discarded "
                "and regenerated (the same draws, from the checkpoint's generator state).",
                stacklevel=3,
            )
        return chosen[1] if chosen is not None else None

    def _intact_prefix(self, chain: int, damage: list[str]) -> int:
        """How many chunks of ``chain``, from the first, are present and match the index."""
        d = self.chain_dir(chain)
        foreign = self._unindexed(chain)
        if foreign or ((d / "done").exists() and not (d / INDEX).exists()):
            damage.append(
                f"{d / INDEX} is missing, so the {len(foreign)} chunk file(s) in {d} cannot be checked as this "
                "run's own"
            )
        chunks = self.read_index(chain)["chunks"]
        for i, entry in enumerate(chunks):
            path = d / entry["file"]
            if not path.exists():
                damage.append(f"{path} is missing")
                return i
            if _sha256(path) != entry["sha256"]:
                damage.append(f"{path} is damaged (checksum mismatch)")
                return i
        return len(chunks)

    def _truncate(self, chain: int, keep: int) -> int:
        """Drop chunks ``keep`` and later of ``chain``; return how many draws they held."""
        idx = self.read_index(chain)
        dropped = idx["chunks"][keep:]
        idx["chunks"] = idx["chunks"][:keep]
        self._write_index(chain, idx)
        listed = {c["file"] for c in idx["chunks"]}
        for f in self.chain_dir(chain).glob("draws_*.pt"):
            if f.name not in listed:
                f.unlink()
        return sum(int(c["draws"]) for c in dropped)

    def _refuse_unindexed(self, chain: int) -> None:
        files = self._unindexed(chain)
        if files and not self.unchecked:
            d = self.chain_dir(chain)
            raise RunDirectoryError(
                f"{d} holds {len(files)} chunk file(s) but no {INDEX}, so nothing says they are this run's draws "
                "(a copied-in or foreign file would be read as the chain's own). Resume the run with the same "
                "bnnkit.sample call and output= to regenerate the chain, or, if you know the files are this "
                "run's (e.g. written by bnnkit before format 2), read them with "
                "bnnkit.load_samples(path, unchecked=True)."
            )

    # ------------------------------------------------------------------ reading
    def chunk_files(self, chain: int) -> list[Path]:
        d = self.chain_dir(chain)
        if (d / INDEX).exists():
            return [d / c["file"] for c in self.read_index(chain)["chunks"]]
        self._refuse_unindexed(chain)
        return sorted(d.glob("draws_*.pt"))  # asked for unchecked: no checksums

    def _chunks(self, chain: int) -> Iterator[dict]:
        """The chain's chunks in order, each checked against the index (read once) as it loads."""
        d = self.chain_dir(chain)
        if not (d / INDEX).exists():  # only when asked for: no checksums to check
            self._refuse_unindexed(chain)
            for f in sorted(d.glob("draws_*.pt")):
                yield _safe_load(f, mmap=True)
            return
        entries = self.read_index(chain)["chunks"]
        for i, entry in enumerate(entries):
            path = d / entry["file"]
            if not (path.exists() and _sha256(path) == entry["sha256"]):
                n = sum(int(e["draws"]) for e in entries[i:])
                raise RunDirectoryError(
                    f"{path} is damaged or missing (its SHA-256 does not match {d / INDEX}): chain {chain} "
                    f"loses its {entry['draws']} draws and cannot be read past them ({n} draws from this "
                    "chunk on). To recover them, call bnnkit.sample again with the same arguments and "
                    "output=: it resumes from the last intact checkpoint and regenerates the same draws."
                )
            yield _safe_load(path, mmap=True)

    def read_chain(self, chain: int) -> tuple[Tensor, dict[str, Tensor]]:
        chunks = list(self._chunks(chain))
        positions = torch.cat([c["positions"] for c in chunks])
        stats = {k: torch.cat([c["stats"][k] for c in chunks]) for k in chunks[0]["stats"]}
        return positions, stats

    def read_stats(self, chain: int) -> dict[str, Tensor]:
        """Per-draw statistics of a chain (small), without its positions."""
        chunks = list(self._chunks(chain))
        if not chunks:
            raise BnnkitError(f"chain {chain} of {str(self.root)!r} has no draws yet; is the run finished?")
        return {k: torch.cat([c["stats"][k] for c in chunks]) for k in chunks[0]["stats"]}

    def iter_positions(self, chain: int) -> Iterator[Tensor]:
        """The chain's draws chunk by chunk (memory-mapped ``[n, D]`` tensors)."""
        for c in self._chunks(chain):
            yield c["positions"]


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise RunDirectoryError(
            f"{path} cannot be read ({type(e).__name__}: {e}); the run directory is damaged. Delete it and "
            "sample again, or restore the file from a copy."
        ) from e


def convert_legacy_run(root: str | os.PathLike, trust: bool = False) -> int:
    """Rewrite the checkpoints of a run directory written before format 2; return how many.

    Old checkpoints are pickles: loading one can run arbitrary code, so this is refused unless
    ``trust=True`` says the directory is yours.  Their chunk files are indexed with checksums.
    """
    if not trust:
        raise BnnkitError(
            "converting a pre-format-2 run opens its checkpoints with pickle, which can run code from the "
            "files; pass trust=True only for a run directory you wrote yourself."
        )
    store = RunStore.open(root)
    n = 0
    for d in sorted(Path(root).glob("chain_*")):
        chain = int(d.name[len("chain_") :])
        chunks = sorted(d.glob("draws_*.pt"))
        index = {"format": FORMAT, "checkpoints": [], "chunks": []}
        for f in chunks:
            draws = int(_safe_load(f)["positions"].shape[0])
            index["chunks"].append({"file": f.name, "sha256": _sha256(f), "draws": draws})
        store._write_index(chain, index)
        legacy = d / LEGACY_CHECKPOINT
        if legacy.exists():
            old = torch.load(legacy, weights_only=False)  # trusted by the caller, as documented
            payload = {k: v for k, v in old.items() if not k.endswith("_type")}
            payload["state"] = old["state_type"](**old["state"])
            payload["adapt"] = None if old["adapt"] is None else old["adapt_type"](**old["adapt"])
            store.save_checkpoint(chain, payload)
            legacy.unlink()
            n += 1
    return n


class StoredSamples(Samples):
    """Draws of a run directory (``sample(..., output=...)``), read lazily from disk.

    Statistics are loaded (they are small); positions stay in their memory-mapped chunk files.
    :meth:`iter_flat` streams them chunk by chunk, which is how the predictive and the metrics
    read them, so predicting from 10,000 draws of a large network needs the memory of one chunk.
    :attr:`positions` loads everything into memory on first access.  Every chunk is checked
    against the run's index as it is read.
    """

    def __init__(
        self,
        root: str | Path,
        chains: list[int],
        view: FlatView,
        config: dict[str, Any],
        unchecked: bool = False,
    ):
        self.root = Path(root)
        self.chains = list(chains)
        self.view = view
        self.config = config
        self._store = RunStore.open(self.root, unchecked=unchecked)
        per_chain = [self._store.read_stats(c) for c in self.chains]
        self.stats = {k: torch.stack([s[k] for s in per_chain]) for k in per_chain[0]}
        self._positions: Tensor | None = None

    @property  # type: ignore[override]
    def positions(self) -> Tensor:
        if self._positions is None:
            self._positions = torch.stack([self._store.read_chain(c)[0] for c in self.chains])
        return self._positions

    @property
    def num_chains(self) -> int:
        return len(self.chains)

    @property
    def num_draws(self) -> int:
        return int(next(iter(self.stats.values())).shape[1])

    def iter_flat(self, chunk: int = 256) -> Iterator[Tensor]:
        for c in self.chains:
            for part in self._store.iter_positions(c):
                for i in range(0, part.shape[0], chunk):
                    yield part[i : i + chunk]

    def __repr__(self) -> str:
        return (
            f"StoredSamples({str(self.root)!r}, chains={self.num_chains}, draws={self.num_draws}, "
            f"dim={self.dim}, stats={sorted(self.stats)})"
        )


def load_samples(
    root: str | os.PathLike, chains: list[int] | None = None, *, unchecked: bool = False
) -> StoredSamples:
    """Open the draws of a run directory lazily (see :class:`StoredSamples`).

    ``chains`` defaults to every finished chain, so the directory that the ranks of a
    chain-parallel job wrote together reads back as one run.  Every chunk is checked against
    its chain's index; a chain whose index is missing is refused unless ``unchecked=True`` (you
    know its chunk files are the run's own, e.g. a run written before format 2).
    """
    store = RunStore.open(root, unchecked=unchecked)
    expected = int(store.config.get("num_chains", 0))
    done = store.done_chains()
    if chains is None:
        if not done:
            raise BnnkitError(f"no chain of {str(root)!r} has finished; resume the run to complete it.")
        if len(done) < expected:
            warnings.warn(
                f"{len(done)} of {expected} chains of {str(root)!r} are finished; reading those.",
                stacklevel=2,
            )
        chains = done
    else:
        diverged = store.diverged_chains()
        missing = [c for c in chains if c not in done and c not in diverged]
        if missing:
            raise BnnkitError(f"chains {missing} of {str(root)!r} are not finished.")
    first = next(store.iter_positions(chains[0]))
    shapes = store.config.get("model", {}).get("parameters")
    if shapes is None:
        shapes = {"x": [int(first.shape[-1])]}
    view = FlatView({n: torch.empty(s, dtype=first.dtype) for n, s in shapes.items()})
    return StoredSamples(root, chains, view, store.config, unchecked=unchecked)
