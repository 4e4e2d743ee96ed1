"""Stochastic-gradient MCMC: SGLD, SGHMC, their cyclical variants, preconditioned SGLD,
scale-adapted SGHMC.

All run through :func:`bnnkit.sample` with a minibatch stream as ``data``
(:class:`bnnkit.data.Minibatches`); the posterior scales each minibatch by ``N / M``.
"""

from .adaptive import AdaptiveSGHMC
from .fused import Fused, FusedKernel
from .psgld import PreconditionedSGLD
from .schedules import Constant, CosineCycle, PolynomialDecay
from .sghmc import SGHMC, CyclicalSGHMC
from .sgld import SGLD, CyclicalSGLD

__all__ = [
    "AdaptiveSGHMC",
    "Fused",
    "FusedKernel",
    "SGLD",
    "SGHMC",
    "CyclicalSGLD",
    "CyclicalSGHMC",
    "PreconditionedSGLD",
    "Constant",
    "PolynomialDecay",
    "CosineCycle",
]
