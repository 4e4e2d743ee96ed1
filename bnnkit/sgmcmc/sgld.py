"""Stochastic-gradient Langevin dynamics (Welling & Teh 2011).

With ``g_t`` the minibatch estimate of the log-posterior gradient,
``g_t = (N/M) sum_{i in batch} grad log p(y_i | x_i, w) + grad log p(w)``::

    w_{t+1} = w_t + (eps_t / 2) g_t + sqrt(eps_t * T) * xi_t,    xi_t ~ N(0, I)

``eps_t`` is a constant, a polynomially decaying ``a (b + t)^-gamma`` or a cyclical schedule
(:mod:`bnnkit.sgmcmc.schedules`); ``T`` is the temperature (``T < 1`` samples the cold posterior
``p^(1/T)``).  In the exploration stage of a cyclical schedule the noise is switched off.

Convention: the step size multiplies the *half* gradient, as in Welling & Teh; the functional
SG-MCMC design document (``docs/fsgmcmc_design.md``, E6) writes the same update as
``w + e g + sqrt(2 e) xi`` with ``e = eps / 2``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from ..core.errors import BnnkitError
from ..core.target import Target
from ..core.types import Batch, Kernel
from .common import COLLECT, SGInfo, StepSizeTensors, check_temperature, normal
from .fused import FusedAlgorithm, FusedUpdate
from .hyper import GibbsChains, check_gibbs_every, hyper_gibbs, start_step
from .schedules import CosineCycle, Schedule, as_schedule
from .updates import sgld_noise_scale, sgld_update


class SGLDState(NamedTuple):
    position: Tensor
    iteration: Tensor  # int64 step counter t (drives the step-size schedule)
    step_size: Tensor  # the last step size used (for the progress bar)


@dataclass(frozen=True)
class SGLD(GibbsChains, FusedAlgorithm):
    """SGLD hyperparameters: ``step_size`` (a number or a schedule) and ``temperature``.

    ``gibbs_every=k``: every ``k`` steps first draw the conjugate hyperparameters (a learnt noise
    or prior precision) from their Gibbs conditional given the weights and the step's minibatch
    (:mod:`bnnkit.sgmcmc.hyper`); ``None`` moves them with the gradient only.
    """

    step_size: float | Schedule = 1e-4
    temperature: float = 1.0
    name: str = "sgld"
    gibbs_every: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "step_size", as_schedule(self.step_size))
        check_temperature(self.temperature)
        check_gibbs_every(self.gibbs_every, self.temperature)

    @property
    def sampling_fraction(self) -> float:
        return self.step_size.sampling_fraction

    def config(self) -> dict:
        cfg = {**self.step_size.config(), "temperature": self.temperature}
        if self.gibbs_every is not None:
            cfg["gibbs_every"] = self.gibbs_every
        return cfg

    def fused_update(self) -> FusedUpdate:
        if self.gibbs_every is not None:
            raise BnnkitError(
                "the fused loop does not run SGLD with gibbs_every (Gibbs hyperparameter draws); run it "
                "step at a time (bnnkit.sample without fused=)."
            )
        return FusedUpdate("sgld", float(self.temperature))

    def build(self, target: Target) -> Kernel:
        schedule, temp = self.step_size, self.temperature
        gibbs = hyper_gibbs(target, self.gibbs_every, type(self).__name__)

        def init(position: Tensor, batch: Batch) -> SGLDState:
            return SGLDState(
                position.detach().clone(),
                torch.zeros((), dtype=torch.int64),
                torch.tensor(schedule(0), dtype=position.dtype),
            )

        step_size_tensor = StepSizeTensors(schedule)

        def step(state: SGLDState, batch: Batch, gen: torch.Generator) -> tuple[SGLDState, SGInfo]:
            _, eps, noisy, x = start_step(state, schedule, gibbs, batch, gen)
            lp, g = target.estimate_grad(x, batch, gen)
            xi = normal(x, gen) if noisy else None
            x = sgld_update(x, g, eps, sgld_noise_scale(eps, temp), xi)
            new = SGLDState(x, state.iteration + 1, step_size_tensor(eps, x.dtype))
            return new, SGInfo(lp, new.step_size, COLLECT[noisy])

        return Kernel(init, step)


def CyclicalSGLD(
    step_size: float,
    cycle_length: int,
    exploration: float = 0.8,
    temperature: float = 1.0,
    gibbs_every: int | None = None,
) -> SGLD:
    """cSGLD (Zhang et al. 2020): SGLD on a :class:`~bnnkit.sgmcmc.schedules.CosineCycle`."""
    return SGLD(
        CosineCycle(step_size, cycle_length, exploration), temperature, name="csgld", gibbs_every=gibbs_every
    )
