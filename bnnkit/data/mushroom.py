"""The UCI Mushroom data set (agaricus-lepiota), the contextual-bandit benchmark of
Blundell et al. (2015) and Riquelme et al. (2018).

8124 mushrooms described by 22 categorical attributes, each labelled edible (``e``) or
poisonous (``p``). The file is ``<root>/mushroom/agaricus-lepiota.data``: comma separated, no
header, column 0 the class and columns 1..22 single-letter attribute codes (``?`` marks the
missing stalk-root values and is kept as a level of its own).
"""

from __future__ import annotations

import os

import numpy as np
import torch
from torch import Tensor

from bnnkit.core.errors import BnnkitError
from bnnkit.data.download import require_file

MUSHROOM_URL = "https://archive.ics.uci.edu/ml/machine-learning-databases/mushroom/agaricus-lepiota.data"
MUSHROOM_SHA256 = "e65d082030501a3ebcbcd7c9f7c71aa9d28fdfff463bf4cf4716a3fe13ac360e"
MUSHROOM_FILE = "mushroom/agaricus-lepiota.data"

NUM_ATTRIBUTES = 22


def load_mushroom(
    root: str | os.PathLike[str] | None = None,
    download: bool = False,
    dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, Tensor]:
    """Contexts ``[8124, F]`` (one-hot of the 22 attributes) and ``edible`` ``[8124]`` (bool).

    Each attribute is one-hot encoded over its levels in sorted order, attribute by attribute
    (117 columns for the standard file), so the encoding is deterministic and every row sums to
    22. Rewards for the bandit (e.g. +5 / -35 for eating) are left to the caller.
    """
    path = require_file(MUSHROOM_FILE, MUSHROOM_URL, root, download, sha256=MUSHROOM_SHA256)
    rows = []
    for lineno, line in enumerate(path.read_text(encoding="ascii").splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        fields = line.split(",")
        if len(fields) != NUM_ATTRIBUTES + 1 or fields[0] not in ("e", "p"):
            raise BnnkitError(
                f"{path} line {lineno} is not a mushroom record (expected 23 comma-separated codes starting "
                f"with 'e' or 'p', got {line[:60]!r}); the file may be corrupt or have a header line. "
                f"Delete it and download it again from {MUSHROOM_URL}."
            )
        rows.append(fields)
    if not rows:
        raise BnnkitError(f"{path} holds no records; delete it and download it again from {MUSHROOM_URL}.")

    table = np.array(rows)  # [n, 23] array of one-character strings
    edible = table[:, 0] == "e"
    blocks = []
    for j in range(1, NUM_ATTRIBUTES + 1):
        column = table[:, j]
        levels = np.unique(column)  # sorted, so the column order does not depend on row order
        blocks.append(column[:, None] == levels[None, :])
    contexts = np.concatenate(blocks, axis=1)
    return torch.as_tensor(contexts, dtype=dtype), torch.as_tensor(edible)
