"""Gap and tail splits of a regression set: where the data say little, by construction.

Random 90/10 splits test a model where the training rows are dense.  A prior on functions should
matter most between clusters of inputs and beyond their range, so two further kinds of split hold
out a region of input space, one split per input dimension ``j`` (Foong et al. 2019, "'In-Between'
Uncertainty in Bayesian Neural Networks", for the gaps):

* **gap** (in-between): sort the rows by feature ``j`` and hold out the middle third;
* **tail** (extrapolation): sort the rows by feature ``j`` and hold out the bottom and top sixths
  together.

The rest of the rows train; :func:`held_out_rows` states the rules exactly, and :func:`split_dims`
which dimensions are skipped for ties.

Index arrays are 0-based row numbers (``int64``), each sorted ascending; train and test are
disjoint and together cover every row.  :func:`write_split_layout` writes a set's splits of one
kind as a new folder in the UCI layout (:mod:`bnnkit.data.uci`), ``<dst>/uci/<NAME>_<kind>/``, that
``bnnkit bench uci --data DST --datasets NAME_gap`` runs like any set of one's own;
``bnnkit bench uci --split-kind gap`` makes the same splits on the fly.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
from torch import Tensor

from ..core.errors import BnnkitError
from .uci import _layout_files, _read_columns, uci_dataset_name

SPLIT_KINDS: tuple[str, ...] = ("random", "gap", "tail")
# the kinds made here, by input dimension ("random" is the layout's own index files)
DIRECTIONAL_KINDS: tuple[str, ...] = ("gap", "tail")
# written beside the index files: the input dimension (0-based position in index_features.txt) of each split
DIMS_FILE = "split_dims.txt"

__all__ = [
    "SPLIT_KINDS",
    "check_split_kind",
    "gap_splits",
    "held_out_rows",
    "split_dims",
    "split_rows",
    "tail_splits",
    "write_split_layout",
]


def check_split_kind(kind: str) -> str:
    """``kind`` if it is one of :data:`SPLIT_KINDS`, else a :class:`BnnkitError` that names them."""
    if kind not in SPLIT_KINDS:
        raise BnnkitError(
            f"split kind must be one of {', '.join(SPLIT_KINDS)} (random: the layout's own index files; "
            f"gap: the middle third of each input dimension held out; tail: its top and bottom sixths), "
            f"got {kind!r}."
        )
    return kind


def _as_inputs(x: Any) -> np.ndarray:
    if isinstance(x, Tensor):
        x = x.detach().cpu().numpy()
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise BnnkitError(f"x must be an array of numbers [n, d]: {err}.") from err
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2 or a.shape[1] < 1:
        raise BnnkitError(f"x must be [n, d] (one row per example), got shape {a.shape}.")
    if np.isnan(a).any():
        raise BnnkitError("x holds nan values: rows cannot be sorted by them; remove or impute them.")
    return a


def _min_rows(kind: str) -> int:
    return 3 if kind == "gap" else 6


def held_out_rows(x: Any, dim: int, kind: str) -> np.ndarray:
    """The rows (sorted ascending) that the ``kind`` split of input dimension ``dim`` holds out,
    whether or not the dimension would be skipped (``n`` rows):

    * **Order.** Rows are sorted by feature ``j`` with a stable sort, so rows of equal value keep the
      order of their row index: the split is a function of the data alone, the same on every machine.
    * **Sizes.** A gap holds out ``n // 3`` rows: sorted positions ``lo .. lo + n // 3 - 1`` with
      ``lo = (n - n // 3) // 2`` (centred; where the rows left over are odd, the upper training block
      has the extra row).  A tail split holds out ``n // 6`` rows at each end: sorted positions
      ``0 .. n // 6 - 1`` and ``n - n // 6 .. n - 1``, ``2 * (n // 6)`` rows in all.  A gap needs
      ``n >= 3``, a tail ``n >= 6``.
    """
    if kind not in DIRECTIONAL_KINDS:
        check_split_kind(kind)
        raise BnnkitError(f"held_out_rows makes gap and tail splits; {kind!r} splits are the layout's own.")
    a = _as_inputs(x)
    n, d = a.shape
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or not 0 <= dim < d:
        raise BnnkitError(f"dim must be an input dimension in 0..{d - 1}, got {dim!r}.")
    if n < _min_rows(kind):
        raise BnnkitError(
            f"{kind} splits need at least {_min_rows(kind)} rows (to hold out "
            + ("a third" if kind == "gap" else "a sixth at each end")
            + f" of them), got {n}."
        )
    order = np.argsort(a[:, dim], kind="stable")  # ties keep row order: deterministic
    if kind == "gap":
        k = n // 3
        lo = (n - k) // 2
        test = order[lo : lo + k]
    else:
        k = n // 6
        test = np.concatenate([order[:k], order[n - k :]])
    return np.sort(test).astype(np.int64)


def _pair(n: int, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mask = np.zeros(n, dtype=bool)
    mask[test] = True
    return np.flatnonzero(~mask).astype(np.int64), test


def _holds_out_a_value(column: np.ndarray, train: np.ndarray, test: np.ndarray) -> bool:
    """Whether some held-out row's value occurs in no training row."""
    return bool(np.isin(column[test], column[train], invert=True).any())


def _splits(x: Any, kind: str, skip_ties: bool) -> list[tuple[int, np.ndarray, np.ndarray]]:
    a = _as_inputs(x)
    n, d = a.shape
    out = []
    for j in range(d):
        train, test = _pair(n, held_out_rows(a, j, kind))
        if skip_ties and not _holds_out_a_value(a[:, j], train, test):
            continue
        out.append((j, train, test))
    return out


