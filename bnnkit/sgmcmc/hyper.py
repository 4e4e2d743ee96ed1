"""Gibbs draws of conjugate hyperparameters inside the SG-MCMC samplers (``gibbs_every=k``).

A :class:`~bnnkit.Posterior` with ``Gaussian(noise, learn_noise=True, precision_prior=(a, b))``
and/or ``GaussianPrior(scale, learn_precision=True, precision_prior=(a', b'))`` samples the
log-precisions as extra coordinates of the flat position, moved by the gradient like the weights.
Their conditionals given the weights ``w`` are Gamma, and the target exposes exact draws of them
(``Target.conjugate_updates``).  With ``gibbs_every=k``, SGLD, SGHMC (and their cyclical variants)
and pSGLD first replace those coordinates, at every step ``t`` with ``t % k == 0``, by a draw
given the current weights and the step's minibatch ``B`` of ``M`` of the ``N`` rows, then take
their usual gradient step on all coordinates:

- noise precision ``tau`` (``n_B`` target entries in the batch, ``SSR_B`` their residual sum of
  squares, ``s = N/M``; ``s = 1`` for a full batch or ``num_data=None``)::

      tau ~ Gamma(a + s n_B / 2,  b + s SSR_B / 2)        (shape, rate)

  for scalar outputs ``s n_B = N``: the exact conditional ``Gamma(a + N/2, b + SSR/2)`` with the
  full-data SSR replaced by its unbiased minibatch estimate (the stochastic Gibbs step of Chen,
  Fox & Guestrin 2014, who resample hyperparameters every ~100 steps; Springenberg et al. 2016);
- prior precision ``lambda`` over the ``d`` weights with base scales ``s_i``::

      lambda ~ Gamma(a' + d/2,  b' + 1/2 sum_i w_i^2 / s_i^2)

  which uses no data and is exact with minibatches too.

Why the composition samples the posterior: a Gibbs draw of the hyperparameters ``h`` from
``pi(h | w)`` leaves ``pi(w, h)`` exactly invariant (``pi K_G = pi``).  The SG kernel leaves a
nearby ``pi_eps`` invariant, ``pi K_SG = pi + O(eps)`` (discretisation and gradient noise).
Since ``pi K_G = pi``, one period ``K_G K_SG^k`` moves ``pi`` exactly as far as ``K_SG^k``
alone, ``pi K_G K_SG^k - pi = pi K_SG^k - pi``: the composition adds no error of its own and
keeps the SG kernel's, while the Gibbs draw speeds up the mixing of ``h``.  For SGHMC the
extended target ``pi(x) N(r; 0, m T)`` makes the momentum independent of the position, so the
Gibbs draw of ``h`` given ``(w, r)`` is again ``pi(h | w)``; the momentum of ``h`` is then set to
0 (the old momentum belonged to the old value; a step that also resamples the momentum,
``resample_momentum_every``, draws it afresh instead).  Zero is not a draw from ``N(0, m T)``,
so this reset is not itself invariant: the friction re-equilibrates it within ``~m / (eps C)``
steps, short against ``k`` for the usual settings.  pSGLD keeps its preconditioner (a gradient
history, not a function of the position).

The schedule is a function of the step counter in the sampler's state, so a resumed run makes
the same draws.  Chains run one at a time: a ``chain_method="vectorized"`` target carries no
conjugate updates, so the samplers with ``gibbs_every`` report themselves not vectorisable.
Under ``bnnkit.distributed.data_parallel`` the noise-precision draw needs the whole data set and
raises at its first use; data_parallel keeps the prior-precision draw (weights only; untested here).

Two caveats:

- with a minibatch the rate is random, so the draw comes from a mixture of Gammas over batches,
  not from the conditional.  To first order (Gaussian residuals) the relative variance of the
  drawn ``tau`` is ``2/M`` instead of ``2/N``, i.e. inflated ``N/M``-fold, and its mean is high
  by a factor ``~1 + 2 (N - M) / (N M)`` (Jensen); the noise sd ``tau^-1/2`` is hit ~8x less in
  its mean.  Between draws the gradient dynamics relax ``tau`` towards the SG kernel's own
  stationary law, so a larger ``k`` dilutes this and ``M -> N`` removes it (full batch: exact);
- temperature: the draws are of the ``T = 1`` conditionals, so ``gibbs_every`` needs ``T = 1``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least
from ..core.target import ConjugateUpdate, Target
from ..core.types import Batch
from .schedules import Schedule

HYPER_PREFIXES = ("likelihood.", "prior.")  # names of a Posterior's sampled hyperparameters


class HyperBlock(NamedTuple):
    name: str
    index: slice  # its coordinates in the flat position
    update: ConjugateUpdate


class HyperGibbs(NamedTuple):
    """The Gibbs schedule of one built kernel: draw ``blocks`` at steps ``t % every == 0``."""

    every: int
    blocks: tuple[HyperBlock, ...]

    def due(self, t: int) -> bool:
        return t % self.every == 0


GIBBS_NOT_VECTORIZABLE = "gibbs_every draws the hyperparameters with the target's per-chain conjugate updates"


class GibbsChains:
    """For an elementwise sampler with ``gibbs_every``: it runs on stacked chains ``[K, D]``
    unchanged, but a vectorised target carries no conjugate updates, so the Gibbs draws need one
    chain at a time."""

    gibbs_every: int | None

    @property
    def vectorizable(self) -> bool:
        return self.gibbs_every is None

    @property
    def not_vectorizable_because(self) -> str:
        return GIBBS_NOT_VECTORIZABLE


def check_gibbs_every(gibbs_every: int | None, temperature: float) -> None:
    """Validate the option when the sampler is configured."""
    if gibbs_every is None:
        return
    check_int_at_least("gibbs_every", gibbs_every, 1)
    if temperature != 1.0:
        raise BnnkitError(
            f"gibbs_every draws the hyperparameters from their T = 1 conditionals, but temperature={temperature} "
            "targets the tempered posterior p^(1/T). Use temperature=1.0 with gibbs_every, or drop gibbs_every "
            "and let the gradient move the hyperparameters."
        )


def hyper_gibbs(target: Target, gibbs_every: int | None, sampler: str) -> HyperGibbs | None:
    """The Gibbs schedule for ``target``, or None when ``gibbs_every`` is None.

    Raises :class:`BnnkitError` when ``gibbs_every`` is set but the target has no conjugate
    updates, saying which option turns them on.
    """
    if gibbs_every is None:
        return None
    conj = target.conjugate_updates
    if not conj:
        hyper = [n for n in target.view.names if n.startswith(HYPER_PREFIXES)]
        if hyper:
            raise BnnkitError(
                f"{sampler}(gibbs_every={gibbs_every}): the hyperparameters {', '.join(hyper)} are sampled but "
                "this target has no conjugate Gibbs update for them (only a Gamma prior on a Gaussian "
                "precision has one; a chain_method='vectorized' target also drops them). They already move "
                "with the gradient: drop gibbs_every, or run the chains with chain_method='sequential'."
            )
        raise BnnkitError(
            f"{sampler}(gibbs_every={gibbs_every}) Gibbs-samples conjugate hyperparameters, and this model has "
            "none: turn on bnnkit.Gaussian(noise, learn_noise=True, precision_prior=(a, b)) for the noise "
            "precision and/or bnnkit.GaussianPrior(scale, learn_precision=True, precision_prior=(a, b)) for "
            "the prior precision, or drop gibbs_every."
        )
    blocks = tuple(HyperBlock(name, target.view.slice(name), fn) for name, fn in conj.items())
    return HyperGibbs(gibbs_every, blocks)


def gibbs_hyper(x: Tensor, batch: Batch, gen: torch.Generator, blocks: Sequence[HyperBlock]) -> Tensor:
    """A copy of the position ``x`` with each block replaced, in order, by its conjugate draw
    given the rest of ``x`` and ``batch`` (random numbers from ``gen``).  ``x`` is not modified."""
    if x.ndim != 1:
        raise BnnkitError(
            "gibbs_every updates one chain's position at a time; run the chains with chain_method='sequential'."
        )
    x = x.clone()
    with torch.no_grad():
        for blk in blocks:
            x[blk.index] = blk.update(x, batch, gen).to(x).reshape(-1)
    return x


def start_step(
    state: Any, schedule: Schedule, gibbs: HyperGibbs | None, batch: Batch, gen: torch.Generator
) -> tuple[int, float, bool, Tensor]:
    """Where a scheduled SG-MCMC step starts: its counter ``t``, step size and noise flag, and the
    position, whose conjugate hyperparameters are first drawn by Gibbs where a draw is due."""
    t = int(state.iteration)
    x = state.position
    if gibbs is not None and gibbs.due(t):
        x = gibbs_hyper(x, batch, gen, gibbs.blocks)
    return t, schedule(t), schedule.sampling(t), x


def zero_blocks(v: Tensor, blocks: Sequence[HyperBlock]) -> Tensor:
    """A copy of ``v`` (e.g. a momentum) with the blocks' coordinates set to 0."""
    v = v.clone()
    for blk in blocks:
        v[blk.index] = 0.0
    return v
