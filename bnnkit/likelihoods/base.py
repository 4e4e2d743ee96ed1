"""Likelihood interface: :class:`Likelihood`, defined in :mod:`bnnkit.core.likelihood_base`.

It lives in ``core`` (the bottom layer, which :class:`~bnnkit.Posterior` builds on) and is
re-exported here, so ``from bnnkit.likelihoods.base import Likelihood`` keeps working.
"""

from __future__ import annotations

from ..core.likelihood_base import Likelihood

__all__ = ["Likelihood"]
