"""Classic samplers: rejection, importance, random-walk MH, Metropolis-within-Gibbs, HMC, NUTS,
and the unadjusted Langevin algorithm (full-batch reference for SGLD)."""

from .gibbs import MetropolisWithinGibbs
from .hmc import HMC
from .importance import ImportanceSampler, importance_summary
from .langevin import ULA
from .metropolis import DiscreteUniformProposal, MetropolisHastings
from .nuts import NUTS
from .proposals import GaussianProposal, PriorProposal
from .rejection import RejectionSampler
from .rwmh import RandomWalkMH

__all__ = [
    "HMC",
    "NUTS",
    "ULA",
    "RandomWalkMH",
    "MetropolisHastings",
    "DiscreteUniformProposal",
    "MetropolisWithinGibbs",
    "RejectionSampler",
    "ImportanceSampler",
    "importance_summary",
    "GaussianProposal",
    "PriorProposal",
]
