"""Hamiltonian dynamics for HMC and NUTS, step at a time and fused: energy, leapfrog, HMC proposal.

With potential ``U(x) = -log pi(x)``, diagonal inverse mass ``M^-1`` and momentum ``p ~ N(0, M)``::

    H(x, p) = U(x) + K(p),    K(p) = p^T M^-1 p / 2

Every function here is plain tensor code: no generator (the momentum's normals and the jitter's
uniform come in as tensors, drawn by the caller from the chain's generator), no in-place update
of an input, and no host sync unless an eager caller asks for one (``stop``).  So the compiled
kernels of :mod:`~bnnkit.samplers.fused_hmc` and :mod:`~bnnkit.samplers.fused_nuts` trace the
same code that :class:`~bnnkit.samplers.HMC` and :class:`~bnnkit.samplers.NUTS` run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor

ValueAndGrad = Callable[[Tensor, object], tuple[Tensor, Tensor]]  # (x, batch) -> (log pi(x), grad)


def row_dot(a: Tensor, b: Tensor) -> Tensor:
    """Dot products over the last dimension (one per stacked chain or trajectory point)."""
    return (a * b).sum(-1)


def kinetic_energy(p: Tensor, inv_mass: Tensor, dot: Callable = row_dot) -> Tensor:
    """``K(p) = p^T M^-1 p / 2``, reduced with ``dot``.

    The recursive NUTS passes ``torch.dot`` (one BLAS call on a 1-D momentum): it rounds
    differently from :func:`row_dot`, and that sampler's draws are pinned bit for bit.
    """
    return 0.5 * dot(p * inv_mass, p)


def hamiltonian(log_density: Tensor, p: Tensor, inv_mass: Tensor, dot: Callable = row_dot) -> Tensor:
    """``H(x, p) = -log pi(x) + K(p)`` (:func:`kinetic_energy`)."""
    return -log_density + kinetic_energy(p, inv_mass, dot)


def leapfrog(
    value_and_grad: ValueAndGrad,
    x: Tensor,
    p: Tensor,
    g: Tensor,
    step: Tensor,
    inv_mass: Tensor,
    batch: object,
    num_steps: int = 1,
    stop: Callable[[Tensor], bool] | None = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor, int]:
    """``num_steps`` leapfrog steps of size ``e = step`` from ``(x, p)``, ``g = grad log pi(x)``::

        p <- p + (e/2) g                                           (once)
        x <- x + e M^-1 p;  g <- grad log pi(x);  p <- p + e g     (num_steps times, e/2 the last)

    with ``(log pi(x), grad log pi(x)) = value_and_grad(x, batch)``.

    A negative ``step`` integrates backwards in time (NUTS).  Between two steps the closing
    half-kick of one and the opening half-kick of the next are one full kick ``p + e g``: one
    rounding instead of two, as the HMC sampler has always integrated (its draws are pinned bit
    for bit).  ``x, p, g`` may be stacked chains ``[K, D]`` with ``step`` ``[K, 1]``.

    Returns ``(x, p, g, log_density, steps)``.  ``stop(log_density) -> bool``, for eager callers
    only (a Python bool is a host sync, which a compiled trace cannot hold), is asked after each
    gradient; when it says True the trajectory ends there, before that step's kick, and ``steps``
    counts the gradients evaluated.  Without it ``steps == num_steps``.
    """
    half = 0.5 * step
    p = p + half * g
    for i in range(num_steps):  # num_steps >= 1: lp is always set
        x = x + step * inv_mass * p
        lp, g = value_and_grad(x, batch)
        if stop is not None and stop(lp):
            return x, p, g, lp, i + 1
        p = p + (step if i < num_steps - 1 else half) * g
    return x, p, g, lp, num_steps


def pure_value_and_grad(log_prob: Callable, chains: bool = False) -> ValueAndGrad:
    """``(x, batch) -> (log_prob(x, batch), its gradient)`` by :func:`torch.func.grad_and_value`,
    traceable inside a compiled kernel; ``chains``: ``x`` is stacked chains ``[K, D]`` that all
    read the same ``batch``."""
    gv = torch.func.grad_and_value(log_prob)
    if chains:
        gv = torch.func.vmap(gv, in_dims=(0, None))

    def value_and_grad(x: Tensor, batch: object) -> tuple[Tensor, Tensor]:
        g, lp = gv(x, batch)
        return lp, g

    return value_and_grad


class HMCProposal(NamedTuple):
    position: Tensor
    log_density: Tensor  # NaN where not finite
    grad: Tensor
    energy0: Tensor  # H at the start
    energy: Tensor  # H at the proposal
    delta: Tensor  # energy - energy0
    diverging: Tensor
    num_steps: int


def hmc_proposal(
    value_and_grad: ValueAndGrad,
    batch: object,
    x0: Tensor,
    lp0: Tensor,
    g0: Tensor,
    xi: Tensor,
    u_jitter: Tensor | None,
    step_size: Tensor,
    inv_mass: Tensor,
    num_steps: int,
    jitter: float,
    threshold: float,
    stop: Callable[[Tensor], bool] | None = None,
) -> HMCProposal:
    """One HMC trajectory, everything of a transition but its Metropolis test::

        p0 = xi / sqrt(M^-1)                     (xi ~ N(0, I): p0 ~ N(0, M))
        e = e0 (1 + j (2 u - 1))                 (jitter j > 0, u = u_jitter ~ U(0, 1); else e = e0)
        (x1, p1) = num_steps leapfrog steps of e from (x0, p0)
        delta = H(x1, p1) - H(x0, p0),  diverging: delta non-finite or above ``threshold``

    ``x0`` ``[D]`` with ``step_size`` ``[]``, or stacked chains ``[K, D]`` with ``[K]``.  ``stop``:
    see :func:`leapfrog`.  A non-finite log density at the proposal is reported as NaN, so its
    energy error is NaN and the Metropolis test rejects it (an infinite density included).
    """
    p0 = xi / inv_mass.sqrt()
    eps = step_size * (1 + jitter * (2 * u_jitter - 1)) if jitter > 0 else step_size
    h0 = hamiltonian(lp0, p0, inv_mass)
    x1, p1, g1, lp1, n = leapfrog(
        value_and_grad, x0, p0, g0, eps.unsqueeze(-1), inv_mass, batch, num_steps, stop
    )
    lp1 = torch.where(torch.isfinite(lp1), lp1, math.nan)
    h1 = hamiltonian(lp1, p1, inv_mass)
    delta = h1 - h0
    diverging = ~torch.isfinite(delta) | (delta > threshold)
    return HMCProposal(x1, lp1, g1, h0, h1, delta, diverging, n)
