"""MNIST and Fashion-MNIST from the original gzipped IDX files.

Files live in ``<root>/mnist/`` and ``<root>/fashion-mnist/`` under their usual names
(``train-images-idx3-ubyte.gz``, ``train-labels-idx1-ubyte.gz``, ``t10k-images-idx3-ubyte.gz``,
``t10k-labels-idx1-ubyte.gz``). IDX is a big-endian header (int32 magic: 2051 for images,
2049 for labels; int32 count; for images int32 rows and cols) followed by raw uint8 values.
The count in the header is trusted (and checked against the file size), so files holding a
subset of a split load as well.
"""

from __future__ import annotations

import gzip
import os
import struct
import zlib
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from bnnkit.core.errors import BnnkitError
from bnnkit.data.download import require_file, resolve_root

IMAGES_MAGIC = 2051
LABELS_MAGIC = 2049
IMAGE_SIZE = 28
NUM_CLASSES = 10

# kind -> (folder under root, base URL of the canonical files)
_SOURCES: dict[str, tuple[str, str]] = {
    "mnist": ("mnist", "https://ossci-datasets.s3.amazonaws.com/mnist/"),
    "fmnist": ("fashion-mnist", "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"),
}
_KIND_ALIASES = {"fashion-mnist": "fmnist", "fashion_mnist": "fmnist", "fashionmnist": "fmnist"}

# Accepted sha256 digests of the gzip files, checked on download. Each file has the digest of
# the canonical file; the MNIST train images also accept the digest of the shared offline copy
# (see below), so the table can be used to verify either.
#
# The shared-data MNIST train-images .gz was RECOMPRESSED (the uncompressed IDX file, sha256
# ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db, 47,040,016 bytes, was
# gzipped with `gzip -n -9`), so its gzip bytes differ from LeCun's file although the
# decompressed content is identical. We therefore accept EITHER gzip checksum for that file
# (canonical 440fcabf..., recompressed 0b367032...); the decompressed digest is recorded in
# MNIST_TRAIN_IMAGES_RAW_SHA256 for anyone who wants to check the content itself.
MNIST_TRAIN_IMAGES_RAW_SHA256 = "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db"

SHA256: dict[str, dict[str, tuple[str, ...]]] = {
    "mnist": {
        "train-images-idx3-ubyte.gz": (
            "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",  # canonical (LeCun / ossci)
            "0b367032e93c5d0cea0925647cfdb18614af8ee15f83e6f2fc2ad904a6835971",  # shared copy, recompressed
        ),
        "train-labels-idx1-ubyte.gz": ("3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",),
        "t10k-images-idx3-ubyte.gz": ("8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",),
        "t10k-labels-idx1-ubyte.gz": ("f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",),
    },
    "fmnist": {
        "train-images-idx3-ubyte.gz": ("3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",),
        "train-labels-idx1-ubyte.gz": ("a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",),
        "t10k-images-idx3-ubyte.gz": ("346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",),
        "t10k-labels-idx1-ubyte.gz": ("67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",),
    },
}

# The offline shared data holds only the first 4443 Fashion-MNIST test images (in their original
# order) with matching labels; they are used only when asked for with allow_partial=True.
_FMNIST_PARTIAL_TEST = ("t10k-images-first4443-idx3-ubyte.gz", "t10k-labels-first4443-idx1-ubyte.gz")


def _read_gzip(path: Path) -> bytes:
    try:
        with gzip.open(path, "rb") as f:
            return f.read()
    except (OSError, EOFError, zlib.error) as exc:
        # Truncated streams raise EOFError, bad CRC / not gzip raise BadGzipFile (an OSError).
        raise BnnkitError(
            f"{path} is not a valid gzip file ({exc}); it is probably truncated or corrupt. "
            "Delete it and download it again (download=True)."
        ) from exc


def _read_idx(path: Path, magic: int) -> np.ndarray:
    """Decompress and parse one IDX file: ``[n, 28, 28]`` images or ``[n]`` labels (uint8)."""
    raw = _read_gzip(path)
    header = 16 if magic == IMAGES_MAGIC else 8
    what = "images" if magic == IMAGES_MAGIC else "labels"
    got, n = struct.unpack(">ii", raw[:8]) if len(raw) >= 8 else (None, 0)
    if got != magic:
        raise BnnkitError(
            f"{path} has IDX magic number {got}, expected {magic} ({what}); it is the wrong file or corrupt."
        )
    if len(raw) < header:
        raise BnnkitError(f"{path} is too short ({len(raw)} bytes) to be an IDX {what} file; delete it.")
    shape: tuple[int, ...] = (n,)
    if magic == IMAGES_MAGIC:
        rows, cols = struct.unpack(">ii", raw[8:16])
        if (rows, cols) != (IMAGE_SIZE, IMAGE_SIZE):
            raise BnnkitError(f"{path} holds {rows}x{cols} images, expected {IMAGE_SIZE}x{IMAGE_SIZE}.")
        shape = (n, rows, cols)
    expected = int(np.prod(shape))
    if n < 0 or len(raw) - header != expected:
        raise BnnkitError(
            f"{path} is corrupt: its header promises {n} {what} ({expected} bytes of data) but it holds "
            f"{len(raw) - header} bytes. Delete it and download it again (download=True)."
        )
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape)


def _resolve_kind(kind: str) -> str:
    k = str(kind).strip().lower()
    k = _KIND_ALIASES.get(k, k)
    if k not in _SOURCES:
        raise BnnkitError(f"kind must be 'mnist' or 'fmnist' (Fashion-MNIST), got {kind!r}.")
    return k


