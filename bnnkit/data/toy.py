"""The embedded 1-D regression data set used by ``bnnkit demo`` (no download needed).

40 points of ``y = sin(2.5 x) + 0.4 x + N(0, 0.12^2)`` with ``x`` drawn uniformly from
``[-2, -0.6]`` and ``[0.6, 2]``: a gap in the middle and open ends, so a good posterior shows
wider bands between and beyond the data.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

TOY1D_PATH = Path(__file__).with_name("toy1d.csv")
TOY1D_NOISE = 0.12


def toy1d_function(x: Tensor) -> Tensor:
    """The noiseless function behind the toy data."""
    return torch.sin(2.5 * x) + 0.4 * x


def load_toy1d(dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
    """Inputs ``[40, 1]`` and targets ``[40]`` of the embedded 1-D data set."""
    rows = [
        line.split(",")
        for line in TOY1D_PATH.read_text().splitlines()
        if line and not line.startswith(("#", "x"))
    ]
    x = torch.tensor([float(r[0]) for r in rows], dtype=dtype).unsqueeze(-1)
    y = torch.tensor([float(r[1]) for r in rows], dtype=dtype)
    return x, y
