"""KL divergences between the mean-field Gaussian and the prior.

Closed form for a Gaussian prior ``N(0, s_i^2)``::

    KL(q || p) = sum_i [ log(s_i / sigma_i) + (sigma_i^2 + mu_i^2) / (2 s_i^2) - 1/2 ]

Monte Carlo otherwise (scale mixture, Laplace): ``KL ~ mean_k [log q(w_k) - log p(w_k)]`` with
``w_k ~ q`` reparameterised, so it is differentiable in ``(mu, rho)``.
"""

from __future__ import annotations

import torch
from torch import Tensor


def gaussian_kl(mu: Tensor, sigma: Tensor, prior_scale: Tensor) -> Tensor:
    """Closed-form ``KL(N(mu, sigma^2) || N(0, prior_scale^2))`` summed over elements."""
    ratio = sigma / prior_scale
    return (-torch.log(ratio) + 0.5 * (ratio * ratio + (mu / prior_scale) ** 2) - 0.5).sum()


def monte_carlo_kl(log_q: Tensor, log_p: Tensor) -> Tensor:
    """MC estimate from log densities of the same draws ``w_k ~ q``: ``mean_k(log q - log p)``."""
    return (log_q - log_p).mean()
