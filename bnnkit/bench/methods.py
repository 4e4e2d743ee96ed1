"""The method groups that the image and bandit benchmarks share, and their SG-MCMC algorithms.  Each
benchmark keeps its own list of methods (its ``METHODS``; the bandit's order seeds its agents) and
its VI baselines' settings; the UCI bench runs :func:`bnnkit.fit`'s methods."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..core.errors import BnnkitError

SG = frozenset({"sgld", "sghmc"})  # SG-MCMC with a Gaussian weight prior
FSG = frozenset({"fsgld", "fsghmc"})  # functional SG-MCMC with the fitted GP prior
# The SG-MCMC methods with a momentum (SGHMC dynamics): they take a friction, and their step ``eps``
# enters as ``eps^2`` (a learning rate), where SGLD's is a learning rate itself.
MOMENTUM = frozenset({"sghmc", "fsghmc"})
GP_PRIOR = FSG | {"fbnn"}  # the methods that use the fitted GP prior (a FunctionalPosterior)


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
