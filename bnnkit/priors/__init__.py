"""Weight priors: isotropic/per-layer Gaussian, Blundell et al.'s scale mixture, Laplace."""

from .base import BoundPrior, Prior
from .gaussian import GaussianPrior
from .laplace import LaplacePrior
from .scale_mixture import ScaleMixturePrior

__all__ = ["Prior", "BoundPrior", "GaussianPrior", "ScaleMixturePrior", "LaplacePrior"]
