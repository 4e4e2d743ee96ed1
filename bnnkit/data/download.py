"""Where data sets live on disk, and how missing files are downloaded safely.

Every loader takes ``root`` (a data directory holding ``uci/``, ``mushroom/``, ``mnist/``, ...).
When ``root`` is ``None`` the directory is :func:`data_dir`: the environment variable
``BNNKIT_DATA`` if set, else the per-user cache directory. Files are only downloaded when the
caller passes ``download=True``; :func:`fetch` writes to a temporary file next to the target and
renames it into place only after the checksum matched, so an interrupted or bad download never
leaves a half-written file where a loader would pick it up.  :func:`files_checksum` and
:func:`arrays_checksum` fingerprint a data set's files or arrays (a benchmark cell records them).
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import platformdirs

from bnnkit.core.errors import BnnkitError

ENV_VAR = "BNNKIT_DATA"

_CHUNK = 1 << 20


def data_dir() -> Path:
    """The default data directory: ``$BNNKIT_DATA`` if set, else the user cache dir for bnnkit."""
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_cache_dir("bnnkit"))


def resolve_root(root: str | os.PathLike[str] | None) -> Path:
    """``root`` as a path, or :func:`data_dir` when it is ``None``."""
    return data_dir() if root is None else Path(root).expanduser()


def _root_origin(root: str | os.PathLike[str] | None) -> str:
    # Said in error messages, so the user knows why this directory was searched.
    if root is not None:
        return "the root argument"
    if os.environ.get(ENV_VAR, "").strip():
        return f"the environment variable {ENV_VAR}"
    return f"the default cache directory ({ENV_VAR} is not set)"


def sha256(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 digest of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def files_checksum(paths: Iterable[Path], digests: dict[Path, str] | None = None) -> str:
    """SHA-256 over the files ``paths`` (names and contents, in order): a split's data in the UCI
    layout.  ``digests`` caches each file's own digest (``data.txt`` is shared by the splits)."""
    h = hashlib.sha256()
    for path in paths:
        if digests is not None and path in digests:
            digest = digests[path]
        else:
            digest = sha256(path)
            if digests is not None:
                digests[path] = digest
        h.update(path.name.encode() + b"\0" + bytes.fromhex(digest))
    return h.hexdigest()


def arrays_checksum(*arrays: Any) -> str:
    """SHA-256 over ``arrays`` (dtype, shape and bytes of each): a split of data held in memory."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _expected_digests(expected: str | Iterable[str] | None) -> tuple[str, ...]:
    if expected is None:
        return ()
    if isinstance(expected, str):
        return (expected.lower(),)
    return tuple(e.lower() for e in expected)


def fetch(
    url: str,
    dest: str | os.PathLike[str],
    sha256: str | Iterable[str] | None = None,
    *,
    timeout: float = 60.0,
) -> Path:
    """Download ``url`` to ``dest`` atomically and return ``dest``.

    The bytes go to a temporary file in ``dest``'s folder (so the final ``os.replace`` is a
    rename on one file system); when ``sha256`` is given (one hex digest, or several accepted
    ones) the download must match it. On any failure the temporary file is removed, ``dest`` is
    left untouched, and a :class:`BnnkitError` names the URL, the destination and the reason.
    """
    dest = Path(dest)
    expected = _expected_digests(sha256)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        h = hashlib.sha256()
        try:
            with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
                while chunk := resp.read(_CHUNK):
                    out.write(chunk)
                    h.update(chunk)
                out.flush()
                os.fsync(out.fileno())
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
            raise BnnkitError(
                f"Downloading {url} to {dest} failed: {exc}. Check the network connection, or download "
                f"the file by hand and place it at {dest}; set the environment variable {ENV_VAR} to use "
                "another data directory."
            ) from exc
        digest = h.hexdigest()
        if expected and digest not in expected:
            want = expected[0] if len(expected) == 1 else "one of " + ", ".join(expected)
            raise BnnkitError(
                f"Checksum mismatch for {url}: got sha256 {digest}, expected {want}. The download was "
                f"discarded and {dest} was not written; the server may be serving a different or "
                "truncated file, so try again later or place a verified copy there by hand."
            )
        # mkstemp creates the file as 0600; give the data file ordinary read permissions.
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return dest


def require_file(
    relpath: str,
    url: str,
    root: str | os.PathLike[str] | None = None,
    download: bool = False,
    sha256: str | Iterable[str] | None = None,
) -> Path:
    """Path of ``<root>/<relpath>``; downloads it from ``url`` first if missing and ``download``.

    Raises a :class:`BnnkitError` naming the file, the directory searched, the URL and how to
    point bnnkit at another data directory when the file is missing and cannot be fetched.
    """
    base = resolve_root(root)
    path = base / relpath
    if path.is_file():
        return path
    if download:
        return fetch(url, path, sha256)
    raise BnnkitError(
        f"Data file '{relpath}' not found: looked for {path} in the data directory {base} "
        f"(given by {_root_origin(root)}). Pass download=True to fetch it from {url}, or put the "
        f"file there by hand. To use a different data directory set the environment variable "
        f"{ENV_VAR}=/path/to/data (the folder that holds uci/, mushroom/, mnist/, ...) or pass root=."
    )
