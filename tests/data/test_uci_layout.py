"""Own data in the UCI layout: ``load_uci`` reads any folder ``<root>/uci/<NAME>/``, and a bad layout
is an error that names the file; the known sets still verify their checksums; ``UCIData`` holds
arrays in memory."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from bnnkit.core.errors import BnnkitError
from bnnkit.data.download import sha256
from bnnkit.data.uci import UCI_DATA_SHA256, UCIData, load_uci, uci_dataset_name, uci_num_splits
from tests.helpers import write_uci_folder

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def test_an_own_folder_loads_like_a_known_set(tmp_path: Path) -> None:
    folder = write_uci_folder(tmp_path)
    assert uci_num_splits("toyset", root=tmp_path) == 2
    s = load_uci("toyset", split=1, root=tmp_path)
    assert s.name == "toyset" and s.split == 1 and s.num_splits == 2
    assert s.x_train.shape == (54, 3) and s.x_test.shape == (6, 3) and s.y_test.shape == (6,)
    assert abs(float(s.y_train.mean())) < 1e-5  # standardised with the training rows' statistics
    raw = np.loadtxt(folder / "data.txt")
    test = np.loadtxt(folder / "index_test_1.txt", dtype=int)
    assert np.allclose(s.unnormalise_y(s.y_test.double()).numpy(), raw[test, 3], atol=1e-4)
    # n_splits.txt may be left out: the splits are the index files numbered 0, 1, ... without a gap
    (folder / "n_splits.txt").unlink()
    assert uci_num_splits("toyset", root=tmp_path) == 2
    with pytest.raises(BnnkitError, match=r"0\.\.1"):
        load_uci("toyset", split=2, root=tmp_path)


def _error(tmp_path: Path, split: int = 0) -> str:
    with pytest.raises(BnnkitError) as info:
        uci_num_splits("toyset", root=tmp_path)
        load_uci("toyset", split=split, root=tmp_path)
    return str(info.value)


def test_missing_data_file_is_named(tmp_path: Path) -> None:
    folder = write_uci_folder(tmp_path)
    (folder / "data.txt").unlink()
    msg = _error(tmp_path)
    assert str(folder / "data.txt") in msg and "missing" in msg and "index_features.txt" in msg


def test_missing_index_file_is_named(tmp_path: Path) -> None:
    folder = write_uci_folder(tmp_path)
    (folder / "index_test_1.txt").unlink()
    load_uci("toyset", split=0, root=tmp_path)  # split 0 has its files
    assert str(folder / "index_test_1.txt") in _error(tmp_path, split=1)
    (folder / "index_features.txt").unlink()
    assert "index_features.txt" in _error(tmp_path)


def test_index_out_of_range_is_named(tmp_path: Path) -> None:
    folder = write_uci_folder(tmp_path)
    (folder / "index_train_0.txt").write_text("0\n1\n60\n")
    msg = _error(tmp_path)
    assert str(folder / "index_train_0.txt") in msg and "row 60" in msg and "0..59" in msg
    (folder / "index_train_0.txt").write_text("0\n1\n2.5\n")
    assert "non-integer" in _error(tmp_path)
    (folder / "index_train_0.txt").write_text("0\n1\n2\n")
    (folder / "index_target.txt").write_text("4\n")
    msg = _error(tmp_path)
    assert str(folder / "index_target.txt") in msg and "0..3" in msg


def test_non_numeric_data_is_named(tmp_path: Path) -> None:
    folder = write_uci_folder(tmp_path)
    lines = (folder / "data.txt").read_text().splitlines()
    lines[3] = "1.0 abc 2.0 3.0"
    (folder / "data.txt").write_text("\n".join(lines) + "\n")
    msg = _error(tmp_path)
    assert str(folder / "data.txt") in msg and "numbers" in msg
    lines[3] = "1.0 nan 2.0 3.0"
    (folder / "data.txt").write_text("\n".join(lines) + "\n")
    msg = _error(tmp_path)
    assert str(folder / "data.txt") in msg and "row 3" in msg
    (folder / "data.txt").write_text("")
    assert "is empty" in _error(tmp_path)


def test_other_layout_mistakes_are_named(tmp_path: Path) -> None:
    folder = write_uci_folder(tmp_path)
    (folder / "n_splits.txt").write_text("0\n")
    assert str(folder / "n_splits.txt") in _error(tmp_path)
    (folder / "n_splits.txt").write_text("2\n")
    (folder / "index_features.txt").write_text("0\n1\n3\n")  # the target among the inputs
    assert "target column 3" in _error(tmp_path)
    (folder / "index_features.txt").write_text("0\n1\n2\n")
    test = (folder / "index_test_0.txt").read_text()
    (folder / "index_train_0.txt").write_text(test)  # a test row trained on
    assert "share" in _error(tmp_path)
    for f in folder.glob("index_train_*"):
        f.unlink()
    (folder / "n_splits.txt").unlink()
    assert "n_splits.txt" in _error(tmp_path)


def test_unknown_names_say_where_the_folder_should_be(tmp_path: Path) -> None:
    with pytest.raises(BnnkitError, match="Known names") as info:
        load_uci("toyset", root=tmp_path)
    assert str(tmp_path / "uci" / "toyset") in str(info.value) and "data.txt" in str(info.value)
    for bad in ("../etc", "a/b", ""):
        with pytest.raises(BnnkitError, match="folder name"):
            uci_dataset_name(bad)
    assert uci_dataset_name("Boston") == "bostonHousing" and uci_dataset_name("toyset") == "toyset"


def test_a_known_set_must_be_the_published_data(tmp_path: Path) -> None:
    # a yacht folder whose data.txt is not the published one: refused, with the way out
    write_uci_folder(tmp_path, name="yacht")
    with pytest.raises(BnnkitError, match="not the published yacht data") as info:
        load_uci("yacht", root=tmp_path)
    assert UCI_DATA_SHA256["yacht"] in str(info.value) and "another" in str(info.value)
    # the same files under a name of one's own run as own data
    shutil.copytree(tmp_path / "uci" / "yacht", tmp_path / "uci" / "yacht-mine")
    assert load_uci("yacht-mine", root=tmp_path).x_train.shape == (54, 3)


def test_a_download_of_a_known_set_is_verified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    remote = tmp_path / "remote"
    src = write_uci_folder(tmp_path / "served", name="energy")
    shutil.copytree(src, remote / "energy" / "data")
    monkeypatch.setattr("bnnkit.data.uci.UCI_BASE_URL", remote.as_uri())
    with pytest.raises(BnnkitError, match="Checksum mismatch"):
        load_uci("energy", root=tmp_path / "cache", download=True)
    assert not (tmp_path / "cache" / "uci" / "energy" / "data.txt").exists()


@pytest.mark.skipif(not (SHARED / "uci").is_dir(), reason="needs ../shared/data/uci")
def test_the_shared_known_sets_pass_their_checksums() -> None:
    for name in ("bostonHousing", "yacht"):
        assert sha256(SHARED / "uci" / name / "data.txt") == UCI_DATA_SHA256[name]
        assert load_uci(name, root=SHARED).name == name


def test_uci_data_from_arrays() -> None:
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(40, 2)), rng.normal(size=40)
    data = UCIData.from_arrays(x, y, splits=3, name="mine", seed=4)
    assert data.num_splits == 3 and data.name == "mine"
    s = data.split(2)
    assert s.x_train.shape == (36, 2) and s.x_test.shape == (4, 2) and s.num_splits == 3
    again = UCIData.from_arrays(torch.as_tensor(x), y[:, None], splits=3, name="mine", seed=4)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(data.splits, again.splits))  # seeded, no global RNG
    given = UCIData.from_arrays(x, y, splits=[(range(30), range(30, 40))])
    assert given.split(0).x_test.shape == (10, 2)
    with pytest.raises(BnnkitError, match="40 rows but y has 39"):
        UCIData.from_arrays(x, y[:-1])
    with pytest.raises(BnnkitError, match="outside 0..39"):
        UCIData.from_arrays(x, y, splits=[([0, 1], [40])])
    with pytest.raises(BnnkitError, match="share"):
        UCIData.from_arrays(x, y, splits=[([0, 1, 2], [2, 3])])
    bad = x.copy()
    bad[0, 0] = np.nan
    with pytest.raises(BnnkitError, match="non-finite"):
        UCIData.from_arrays(bad, y)
    with pytest.raises(BnnkitError, match=r"0\.\.2"):
        data.split(3)
