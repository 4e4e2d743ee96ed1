"""Random draws that take an explicit ``torch.Generator`` (reproducible per chain)."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor


def chain_seed(seed: int, chain: int) -> int:
    """Independent 63-bit seed for ``chain`` of a run seeded with ``seed`` (NumPy SeedSequence)."""
    return int(np.random.SeedSequence([int(seed), int(chain)]).generate_state(1, dtype=np.uint64)[0] >> 1)


def make_generator(seed: int, chain: int = 0, device: str | torch.device = "cpu") -> torch.Generator:
    return torch.Generator(device=device).manual_seed(chain_seed(seed, chain))


def gamma(shape: float | Tensor, rate: Tensor, gen: torch.Generator) -> Tensor:
    """Gamma(shape, rate) draw from an explicit generator (Marsaglia-Tsang, shape >= 1 boosted)."""
    shape = float(shape)
    boost = shape < 1.0
    k = shape + 1.0 if boost else shape
    d = k - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    while True:
        z = float(torch.randn((), generator=gen, dtype=torch.float64))
        v = (1.0 + c * z) ** 3
        if v <= 0:
            continue
        u = float(torch.rand((), generator=gen, dtype=torch.float64))
        if math.log(u) < 0.5 * z * z + d - d * v + d * math.log(v):
            g = d * v
            break
    if boost:
        u = float(torch.rand((), generator=gen, dtype=torch.float64))
        g *= u ** (1.0 / shape)
    return torch.as_tensor(g, dtype=torch.float64) / rate.double()
