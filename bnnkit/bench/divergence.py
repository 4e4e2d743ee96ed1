"""A diverging chain is a diverged benchmark cell, not an error: the sweeps run settings some of
which are meant to fail, and their tables count diverged cells apart."""

from __future__ import annotations

from typing import Any

import torch

from ..core.driver import sample
from ..core.errors import DivergenceError
from ..core.samples import Samples


def sample_or_diverged(algorithm: Any, posterior: Any, data: Any, **kwargs: Any) -> Samples:
    """``sample(...)``, or NaN draws of the requested shape when every chain diverged."""
    try:
        return sample(algorithm, posterior, data, **kwargs)
    except DivergenceError as err:
        view = posterior.view
        shape = (int(kwargs.get("num_chains", 1)), int(kwargs.get("num_samples", 1000)), int(view.size))
        nan = torch.full(shape, float("nan"), dtype=view.dtype)
        stats = {"log_density": torch.full(shape[:2], float("nan"), dtype=torch.float64)}
        return Samples(nan, stats, view, {"diverged": str(err)})