def split_dims(x: Any, kind: str, skip_ties: bool = True) -> list[int]:
    """The input dimensions that give a ``kind`` (gap or tail) split of ``x``, in order: all of
    them with ``skip_ties=False``, else those where the held-out rows hold a value of the feature
    that no training row has.

    Ties: the cut is made by position, so a run of tied values may be cut: rows of one value can
    fall on both sides (which of them is held out follows the row index).  A dimension is skipped
    when the held-out rows hold no value of feature ``j`` that some training row does not also have:
    nothing of that feature is then held out (a constant or binary column, or one whose middle third
    is all one value that the training rows share).  Where a held-out value is one no training row
    has, it lies strictly between the two training blocks (gap) or beyond the training rows' range
    (tail), since the rows are sorted: a kept split always holds out some region of feature ``j``.
    ``skip_ties=False`` keeps every dimension.
    """
    return [j for j, _, _ in _splits(x, _directional(kind), skip_ties)]


def gap_splits(x: Any, skip_ties: bool = True) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(train_rows, test_rows)`` per input dimension of ``x`` ``[n, d]`` (numpy or tensor): the
    middle third of the rows sorted by that dimension held out (``n // 3`` rows; rules in the module
    docstring).  Dimensions with nothing of their own held out are skipped unless ``skip_ties`` is
    False: :func:`split_dims` names the dimension of each split."""
    return [(tr, te) for _, tr, te in _splits(x, "gap", skip_ties)]


def tail_splits(x: Any, skip_ties: bool = True) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(train_rows, test_rows)`` per input dimension of ``x`` ``[n, d]``: the bottom and top
    ``n // 6`` rows by that dimension held out together (rules in the module docstring)."""
    return [(tr, te) for _, tr, te in _splits(x, "tail", skip_ties)]


def _directional(kind: str) -> str:
    check_split_kind(kind)
    if kind not in DIRECTIONAL_KINDS:
        raise BnnkitError(
            f"split kind {kind!r} is the layout's own index files; gap and tail splits are made here."
        )
    return kind


def split_rows(x: Any, kind: str, skip_ties: bool = True) -> list[tuple[np.ndarray, np.ndarray]]:
    """:func:`gap_splits` or :func:`tail_splits` of ``x`` by ``kind``; an error where no dimension
    gives a split (every feature constant or tied across the cut)."""
    pairs = [(tr, te) for _, tr, te in _splits(x, _directional(kind), skip_ties)]
    if not pairs:
        raise BnnkitError(
            f"no input dimension gives a {kind} split: in every one, the held-out rows hold only values "
            "that training rows also have (constant or few-valued features); there is no region to hold out."
        )
    return pairs


def write_split_layout(
    src_dir: str | os.PathLike[str] | None,
    name: str,
    kind: str,
    dst_dir: str | os.PathLike[str],
    skip_ties: bool = True,
) -> Path:
    """Write the ``kind`` (``"gap"`` or ``"tail"``) splits of the UCI set ``name`` as a new folder
    ``<dst_dir>/uci/<NAME>_<kind>/`` in the UCI layout, and return it.

    ``src_dir`` is the data directory that holds ``uci/<name>/`` (as ``--data``; None: the default
    one); ``name`` a known set (or alias: the folder takes the canonical name, e.g.
    ``bostonHousing_gap``) or a folder of one's own.  ``data.txt``, ``index_features.txt`` and
    ``index_target.txt`` are copied as they are; ``index_train_<i>.txt`` / ``index_test_<i>.txt``
    hold split ``i``, ``n_splits.txt`` their number (one per input dimension that gives a split:
    ``d`` unless some are skipped, see the module docstring) and ``split_dims.txt`` the input
    dimension of each (0-based position in ``index_features.txt``), one per line.  Then
    ``bnnkit bench uci --data DST_DIR --datasets NAME_gap`` runs them.  Index files of an earlier
    write beyond the new ``n_splits`` are removed; other files in the folder are left alone.
    """
    kind = _directional(kind)
    canonical = uci_dataset_name(name)
    _, get = _layout_files(canonical, src_dir, False)
    data, features, _target, _ = _read_columns(get)
    x = data[:, features]
    triples = _splits(x, kind, skip_ties)
    if not triples:
        split_rows(x, kind, skip_ties)  # the error that says why
    folder = Path(dst_dir) / "uci" / f"{canonical}_{kind}"
    src = get("data.txt").parent
    if folder.resolve() == src.resolve():
        raise BnnkitError(f"write_split_layout would overwrite its source {src}/; pass another dst_dir.")
    folder.mkdir(parents=True, exist_ok=True)
    for f in ("data.txt", "index_features.txt", "index_target.txt"):
        shutil.copyfile(get(f), folder / f)
    for i, (_, train, test) in enumerate(triples):
        np.savetxt(folder / f"index_train_{i}.txt", train, fmt="%d")
        np.savetxt(folder / f"index_test_{i}.txt", test, fmt="%d")
    i = len(triples)
    while (folder / f"index_train_{i}.txt").exists() or (folder / f"index_test_{i}.txt").exists():
        (folder / f"index_train_{i}.txt").unlink(missing_ok=True)
        (folder / f"index_test_{i}.txt").unlink(missing_ok=True)
        i += 1
    (folder / "n_splits.txt").write_text(f"{len(triples)}\n")
    (folder / DIMS_FILE).write_text("".join(f"{j}\n" for j, _, _ in triples))
    return folder
