"""One call from a module and data to a posterior: :func:`fit` returns a :class:`Fit` (predictive
in your units, metrics, diagnostics, plots, ``save``), :func:`load` reads a saved one back, and
:data:`DEFAULT_RECIPE` is the sampler recipe the call and the benchmarks run by default."""

from .fit import fit
from .methods import METHODS
from .recipe import DEFAULT_RECIPE, SamplerRecipe
from .result import Fit, from_state_dict, load

__all__ = ["fit", "load", "from_state_dict", "Fit", "METHODS", "DEFAULT_RECIPE", "SamplerRecipe"]
