"""The methods the benchmarks compare, in one table: name -> family, and the SG-MCMC algorithms.

Families:

* ``"default"``: :func:`bnnkit.fit`'s default sampler recipe, called as a user calls it;
* ``"sg"``: SG-MCMC with a Gaussian weight prior (SGLD, cyclical pSGLD, SGHMC);
* ``"adaptive"``: scale-adapted SGHMC (one step for every set: no N scaling, no tuning);
* ``"fsg"``: functional SG-MCMC with the fitted GP prior (fSGLD, fSGHMC);
* ``"nuts"``: full-batch NUTS (UCI only);
* ``"vi"``: the variational and optimisation baselines (BBB, FBNN, MC dropout, deep ensemble);
* ``"laplace"``: the Laplace approximation around a MAP (:class:`~bnnkit.Laplace`), GLM predictive;
* ``"greedy"``: epsilon-greedy agents (the bandit only).

Which methods a benchmark offers, and in what order, stays with the benchmark (``METHODS`` of
:mod:`~bnnkit.bench.uci`, :mod:`~bnnkit.bench.image` and :mod:`~bnnkit.bench.bandit`; the bandit's
order also seeds its agents); so do the VI baselines' settings, which differ from one benchmark to
the next.
"""

from __future__ import annotations

from typing import Any

FAMILY: dict[str, str] = {
    "default": "default",  # bnnkit.fit's default recipe (bnnkit.api.recipe), exactly as a user gets it
    "sgld": "sg",
    "csgld": "sg",  # cyclical pSGLD (the UCI bench's protocol 7)
    "sghmc": "sg",
    "asghmc": "adaptive",
    "fsgld": "fsg",
    "fsghmc": "fsg",
    "nuts": "nuts",
    "bbb": "vi",
    "fbnn": "vi",
    "mcdropout": "vi",
    "ensemble": "vi",
    "laplace": "laplace",
    "greedy0": "greedy",
    "greedy1": "greedy",
    "greedy5": "greedy",
}
# The SG-MCMC methods with a momentum (SGHMC dynamics): they take a friction, and their step ``eps``
# enters as ``eps^2`` (a learning rate), where SGLD's is a learning rate itself.
MOMENTUM = frozenset({"sghmc", "fsghmc"})
# The methods that use the fitted GP prior (a FunctionalPosterior).
GP_PRIOR = frozenset({"fsgld", "fsghmc", "fbnn"})


def family(method: str) -> str | None:
    """The family of ``method`` (see the module docstring); None for a name not in the table."""
    return FAMILY.get(method)


def is_sg(method: str) -> bool:
    """Whether ``method`` is an SG-MCMC method (weight-space or functional)."""
    return FAMILY.get(method) in ("sg", "fsg")


def methods_of(*families: str) -> tuple[str, ...]:
    """The names of the ``families``' methods, in the table's order."""
    return tuple(m for m, f in FAMILY.items() if f in families)


def sg_algorithm(method: str) -> Any:
    """The SG-MCMC algorithm class of ``method``: SGLD, SGHMC, FSGLD or FSGHMC."""
    from ..functional import FSGHMC, FSGLD
    from ..sgmcmc import SGHMC, SGLD

    return {"sgld": SGLD, "sghmc": SGHMC, "fsgld": FSGLD, "fsghmc": FSGHMC}[method]


__all__ = ["FAMILY", "GP_PRIOR", "MOMENTUM", "family", "is_sg", "methods_of", "sg_algorithm"]
