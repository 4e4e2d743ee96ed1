"""Functional SG-MCMC: fSGLD and fSGHMC (Wu, Xuan & Lu 2025).

Both are the weight-space SG-MCMC updates driven by the functional gradient estimate of a
:class:`~bnnkit.functional.FunctionalPosterior` (``docs/fsgmcmc_design.md``, E5), with fresh
measurement points ``X_M`` drawn from the chain's generator at every step::

    g_t = (N/n) sum_{i in B} grad log p(y_i | f(x_i; w_t)) - J_M(w_t)^T K^-1 (f_M(w_t) - m(X_M))

fSGLD (bnnkit convention, the same as :class:`~bnnkit.SGLD`, Welling & Teh)::

    w_{t+1} = w_t + (eps_t / 2) g_t + sqrt(eps_t T) xi_t

which is E6 of ``docs/fsgmcmc_design.md``, ``w + e g + sqrt(2 e) xi``, with ``e = eps / 2``.

fSGHMC (as :class:`~bnnkit.SGHMC`; E7-E8 of the design document is its learning-rate form with
``lr = eps^2``, ``momentum_decay = eps C``, see :meth:`~bnnkit.SGHMC.from_learning_rate`)::

    r_{t+1} = r_t + eps g_t - eps C r_t / m + N(0, 2 eps (C - B) T)
    w_{t+1} = w_t + eps r_{t+1} / m

Schedules, cyclical stages, temperature and momentum resampling (Algorithm 2 of the paper:
``resample_momentum_every=L``) carry over unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..core.errors import BnnkitError
from ..core.target import Target
from ..core.types import Kernel
from ..sgmcmc.sghmc import SGHMC
from ..sgmcmc.sgld import SGLD


def _require_functional(target: Target, name: str) -> None:
    if target.stochastic_grad is None:
        raise BnnkitError(
            f"{name} needs a functional posterior: build bnnkit.functional.FunctionalPosterior(module, "
            "likelihood, gp_prior, measurement_points, train_inputs) and sample that. For a weight-space "
            f"prior use {name[1:]} instead."
        )


class _FunctionalOnly:
    """An SG-MCMC algorithm that samples only a functional posterior (its ``label`` in the error)."""

    label: ClassVar[str]

    def build(self, target: Target) -> Kernel:
        _require_functional(target, self.label)
        return super().build(target)  # type: ignore[misc]


@dataclass(frozen=True)
class FSGLD(_FunctionalOnly, SGLD):
    """fSGLD: SGLD on a :class:`~bnnkit.functional.FunctionalPosterior` (see module docstring)."""

    label: ClassVar[str] = "fSGLD"
    name: str = "fsgld"


@dataclass(frozen=True)
class FSGHMC(_FunctionalOnly, SGHMC):
    """fSGHMC: SGHMC on a :class:`~bnnkit.functional.FunctionalPosterior` (see module docstring)."""

    label: ClassVar[str] = "fSGHMC"
    name: str = "fsghmc"
