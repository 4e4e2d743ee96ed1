"""Prior interface: :class:`Prior`, :class:`BoundPrior` and :func:`scale_vector`, defined in
:mod:`bnnkit.core.prior_base`.

They live in ``core`` (the bottom layer, which :class:`~bnnkit.Posterior` builds on) and are
re-exported here, so ``from bnnkit.priors.base import Prior`` keeps working.
"""

from __future__ import annotations

from ..core.prior_base import BoundPrior, Prior, scale_vector

__all__ = ["BoundPrior", "Prior", "scale_vector"]
