"""The GP fit behind the fitted baselines' noise, the functional priors and the default recipe's
``noise="gp"``: an RBF (or other) GP fitted by marginal likelihood to a subset of the rows.  Its
own module so that :mod:`bnnkit.api.recipe` and :mod:`bnnkit.api.methods` both use it without
importing each other."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

NOISE_FLOOR = 0.01  # the fitted baselines' fixed noise sd is never below this (standardised units)


def fitted_gp(
    x: Tensor,
    y: Tensor,
    seed: int,
    *,
    kernel: str = "rbf",
    max_points: int = 1000,
    steps: int = 300,
    progress: bool = False,
) -> tuple[Any, dict]:
    """A GP (``kernel``, default RBF) fitted by marginal likelihood (``steps`` Adam steps) to at
    most ``max_points`` of the rows ``(x, y)`` (flattened; seeded by ``seed``); and the fit's
    report.  The fitted baselines' noise (:func:`gp_noise`) and the functional priors come from it."""
    from ..functional import GPPrior

    n = int(x.shape[0])
    gp = GPPrior(kernel, input_dim=int(math.prod(x.shape[1:])))
    fitted = gp.fit(x.reshape(n, -1).cpu(), y.cpu(), num_steps=steps, max_points=max_points,
                    generator=torch.Generator().manual_seed(seed), progress=progress)  # fmt: skip
    return gp, fitted


def gp_noise(fitted: dict) -> float:
    """The fitted baselines' noise sd from a GP fit: its noise, floored at ``NOISE_FLOOR``."""
    return max(math.sqrt(fitted["noise_variance"]), NOISE_FLOOR)
