"""Gap and tail splits (``bnnkit.data.splits``): deterministic, disjoint, covering every row, of the
stated sizes, with ties cut by row index and dimensions that hold nothing out skipped; the layout
they are written in loads with ``load_uci``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from bnnkit.core.errors import BnnkitError
from bnnkit.data import (
    gap_splits,
    load_uci,
    load_uci_columns,
    tail_splits,
    uci_num_splits,
    write_split_layout,
)
from bnnkit.data.splits import held_out_rows, split_dims, split_rows
from tests.helpers import write_uci_folder


def _check_partition(pairs, n):
    for train, test in pairs:
        assert train.dtype == np.int64 and test.dtype == np.int64
        assert np.all(np.diff(train) > 0) and np.all(np.diff(test) > 0)  # sorted, no repeats
        assert np.intersect1d(train, test).size == 0
        assert np.array_equal(np.sort(np.concatenate([train, test])), np.arange(n))


@pytest.mark.parametrize("n", [3, 10, 11, 12, 60, 61, 100])
def test_gap_holds_out_the_middle_third_of_each_dimension(n):
    rng = np.random.default_rng(n)
    x = rng.normal(size=(n, 3))
    pairs = gap_splits(x)
    assert len(pairs) == 3  # continuous features: one split per dimension
    _check_partition(pairs, n)
    k, lo = n // 3, (n - n // 3) // 2
    for j, (train, test) in enumerate(pairs):
        assert test.size == k  # n // 3 rows, centred: lo below, n - k - lo above
        order = np.argsort(x[:, j])
        assert set(test) == set(order[lo : lo + k])
        below, above = x[train, j] < x[test, j].min(), x[train, j] > x[test, j].max()
        assert below.sum() == lo and above.sum() == n - k - lo  # a gap: every training row on one side


@pytest.mark.parametrize("n", [6, 11, 12, 13, 60, 100])
def test_tail_holds_out_the_top_and_bottom_sixths(n):
    rng = np.random.default_rng(n)
    x = torch.as_tensor(rng.normal(size=(n, 2)))  # tensors are taken as well
    pairs = tail_splits(x)
    assert len(pairs) == 2
    _check_partition(pairs, n)
    k = n // 6
    for j, (train, test) in enumerate(pairs):
        assert test.size == 2 * k  # n // 6 at each end
        col = x[:, j].numpy()
        assert np.sum(col[test] < col[train].min()) == k and np.sum(col[test] > col[train].max()) == k


def test_splits_are_deterministic_and_ties_follow_the_row_index():
    # 12 rows, feature 0 takes 4 values, 3 rows each, in a shuffled row order
    values = np.array([2, 0, 3, 1, 2, 0, 1, 3, 1, 2, 3, 0], dtype=float)
    x = np.column_stack([values, np.arange(12.0)])
    first = gap_splits(x)
    again = gap_splits(x.copy())
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(first, again))
    # sorted stably: 0s at rows 1,5,11; 1s at 3,6,8; 2s at 0,4,9; 3s at 2,7,10.  The middle third is
    # positions 4..7 (lo = (12 - 4) // 2 = 4): rows 6, 8 (value 1) and 0, 4 (value 2, lowest row indices)
    assert held_out_rows(x, 0, "gap").tolist() == [0, 4, 6, 8]
    # values 1 and 2 keep rows in training (3 and 9): nothing of feature 0 is held out, so it is skipped
    assert split_dims(x, "gap") == [1]
    assert len(gap_splits(x, skip_ties=False)) == 2
    # tails: positions 0-1 and 10-11: rows 1, 5 (value 0) and 7, 10 (value 3); row 11 (0) and 2 (3) train
    assert held_out_rows(x, 0, "tail").tolist() == [1, 5, 7, 10]
    assert split_dims(x, "tail") == [1]
    # the row order of the data decides which tied rows are held out, nothing else
    perm = np.random.default_rng(0).permutation(12)
    test = held_out_rows(x[perm], 0, "gap")
    assert sorted(x[perm][test, 0].tolist()) == [1.0, 1.0, 2.0, 2.0]


def test_few_valued_and_constant_features():
    rng = np.random.default_rng(0)
    n = 60
    binary = (np.arange(n) % 2).astype(float)  # half 0, half 1: the middle third mixes both
    rare = (np.arange(n) < 5).astype(float)  # 5 ones: all of them in the top sixth (10 rows)
    x = np.column_stack([rng.normal(size=n), binary, np.full(n, 4.0), rare])
    assert split_dims(x, "gap") == [0]  # binary, constant and rare hold out no value of their own
    # the tail of a rare value holds out every row that has it: an extrapolation in that feature
    assert split_dims(x, "tail") == [0, 3]
    train, test = tail_splits(x)[1]
    assert set(np.flatnonzero(rare == 1)) <= set(test) and np.all(rare[train] == 0)
    with pytest.raises(BnnkitError, match="no input dimension gives a gap split"):
        split_rows(np.column_stack([binary, np.ones(n)]), "gap")


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: gap_splits(np.ones((2, 1))), "at least 3 rows"),
        (lambda: tail_splits(np.arange(5.0)), "at least 6 rows"),
        (lambda: gap_splits(np.array([[0.0], [np.nan], [1.0]])), "nan"),
        (lambda: gap_splits(np.zeros((4, 2, 2))), r"\[n, d\]"),
        (lambda: split_rows(np.zeros((9, 1)), "random"), "layout's own index files"),
        (lambda: split_rows(np.zeros((9, 1)), "middle"), "split kind must be one of random, gap, tail"),
        (lambda: held_out_rows(np.zeros((9, 2)), 2, "gap"), r"0\.\.1"),
    ],
)
def test_bad_input_is_an_error_that_says_what_to_change(call, match):
    with pytest.raises(BnnkitError, match=match):
        call()


def test_written_layout_loads_with_load_uci_and_holds_the_splits(tmp_path: Path):
    write_uci_folder(tmp_path / "src", n=61)
    x, y = load_uci_columns("toyset", root=tmp_path / "src")
    assert x.shape == (61, 3) and y.shape == (61,)
    for kind, make in (("gap", gap_splits), ("tail", tail_splits)):
        folder = write_split_layout(tmp_path / "src", "toyset", kind, tmp_path / "dst")
        assert folder == tmp_path / "dst" / "uci" / f"toyset_{kind}"
        assert uci_num_splits(f"toyset_{kind}", root=tmp_path / "dst") == 3  # n_splits = d
        assert (folder / "split_dims.txt").read_text().split() == ["0", "1", "2"]
        for f in ("data.txt", "index_features.txt", "index_target.txt"):  # copied as they are
            assert (folder / f).read_bytes() == (tmp_path / "src" / "uci" / "toyset" / f).read_bytes()
        for i, (train, test) in enumerate(make(x)):
            assert np.loadtxt(folder / f"index_test_{i}.txt", dtype=int).tolist() == test.tolist()
            s = load_uci(f"toyset_{kind}", i, root=tmp_path / "dst", dtype=torch.float64)
            assert s.x_train.shape == (train.size, 3) and s.x_test.shape == (test.size, 3)
            assert np.allclose(s.unnormalise_y(s.y_test).numpy(), y[test])
    # a second write of fewer splits leaves no stale index files behind; a random kind is refused
    (tmp_path / "dst" / "uci" / "toyset_gap" / "index_train_3.txt").write_text("0\n")
    write_split_layout(tmp_path / "src", "toyset", "gap", tmp_path / "dst")
    assert not (tmp_path / "dst" / "uci" / "toyset_gap" / "index_train_3.txt").exists()
    with pytest.raises(BnnkitError, match="layout's own index files"):
        write_split_layout(tmp_path / "src", "toyset", "random", tmp_path / "dst")
    with pytest.raises(BnnkitError, match="Unknown UCI data set 'nosuchset'"):
        write_split_layout(tmp_path / "src", "nosuchset", "gap", tmp_path / "dst")
