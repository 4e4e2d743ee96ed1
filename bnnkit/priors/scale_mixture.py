"""Scale mixture of two zero-mean Gaussians (Blundell et al. 2015, "Bayes by Backprop").

``p(w_i) = pi N(w_i; 0, sigma1^2) + (1 - pi) N(w_i; 0, sigma2^2)``, with ``sigma1 > sigma2``
typically and ``sigma2 << 1`` giving a spike-and-slab-like shape.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_positive
from ..core.flat import FlatView
from .base import BoundPrior, Prior

LOG_2PI = math.log(2 * math.pi)


class ScaleMixturePrior(Prior):
    kind = "scale_mixture"

    def __init__(self, pi: float = 0.5, sigma1: float = 1.0, sigma2: float = math.exp(-6)):
        if not 0.0 < pi < 1.0:
            raise BnnkitError(f"mixture weight pi must lie in (0, 1), got {pi!r}.")
        check_positive("sigma1 of the scale-mixture prior", sigma1)
        check_positive("sigma2 of the scale-mixture prior", sigma2)
        self.pi, self.sigma1, self.sigma2 = float(pi), float(sigma1), float(sigma2)

    def bind(self, view: FlatView) -> BoundPrior:
        log_w1 = math.log(self.pi) - math.log(self.sigma1) - 0.5 * LOG_2PI
        log_w2 = math.log(1 - self.pi) - math.log(self.sigma2) - 0.5 * LOG_2PI
        c1, c2 = 0.5 / self.sigma1**2, 0.5 / self.sigma2**2

        def log_prob(w: Tensor, extra: dict[str, Tensor]) -> Tensor:
            w2 = w * w
            return torch.logaddexp(log_w1 - c1 * w2, log_w2 - c2 * w2).sum()

        def sample(gen: torch.Generator) -> Tensor:
            kw = dict(dtype=view.dtype, device=view.device)
            pick = torch.rand(view.size, generator=gen, **kw) < self.pi
            z = torch.randn(view.size, generator=gen, **kw)
            return z * torch.where(pick, self.sigma1, self.sigma2)

        return BoundPrior(log_prob, sample)

    def config(self) -> dict:
        return {"kind": self.kind, "pi": self.pi, "sigma1": self.sigma1, "sigma2": self.sigma2}
