"""Classic samplers: rejection, importance, random-walk MH, Metropolis-within-Gibbs, HMC, NUTS."""

from .hmc import HMC
from .nuts import NUTS
from .rwmh import RandomWalkMH

__all__ = ["HMC", "NUTS", "RandomWalkMH"]
