"""Small helpers shared by the Metropolis-type samplers."""

from __future__ import annotations

import torch
from torch import Tensor


def metropolis_accept(log_alpha: Tensor, gen: torch.Generator) -> tuple[Tensor, Tensor]:
    """Accept with probability ``min(1, exp(log_alpha))``; NaN counts as rejection.

    Returns ``(accept_prob, is_accepted)`` shaped like ``log_alpha`` (0-d for one chain, ``[K]``
    for stacked chains, each with its own uniform draw).
    """
    accept_prob = accept_probability(log_alpha.detach())
    u = torch.rand(log_alpha.shape, generator=gen, dtype=accept_prob.dtype, device=accept_prob.device)
    return accept_prob, u < accept_prob


def accept_probability(log_alpha: Tensor) -> Tensor:
    """``min(1, exp(log_alpha))``, NaN counted as 0 (plain tensor code: the fused HMC's compiled
    transition compares it with a uniform drawn ahead)."""
    return torch.clamp(torch.nan_to_num(log_alpha, nan=-torch.inf), max=0.0).exp()


def normal(like: Tensor, gen: torch.Generator) -> Tensor:
    """Standard normal draw shaped like ``like`` from ``gen``."""
    return torch.randn(like.shape, generator=gen, dtype=like.dtype, device=like.device)
