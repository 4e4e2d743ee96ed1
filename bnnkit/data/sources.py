"""A regression set's splits as one interface, whatever holds them: a folder in the UCI layout (its
index files), the gap or tail splits made from such a folder's rows, or arrays in memory.  Each
split carries a checksum of its data, so that stored results computed on other data are never
mixed with new ones (``bnnkit bench uci --resume``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .download import arrays_checksum, files_checksum, resolve_root
from .splits import split_dims, split_rows
from .uci import UCIData, UCISplit, load_uci, load_uci_columns, uci_dataset_name, uci_num_splits


@dataclass(frozen=True)
class SplitSource:
    """Where a data set's splits come from (a UCI-layout folder or arrays): ``num_splits`` is read
    when first needed (a run needs only the files of its splits); ``checksum(split)``, the split's
    data checksum its cells carry; ``where`` names the data in messages; ``kind`` of split and
    ``dim(split)``, the input dimension a gap or tail split holds out a region of."""

    name: str
    num_splits: Callable[[], int]
    load: Callable[[int], UCISplit]
    checksum: Callable[[int], str]
    where: str
    kind: str = "random"
    dim: Callable[[int], int | None] = lambda split: None


def folder_source(dataset: str, root: str | None) -> SplitSource:
    """The splits of ``<root>/uci/<dataset>/`` (its index files); a split's checksum covers the
    layout's data files and its two index files."""
    name = uci_dataset_name(dataset)
    folder = resolve_root(root) / "uci" / name
    digests: dict[Path, str] = {}  # data.txt is read once for all the splits

    def checksum(split: int) -> str:
        files = ("data.txt", "index_features.txt", "index_target.txt")
        files += (f"index_train_{split}.txt", f"index_test_{split}.txt")
        try:
            return files_checksum([folder / f for f in files], digests)
        except FileNotFoundError:
            load_uci(name, split, root=root)  # an error that names the missing file and the layout
            raise

    return SplitSource(
        name=name,
        num_splits=lambda: uci_num_splits(name, root=root),
        load=lambda split: load_uci(name, split, root=root),
        checksum=checksum,
        where=f"{folder}/",
    )


def kind_source(dataset: str, root: str | None, kind: str) -> SplitSource:
    """The ``kind`` (gap or tail) splits of a UCI-layout set, made from its ``data.txt`` and feature
    columns (:func:`bnnkit.data.splits.split_rows`; not the folder's index files).  A split's
    checksum covers the layout's data files, the kind and its rows."""
    name = uci_dataset_name(dataset)
    folder = resolve_root(root) / "uci" / name
    x, y = load_uci_columns(name, root=root)
    base = files_checksum([folder / f for f in ("data.txt", "index_features.txt", "index_target.txt")])
    data = UCIData.from_arrays(x, y, split_rows(x, kind), name=name)
    return arrays_source(data, kind, base, where=f"{folder}/ ({kind} splits)")


def arrays_source(
    data: UCIData, kind: str = "random", base: str | None = None, where: str = ""
) -> SplitSource:
    """The splits of ``data``; a split's checksum is of ``base`` (default: the arrays'), the kind of
    split (not for a random one, as cells written before kinds were recorded) and its rows."""
    head: list[Any] = [np.frombuffer(bytes.fromhex(base or arrays_checksum(data.x, data.y)), dtype=np.uint8)]
    if kind != "random":
        head.append(np.frombuffer(kind.encode(), dtype=np.uint8))
    dims = split_dims(data.x, kind) if kind != "random" else None
    return SplitSource(
        name=data.name,
        num_splits=lambda: data.num_splits,
        load=data.split,
        checksum=lambda split: arrays_checksum(*head, *data.splits[split]),
        where=where or "the arrays given",
        kind=kind,
        dim=lambda split: None if dims is None else dims[split],
    )
