"""Scale-adapted SGHMC (Springenberg, Klein, Falkner & Hutter 2016, "Bayesian optimization with
robust Bayesian neural networks", eqs. 8-10; the update of their reference code, pybnn's
``AdaptiveSGHMC``).

Notation: ``U(w) = -log p(w | D)``, ``grad U`` its minibatch estimate at ``w_t`` (bnnkit's
posterior already scales each minibatch by ``N / M``, so this is an estimate of the full-data
gradient), ``eps`` the step size, ``mdecay`` the momentum decay per step, ``T`` the temperature.
Everything is per coordinate (elementwise).

Warm-up (every step of the driver's ``num_warmup``; ``tau`` starts at 0, so the first step sets
``g_bar = grad U`` and ``V_hat = (grad U)^2``)::

    r      = 1 / (tau + 1)
    g_bar <- (1 - r) g_bar + r grad U                    (eq. 9, right)
    V_hat <- (1 - r) V_hat + r (grad U)^2                (eq. 8)
    tau   <- tau (1 - g_bar^2 / V_hat) + 1               (eq. 9, left)

Since ``g_bar^2 <= V_hat`` (Jensen: both are the same convex combination), ``tau >= 1`` after
the first step and ``r <= 1/2``: the estimates stay convex combinations and ``V_hat >= 0`` (the
factor ``1 - g_bar^2 / V_hat`` is clamped at 0 against rounding).  ``tau`` is an adaptive
averaging window: while the gradient keeps its sign (the transient,
``g_bar^2 ~ V_hat``) it stays near 1 and the estimates forget quickly; once the chain fluctuates
around the mode (``g_bar ~ 0``) it grows by one per step and ``V_hat`` becomes a plain running
mean.  (pybnn updates ``tau`` from the previous ``g_bar, V_hat``; here the new ones are used, a
one-step lag that does not matter.)  At the end of warm-up the estimates are frozen, so the
sampling phase is SGHMC with a fixed diagonal mass and a valid stationary distribution.

Every step (warm-up included), with ``M^-1 = 1 / sqrt(V_hat)``::

    v <- v - eps^2 M^-1 grad U - mdecay v + N(0, max(0, 2 eps^2 mdecay T M^-1 - eps^4))   (eq. 10)
    w <- w + v

This is Chen et al.'s SGHMC with mass ``M = sqrt(V_hat)``, time step ``eps``, velocity
``v = eps M^-1 r``, friction ``C = mdecay M / eps`` (so that ``eps M^-1 C = mdecay``) and the
gradient-noise estimate ``B_hat = eps V_hat / 2``: the injected variance
``2 eps^3 M^-1 (C T - B_hat) M^-1`` is the ``2 eps^2 mdecay T M^-1 - eps^4`` above.  The
``- eps^4`` term treats all of ``V_hat`` as minibatch noise (its variance ``eps^4 M^-1 Var(grad U)
M^-1 <= eps^4`` enters ``v`` through the gradient), which is the paper's and pybnn's choice and
right when minibatch noise dominates the gradient (BNNs).  With exact or nearly exact gradients
it removes noise that is not there: the stationary variance of a coordinate of precision
``lambda`` then falls short by about ``kappa / (2 mdecay)`` with ``kappa = eps^2 lambda /
sqrt(V_hat)``; pass ``noise_correction=False`` (``B_hat = 0``) for full-batch targets.  Where
the variance would be negative it is clipped at 0 and ``info.noise_clipped`` gives the fraction
of coordinates.

The correction also assumes the minibatch noise is white.  :class:`bnnkit.data.Minibatches` walks
shuffled epochs (rows without replacement), so the noise of one epoch sums to zero and has little
power at frequencies below one per epoch; when an epoch (``N / M`` steps) is not short against the
chain's oscillation period, the correction removes noise the gradient does not supply and the
chain runs cold.  Measured on conjugate linear regression (N = 100, M = 10, eps = 0.03): the
posterior variance came out at 0.45 of the exact one with the correction and within Monte-Carlo
error (0.94-1.11) without it; at N = 2000, M = 10, eps = 0.009 (every coordinate clipped) 0.4-0.5
with it and 1.2-1.5 without; with full batches 0.24 (eps 0.1) to 0.82 (eps 0.025).  So the
default is ``noise_correction=False`` (``B_hat = 0``, SGHMC's usual choice, exact as
``eps -> 0``); ``True`` gives the paper's update.

Parametrisation.  Springenberg et al. write the loss as the per-datum mean and multiply its
gradient by ``scale_grad = N``; that product is bnnkit's minibatch gradient as it is, so no
rescaling by ``N`` happens here: ``V_hat`` and the drift use the same full-data-scale gradient.
The drift ``M^-1 grad U = grad U / sqrt(V_hat)`` is then invariant to the scale of ``U`` (each
coordinate moves by about ``eps^2`` per step under the drift, at most ``eps^2 / mdecay`` per
step at terminal velocity), and the noise ``~ 1 / sqrt(V_hat)`` carries the scale that makes the
stationary law the posterior.  That is why one default ``eps = 1e-2`` (``lr = eps^2 = 1e-4``)
works across data-set sizes (UCI-sized BNNs: N ~ 500-10000, D ~ 1000-3000).  Dividing the
gradient by ``N`` for ``V_hat`` but not for the drift would instead make the preconditioner ``N``
times larger and the chain hotter by a factor ``N``.

On a Gaussian of precision ``lambda`` with exact gradients, ``V_hat -> lambda`` and the
per-coordinate ``kappa = eps^2 sqrt(lambda)``: the scheme is stable for ``kappa < 2 (2 -
mdecay)``, has stationary variance ``(1 / lambda)(1 + O(kappa))``, and its stiffness range is
the square root of the precision range (scales spanning 100x: ``kappa`` spans 100x, against
10^4x for unit-mass SGHMC).

Warm-up is the driver's (``bnnkit.sample(..., num_warmup=...)``; Springenberg et al. use a few
thousand steps).  Without warm-up the preconditioner is the squared gradient of the first step
alone, frozen.

Cyclical (Zhang et al. 2020's cSGHMC with this mass): ``step_size`` may be a schedule such as
:class:`~bnnkit.sgmcmc.CosineCycle`.  Step ``t`` then uses ``eps_t`` in place of ``eps`` above
(drift ``eps_t^2 M^-1 grad U``, noise variance ``2 eps_t^2 mdecay T M^-1 - eps_t^4``), the
momentum decay stays ``mdecay`` per step, and in the schedule's exploration stage no noise is
injected and no draw is kept: large early steps carry the chain out of its mode, the small late
ones sample around the next.  The mass is estimated in the warm-up (make it a whole cycle) and
again in every exploration stage, where no draws are kept, with the window ``tau`` capped at
``explore_window`` steps (it would otherwise have grown to a plain mean over every step so far and
not follow the kick); it is frozen in every sampling stage, so that each sampling stage is SGHMC
with a fixed mass fitted to the mode it samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_positive
from ..core.target import Target
from ..core.types import Adaptation, Batch, Kernel
from .common import COLLECT, VHAT_FLOOR, StepSizeTensors, check_temperature, normal
from .fused import FusedAlgorithm, FusedUpdate
from .hyper import GibbsChains, check_gibbs_every, gibbs_hyper, hyper_gibbs, zero_blocks
from .schedules import Constant, CosineCycle, PolynomialDecay, Schedule, as_schedule
from .updates import asghmc_noise, asghmc_update


class AdaptiveSGHMCState(NamedTuple):
    position: Tensor
    momentum: Tensor  # v (w <- w + v)
    grad_avg: Tensor  # g_bar, running mean of grad U
    square_avg: Tensor  # V_hat, running mean of (grad U)^2; M = sqrt(V_hat)
    window: Tensor  # tau (0 before the first step)
    adapting: Tensor  # 0-d bool: the step updates g_bar, V_hat, tau (warm-up)
    iteration: Tensor
    step_size: Tensor


class AdaptiveSGHMCInfo(NamedTuple):
    log_density: Tensor
    step_size: Tensor
    collect: Tensor
    noise_clipped: Tensor  # fraction of coordinates whose injected variance was clipped at 0


class AdaptiveSGHMCWarmup(NamedTuple):
    num_warmup: Tensor


_TRUE, _FALSE = torch.tensor(True), torch.tensor(False)


@dataclass(frozen=True)
class AdaptiveSGHMC(GibbsChains, FusedAlgorithm):
    """Scale-adapted SGHMC hyperparameters (see the module docstring for the update).

    Args:
        step_size: ``eps`` (the learning rate is ``eps^2``); 1e-2 is Springenberg et al.'s default.
            A schedule (:class:`~bnnkit.sgmcmc.CosineCycle` for cyclical SGHMC) gives ``eps_t``
            per step, with no noise and no draws where it explores.
        mdecay: momentum decay per step, in (0, 1]; 0.05 is the paper's.
        noise_correction: subtract ``eps^4`` (``B_hat = eps V_hat / 2``) from the injected
            variance, as the paper does; off by default (it ran cold in every bnnkit measurement,
            see the module docstring).
        temperature: ``T``; ``T < 1`` samples a cold posterior.
        gibbs_every: every this many steps first draw the conjugate hyperparameters (a learnt
            noise precision, learnt prior precisions) from their conditionals given the weights,
            as SGHMC's option does (:mod:`bnnkit.sgmcmc.hyper`); their momentum is set to 0.
            Their preconditioner estimate is left as it is.  Sequential chains only.
        explore_window: with a schedule that explores (a cyclical one), the mass is re-estimated in
            every exploration step with the averaging window ``tau`` capped at this many steps, so
            that it forgets the mode the chain left; no effect at a constant step.
    """

    step_size: float | Schedule = 1e-2
    mdecay: float = 0.05
    noise_correction: bool = False
    temperature: float = 1.0
    gibbs_every: int | None = None
    explore_window: int = 100
    name: str = "asghmc"

    def __post_init__(self) -> None:
        if not isinstance(self.step_size, Constant | PolynomialDecay | CosineCycle):
            if isinstance(self.step_size, bool) or not isinstance(self.step_size, int | float):
                raise BnnkitError(
                    "step_size must be one positive number (eps; the learning rate is eps^2) or a schedule "
                    f"(CosineCycle for cyclical SGHMC), got {self.step_size!r}."
                )
            check_positive("step_size", self.step_size, "Try 1e-2 (Springenberg et al.'s default).")
        if isinstance(self.mdecay, bool) or not isinstance(self.mdecay, int | float):
            raise BnnkitError(f"mdecay must be a number in (0, 1], got {self.mdecay!r}.")
        if not (math.isfinite(self.mdecay) and 0.0 < self.mdecay <= 1.0):
            raise BnnkitError(
                f"mdecay (momentum decay per step) must lie in (0, 1], got {self.mdecay!r}. Try 0.05."
            )
        if not isinstance(self.noise_correction, bool):
            raise BnnkitError(f"noise_correction must be True or False, got {self.noise_correction!r}.")
        check_temperature(self.temperature)
        check_gibbs_every(self.gibbs_every, self.temperature)
        if (
            isinstance(self.explore_window, bool)
            or not isinstance(self.explore_window, int)
            or self.explore_window < 1
        ):
            raise BnnkitError(
                f"explore_window must be a whole number of steps >= 1, got {self.explore_window!r}. Try 100."
            )

    @property
    def schedule(self) -> Schedule:
        """``eps_t`` as a schedule (a number is a constant one)."""
        return as_schedule(self.step_size)

    @property
    def sampling_fraction(self) -> float:
        return self.schedule.sampling_fraction

    def config(self) -> dict:
        # a number keeps the config it always had (runs written before schedules resume)
        step = (
            {"step_size": float(self.step_size)}
            if isinstance(self.step_size, int | float)
            else self.schedule.config()
        )
        cfg = {
            **step,
            "mdecay": float(self.mdecay),
            "noise_correction": self.noise_correction,
            "temperature": float(self.temperature),
        }
        if self.gibbs_every is not None:  # only then: configs (and resumable runs) are unchanged
            cfg["gibbs_every"] = self.gibbs_every
        if self.schedule.sampling_fraction < 1.0:  # it only acts where the schedule explores
            cfg["explore_window"] = self.explore_window
        return cfg

    def fused_update(self) -> FusedUpdate:
        """The update as :func:`~bnnkit.sgmcmc.fused.build_fused` runs it: the sampling phase (mass
        frozen) in blocks, warm-up step at a time."""
        if not isinstance(self.schedule, Constant):
            raise BnnkitError(
                f"the fused loop runs AdaptiveSGHMC at a constant step only, not {self.schedule!r}; run a "
                "scheduled (cyclical) one step at a time (bnnkit.sample without fused=)."
            )
        if self.gibbs_every is not None:
            raise BnnkitError(
                "the fused loop does not run AdaptiveSGHMC with gibbs_every (Gibbs hyperparameter draws); "
                "run it step at a time (bnnkit.sample without fused=)."
            )
        eps = float(self.step_size)
        return FusedUpdate(
            "asghmc",
            float(self.temperature),
            mdecay=float(self.mdecay),
            eps2=eps * eps,
            noise_correction=self.noise_correction,
        )

    def build(self, target: Target) -> Kernel:
        schedule = self.schedule
        a, temp = float(self.mdecay), float(self.temperature)
        noise_correction = self.noise_correction
        window_cap = float(self.explore_window) - 1.0  # r = 1 / (tau + 1) >= 1 / explore_window
        step_size_tensor = StepSizeTensors(schedule)
        eps = schedule(0)
        gibbs = hyper_gibbs(target, self.gibbs_every, type(self).__name__)

        def init(position: Tensor, batch: Batch) -> AdaptiveSGHMCState:
            x = position.detach().clone()
            return AdaptiveSGHMCState(
                x,
                torch.zeros_like(x),
                torch.zeros_like(x),
                torch.zeros_like(x),
                torch.zeros_like(x),
                _FALSE,
                torch.zeros((), dtype=torch.int64),
                step_size_tensor(eps, x.dtype),
            )

        def step(
            state: AdaptiveSGHMCState, batch: Batch, gen: torch.Generator
        ) -> tuple[AdaptiveSGHMCState, AdaptiveSGHMCInfo]:
            x, v = state.position, state.momentum
            if gibbs is not None and gibbs.due(int(state.iteration)):
                x = gibbs_hyper(x, batch, gen, gibbs.blocks)
                v = zero_blocks(v, gibbs.blocks)
            g_bar, v_hat, tau = state.grad_avg, state.square_avg, state.window
            t = int(state.iteration)
            eps = schedule(t)
            noisy = schedule.sampling(t)
            eps2 = eps * eps
            lp, g = target.estimate_grad(x, batch, gen)  # g = grad log p = -grad U
            # The first step always estimates (tau = 0: the estimates become g and g^2).
            # a cyclical schedule's exploration stage re-estimates them too, over a short window: the
            # mass of the old mode does not fit the gradients the kick meets (Boston split 0, eps
            # peak 0.035, no re-estimation: test RMSE 24; re-estimated over tau's full window, yacht
            # at peak 0.05 still blew up to RMSE 3.9, with a window of 100 steps 0.96, R-hat 1.05);
            # each sampling stage still runs with a fixed mass
            if t == 0 or bool(state.adapting) or not noisy:
                if not noisy and t > 0:  # forget the old mode within explore_window steps
                    tau = tau.clamp_max(window_cap)
                r = (tau + 1.0).reciprocal()
                g_bar = torch.lerp(g_bar, g, r)  # the sign of g_bar does not enter
                v_hat = torch.lerp(v_hat, g * g, r)
                # g_bar^2 <= V_hat (both are the same convex combination): clamp only rounding.
                tau = tau * (1.0 - g_bar.square() / v_hat.clamp_min(VHAT_FLOOR)).clamp_min(0.0) + 1.0
            inv_mass, noise_sd, clipped = asghmc_noise(v_hat, eps2, a, temp, noise_correction)
            xi = normal(x, gen) if noisy else None  # a cyclical schedule's exploration stage injects none
            x_new, v_new = asghmc_update(x, v, g, eps2, a, inv_mass, noise_sd, xi)
            eps_t = step_size_tensor(eps, x.dtype)
            new = AdaptiveSGHMCState(
                x_new, v_new, g_bar, v_hat, tau, state.adapting, state.iteration + 1, eps_t
            )
            return new, AdaptiveSGHMCInfo(lp, eps_t, COLLECT[noisy], clipped)

        def adapt_init(state: AdaptiveSGHMCState, num_warmup: int) -> AdaptiveSGHMCWarmup:
            return AdaptiveSGHMCWarmup(torch.tensor(num_warmup, dtype=torch.int64))

        def adapt_update(astate: AdaptiveSGHMCWarmup, state: AdaptiveSGHMCState, info):
            # Steps after the first estimate while warming up (the first always does).
            return astate, state._replace(adapting=_TRUE)

        def adapt_finalize(astate: AdaptiveSGHMCWarmup, state: AdaptiveSGHMCState) -> AdaptiveSGHMCState:
            return state._replace(adapting=_FALSE)  # freeze g_bar, V_hat, tau: fixed mass from here

        return Kernel(init, step, Adaptation(adapt_init, adapt_update, adapt_finalize))
