"""The Laplace approximation: a Gaussian around the MAP, curvature by curvlinops.

``Laplace(posterior, subset, structure, curvature).fit(data)`` then ``.optimize_marglik()``,
``.predict(X)`` (linearised) or ``.sample(n)`` (a :class:`~bnnkit.Samples`); ``fit_laplace`` does
all three in one call.
"""

from .fit import fit_laplace
from .posterior import Laplace
from .predictive import GLMRegressionPredictive

__all__ = ["Laplace", "fit_laplace", "GLMRegressionPredictive"]
