"""The methods the image and bandit benchmarks compare, in one table: name -> family, and the
SG-MCMC algorithms.  (The UCI bench runs :func:`bnnkit.fit`'s methods, :data:`bnnkit.api.METHODS`.)

Families:

* ``"sg"``: SG-MCMC with a Gaussian weight prior (SGLD, SGHMC);
* ``"adaptive"``: scale-adapted SGHMC (one step for every set: no N scaling, no tuning);
* ``"fsg"``: functional SG-MCMC with the fitted GP prior (fSGLD, fSGHMC);
* ``"vi"``: the variational and optimisation baselines (BBB, FBNN, MC dropout, deep ensemble);
* ``"laplace"``: the Laplace approximation around a MAP (:class:`~bnnkit.Laplace`), GLM predictive;
* ``"greedy"``: epsilon-greedy agents (the bandit only).

Which methods a benchmark offers, and in what order, stays with the benchmark (``METHODS`` of
:mod:`~bnnkit.bench.image` and :mod:`~bnnkit.bench.bandit`; the bandit's order also seeds its
agents); so do the VI baselines' settings, which differ from one benchmark to the next.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..core.errors import BnnkitError

FAMILY: dict[str, str] = {
    "sgld": "sg",
    "sghmc": "sg",
    "asghmc": "adaptive",
    "fsgld": "fsg",
    "fsghmc": "fsg",
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


def canonical_methods(methods: Iterable[str], known: Sequence[str]) -> list[str]:
    """``methods`` with repeats dropped; a name not in ``known`` is refused."""
    out: list[str] = []
    for m in methods:
        if m not in known:
            raise BnnkitError(f"unknown method {m!r}; choose from {', '.join(known)}.")
        if m not in out:
            out.append(m)
    return out


def sg_algorithm(method: str) -> Any:
    """The SG-MCMC algorithm class of ``method``: SGLD, SGHMC, FSGLD or FSGHMC."""
    from ..functional import FSGHMC, FSGLD
    from ..sgmcmc import SGHMC, SGLD

    return {"sgld": SGLD, "sghmc": SGHMC, "fsgld": FSGLD, "fsghmc": FSGHMC}[method]


__all__ = ["FAMILY", "GP_PRIOR", "MOMENTUM", "canonical_methods", "family", "sg_algorithm"]
