"""Observation models p(y | f(x; w)): Gaussian, Bernoulli (logits), Categorical (logits)."""

from .base import Likelihood
from .bernoulli import Bernoulli
from .categorical import Categorical
from .gaussian import Gaussian

__all__ = ["Likelihood", "Gaussian", "Bernoulli", "Categorical"]
