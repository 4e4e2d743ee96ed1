"""A set's splits behind one interface (:mod:`bnnkit.data.sources`): a UCI-layout folder, the gap
or tail splits of its rows, or arrays; each split's checksum follows its data and only its data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from bnnkit.data.sources import arrays_source, folder_source, kind_source
from bnnkit.data.splits import split_dims
from bnnkit.data.uci import UCIData, load_uci, load_uci_columns
from tests.helpers import write_uci_folder


def test_a_folder_source_loads_the_layouts_splits_and_its_checksum_follows_the_files(tmp_path: Path) -> None:
    folder = write_uci_folder(tmp_path)
    src = folder_source("toyset", str(tmp_path))
    assert src.name == "toyset" and src.kind == "random" and src.num_splits() == 2 and src.dim(0) is None
    assert torch.equal(src.load(1).x_test, load_uci("toyset", 1, root=tmp_path).x_test)
    first, other = src.checksum(0), src.checksum(1)
    assert len(first) == 64 and first != other  # each split's own index files
    assert folder_source("toyset", str(tmp_path)).checksum(0) == first  # stable across calls
    (folder / "index_test_0.txt").write_text((folder / "index_test_0.txt").read_text() + "0\n")
    assert folder_source("toyset", str(tmp_path)).checksum(0) != first  # a changed file changes it
    assert folder_source("toyset", str(tmp_path)).checksum(1) == other  # and only its split's


def test_gap_and_tail_sources_hold_out_a_region_per_dimension_with_their_own_checksums(
    tmp_path: Path,
) -> None:
    write_uci_folder(tmp_path, n=90)
    x, _ = load_uci_columns("toyset", root=tmp_path)
    gap, tail = kind_source("toyset", str(tmp_path), "gap"), kind_source("toyset", str(tmp_path), "tail")
    assert gap.num_splits() == len(split_dims(x, "gap")) == 3
    assert [gap.dim(s) for s in range(3)] == split_dims(x, "gap")
    s0 = gap.load(0)
    assert s0.x_test.shape[0] == 30 and s0.x_train.shape[0] == 60  # the middle third held out
    assert gap.checksum(0) != tail.checksum(0) != folder_source("toyset", str(tmp_path)).checksum(0)


def test_an_arrays_source_checksums_its_rows_and_kind() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(40, 2)), rng.normal(size=40)
    data = UCIData.from_arrays(x, y, 3, name="mine", seed=0)
    src = arrays_source(data)
    assert src.num_splits() == 3 and src.where == "the arrays given"
    assert src.checksum(0) == arrays_source(data).checksum(0) != src.checksum(1)
    y2 = y.copy()
    y2[0] += 1.0
    assert arrays_source(UCIData.from_arrays(x, y2, 3, name="mine", seed=0)).checksum(0) != src.checksum(0)
    assert arrays_source(data, "gap").checksum(0) != src.checksum(0)  # the kind is part of it
