"""Mean-field Gaussian ``q(w) = N(mu, diag(sigma^2))`` with ``sigma = softplus(rho)``.

Initialisation that trains well (documented choice): ``mu`` starts at the module's own
initialisation (PyTorch's Kaiming-uniform for Linear/Conv layers, so activations start at a sane
scale) and ``rho`` at ``softplus^-1(init_sigma)`` with ``init_sigma = 1e-3``: the network starts
almost deterministic, the data term shapes ``mu`` first and the KL term then grows ``sigma``
(Blundell et al. 2015 use a similarly small initial sigma).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from ..core.errors import BnnkitError, check_positive
from ..core.posterior import Posterior


def inverse_softplus(x: float) -> float:
    return x + math.log(-math.expm1(-x))


class MeanFieldGaussian:
    """Variational parameters over the flat vector of ``posterior.view`` (network weights only)."""

    def __init__(self, posterior: Posterior, init_sigma: float = 1e-3, mu: Tensor | None = None):
        check_positive("init_sigma", init_sigma, "Use a small value such as 1e-3.")
        if posterior.initial_extras:
            raise BnnkitError(
                "Bayes by Backprop covers the network weights only; this posterior also samples "
                f"{', '.join(posterior.initial_extras)}. Use a fixed noise (learn_noise=False) and a fixed prior scale."
            )
        x0 = posterior.initial_position("module") if mu is None else mu
        self.mu = x0.detach().clone().requires_grad_(True)
        self.rho = torch.full_like(self.mu, inverse_softplus(init_sigma)).requires_grad_(True)

    @classmethod
    def from_params(cls, mu: Tensor, rho: Tensor) -> MeanFieldGaussian:
        """A ``q`` over given tensors ``mu`` and ``rho`` (used as they are, not copied)."""
        q = cls.__new__(cls)
        q.mu, q.rho = mu, rho
        return q

    @property
    def sigma(self) -> Tensor:
        return F.softplus(self.rho)

    def parameters(self) -> list[Tensor]:
        return [self.mu, self.rho]

    def sample(self, num: int, gen: torch.Generator) -> Tensor:
        """``num`` draws ``[num, D]`` (no gradient)."""
        with torch.no_grad():
            eps = torch.randn((num, self.mu.numel()), generator=gen, dtype=self.mu.dtype)
            return self.mu + self.sigma * eps

    def log_prob(self, w: Tensor) -> Tensor:
        sigma = self.sigma
        z = (w - self.mu) / sigma
        return (-0.5 * z * z - torch.log(sigma) - 0.5 * math.log(2 * math.pi)).sum(-1)