def load_mnist(
    root: str | os.PathLike[str] | None = None,
    train: bool = True,
    download: bool = False,
    kind: str = "mnist",
    dtype: torch.dtype = torch.float32,
    allow_partial: bool = False,
) -> tuple[Tensor, Tensor]:
    """Images ``[n, 1, 28, 28]`` scaled to ``[0, 1]`` and labels ``[n]`` (int64, 0..9).

    ``kind`` is ``"mnist"`` or ``"fmnist"`` (Fashion-MNIST); ``train`` picks the 60000-image
    training split or the 10000-image test split. With ``allow_partial=True`` and the full
    Fashion-MNIST test images missing, the partial copy of the offline shared data
    (``t10k-images-first4443-idx3-ubyte.gz``, the first 4443 test images) is loaded instead.
    """
    k = _resolve_kind(kind)
    folder, base_url = _SOURCES[k]
    prefix = "train" if train else "t10k"
    image_name = f"{prefix}-images-idx3-ubyte.gz"
    label_name = f"{prefix}-labels-idx1-ubyte.gz"

    base = resolve_root(root) / folder
    partial_images = base / _FMNIST_PARTIAL_TEST[0]
    # download=True means the full file is wanted, so the partial copy is only a fallback offline.
    if (
        k == "fmnist"
        and not train
        and not download
        and not (base / image_name).is_file()
        and partial_images.is_file()
    ):
        if allow_partial:
            image_name, label_name = _FMNIST_PARTIAL_TEST
        else:
            raise BnnkitError(
                f"The full Fashion-MNIST test images ({base / image_name}) are missing, but a partial copy "
                f"with the first test images exists ({partial_images}). Pass allow_partial=True to load it, "
                "or download=True to fetch the full file."
            )

    def get(name: str) -> Path:
        return require_file(f"{folder}/{name}", base_url + name, root, download, SHA256[k].get(name))

    images = _read_idx(get(image_name), IMAGES_MAGIC)
    if label_name == _FMNIST_PARTIAL_TEST[1] and not (base / label_name).is_file():
        # The partial images are the first n of the original order, so the first n labels match.
        labels = _read_idx(get("t10k-labels-idx1-ubyte.gz"), LABELS_MAGIC)[: images.shape[0]]
    else:
        labels = _read_idx(get(label_name), LABELS_MAGIC)
    if images.shape[0] != labels.shape[0]:
        raise BnnkitError(
            f"{folder}: {image_name} holds {images.shape[0]} images but {label_name} holds "
            f"{labels.shape[0]} labels; one of the files is from a different split or incomplete."
        )
    if labels.size and labels.max() >= NUM_CLASSES:
        raise BnnkitError(f"{folder}/{label_name} has labels outside 0..{NUM_CLASSES - 1}; it is corrupt.")

    # Scale in float64 only when float64 is asked for (float32 is exact enough for k / 255).
    x = torch.from_numpy(images.astype(np.float64 if dtype == torch.float64 else np.float32))
    x = x.div_(255.0).unsqueeze(1).to(dtype)
    return x, torch.from_numpy(labels.astype(np.int64))


# An image task: the data set trained and tested on -> the data set whose test images are its
# out-of-distribution inputs.  "fmnist-partial" is the offline stand-in for Fashion-MNIST: its
# training images are the test images present but the last PARTIAL_TEST_ROWS, tested on those.
IMAGE_TASKS = {"mnist": "fmnist", "fmnist": "mnist", "fmnist-partial": "mnist"}
PARTIAL_TEST_ROWS = 1000


def load_image_task(
    dataset: str,
    root: str | os.PathLike[str] | None = None,
    download: bool = False,
    train_rows: int | None = None,
    test_rows: int | None = None,
    ood_rows: int | None = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, str]:
    """Training images and labels, test images and labels, the out-of-distribution images (the other
    set's test images) and that set's name, for ``dataset`` of :data:`IMAGE_TASKS`; each cut to
    its first ``*_rows`` rows where given."""
    other = IMAGE_TASKS.get(dataset)
    if other is None:
        raise BnnkitError(f"dataset must be one of {', '.join(IMAGE_TASKS)}, got {dataset!r}.")
    if dataset == "fmnist-partial":
        x_all, y_all = load_mnist(root, train=False, download=download, kind="fmnist", allow_partial=True)
        cut_at = x_all.shape[0] - PARTIAL_TEST_ROWS
        x_tr, y_tr, x_te, y_te = x_all[:cut_at], y_all[:cut_at], x_all[cut_at:], y_all[cut_at:]
    else:
        try:
            x_tr, y_tr = load_mnist(root, train=True, download=download, kind=dataset)
        except BnnkitError as err:
            if dataset != "fmnist" or download:
                raise
            raise BnnkitError(
                f"{err} Offline, dataset fmnist-partial trains on the Fashion-MNIST test images that are "
                "present (a smaller protocol, see bnnkit.data.mnist.load_image_task)."
            ) from err
        x_te, y_te = load_mnist(root, train=False, download=download, kind=dataset, allow_partial=True)
    x_ood, _ = load_mnist(root, train=False, download=download, kind=other, allow_partial=True)
    rows = (train_rows, train_rows, test_rows, test_rows, ood_rows)
    return (*(t if k is None else t[:k] for t, k in zip((x_tr, y_tr, x_te, y_te, x_ood), rows)), other)
