"""The SG-MCMC update rules as pure tensor functions, one per algorithm.

Each function maps the current state, the minibatch gradient ``g`` and the step's random
normals ``xi`` to the new state: no generator, no in-place change of an argument.  The
step-at-a-time kernels (``SGLD.build(...).step`` and the like) draw ``xi`` from the chain's
generator and call them; the fused blocks (:mod:`bnnkit.sgmcmc.fused`) call the same functions
inside a compiled ``scan`` with ``xi`` drawn up front.  So the two paths run one update.

Step sizes and noise scales are numbers (step at a time) or 0-d tensors (a fused block, one entry
per step).  ``xi=None`` skips the noise term (the exploration stage of a cyclical schedule); a
fused block instead passes zero normals and a zero noise scale, which leave the state the same.

Where a coefficient is a number, ``x + a y`` runs as ``torch.add(x, y, alpha=a)``, which on a CPU
is one fused multiply-add (one rounding); a 0-d tensor ``a`` cannot be an ``alpha``, so there it is
a multiply and an add.  The order of the operations is otherwise the same for both.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .common import VHAT_FLOOR

Scalar = float | Tensor  # a number step at a time, a 0-d tensor in a fused block


def _add_scaled(x: Tensor, y: Tensor, a: Scalar) -> Tensor:
    """``x + a y``: for a number ``a`` as ``torch.add``'s ``alpha`` (the rounding the
    step-at-a-time chains have always had), for a tensor ``a`` as a multiply and an add."""
    if isinstance(a, Tensor):
        return x + a * y
    return torch.add(x, y, alpha=a)


# --------------------------------------------------------------------------- SGLD
def sgld_noise_scale(eps: float, temperature: float) -> float:
    """SGLD's noise standard deviation ``sqrt(eps T)``."""
    return math.sqrt(eps * temperature)


def sgld_update(x: Tensor, g: Tensor, eps: Scalar, noise_scale: Scalar, xi: Tensor | None) -> Tensor:
    """One SGLD step (:class:`~bnnkit.sgmcmc.SGLD`)::

        w' = w + (eps / 2) g + noise_scale xi,    noise_scale = sqrt(eps T)  (sgld_noise_scale)

    ``g``: the minibatch estimate of the log-posterior gradient at ``w``; ``xi ~ N(0, I)``.
    """
    x_new = _add_scaled(x, g, 0.5 * eps)
    if xi is not None:
        x_new = _add_scaled(x_new, xi, noise_scale)
    return x_new


# --------------------------------------------------------------------------- SGHMC
def sghmc_noise_scale(eps: float, temperature: float, slack: float | Tensor) -> float | Tensor:
    """SGHMC's noise standard deviation ``sqrt(2 eps T (C - B))`` from ``slack = C - B``: a
    number, or a tensor (a per-coordinate noise estimate ``B``) clipped at 0 where ``B >= C``."""
    if isinstance(slack, Tensor):
        return (2.0 * eps * temperature * slack.clamp_min(0.0)).sqrt()
    return math.sqrt(2.0 * eps * temperature * slack)


def sghmc_update(
    x: Tensor,
    r: Tensor,
    g: Tensor,
    eps: Scalar,
    friction: float,
    mass: float | Tensor,
    noise_sd: Scalar,
    xi: Tensor | None,
) -> tuple[Tensor, Tensor]:
    """One SGHMC step (:class:`~bnnkit.sgmcmc.SGHMC`) in position/momentum form, returning
    ``(w', r')``::

        r' = (1 - eps C / m) r + eps g + noise_sd xi,    noise_sd = sqrt(2 eps T (C - B))
        w' = w + (eps / m) r'

    with friction ``C``, diagonal mass ``m``, gradient-noise estimate ``B`` and temperature ``T``
    (``noise_sd`` from :func:`sghmc_noise_scale`).  A tensor ``mass`` (per coordinate) runs the
    same update elementwise as ``r' = r + eps g - eps C (r / m) + noise_sd xi``,
    ``w' = w + eps (r' / m)``: the step-at-a-time chains with a tensor mass (or an online noise
    estimate) have always been computed in that order, and keep their numbers.
    """
    tensor_mass = isinstance(mass, Tensor)
    if tensor_mass:
        r_new = r + eps * g - (eps * friction) * (r / mass)
    else:
        r_new = _add_scaled(r * (1.0 - eps * friction / mass), g, eps)
    if xi is not None:
        r_new = _add_scaled(r_new, xi, noise_sd)
    x_new = x + eps * (r_new / mass) if tensor_mass else _add_scaled(x, r_new, eps / mass)
    return x_new, r_new


# --------------------------------------------------------------------------- pSGLD
def psgld_noise_variance(eps: float, temperature: float) -> float:
    """pSGLD's noise variance per unit of the preconditioner, ``eps T``."""
    return eps * temperature


def psgld_update(
    x: Tensor,
    v: Tensor,
    g: Tensor,
    eps: Scalar,
    var: Scalar,
    xi: Tensor | None,
    alpha: float,
    delta: float,
    n: float,
    hess_diag: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """One pSGLD step (:class:`~bnnkit.sgmcmc.PreconditionedSGLD`), returning ``(w', V')``::

        gbar = g / N
        V'   = alpha V + (1 - alpha) gbar^2
        G    = 1 / (delta + sqrt(V'))                      (diagonal)
        w'   = w + (eps / 2) (G g + Gamma) + sqrt(G var) xi,    var = eps T  (psgld_noise_variance)

    ``Gamma = 0`` unless ``hess_diag`` (an estimate of the diagonal of the log-density Hessian,
    e.g. Hutchinson's) is given; then ``Gamma = -G^2 (1 - alpha) gbar h / sqrt(V')`` with
    ``h = hess_diag / N``, the correction for the position-dependent preconditioner.
    """
    # in place on this function's own temporaries only (the arguments are never written): the
    # same roundings in the same order as the out-of-place formulas, with fewer allocations and
    # passes (about 1.5x faster on a small MLP's 4 x 10,901 float32 numbers)
    gbar = g / n
    v_new = (v * alpha).add_(gbar.mul(1 - alpha).mul_(gbar))
    sv = v_new.sqrt()
    G = sv.add(delta).reciprocal_()
    drift = G * g
    if hess_diag is not None:
        h = hess_diag / n
        drift = drift - G.square() * (1 - alpha) * gbar * h / sv.clamp_min(1e-30)
    x_new = x + drift.mul_(0.5 * eps)
    if xi is not None:
        x_new.add_(G.mul(var).sqrt_().mul_(xi))
    return x_new, v_new


# --------------------------------------------------------------------------- scale-adapted SGHMC
def asghmc_noise(
    v_hat: Tensor, eps2: float, mdecay: float, temperature: float, noise_correction: bool
) -> tuple[Tensor, Tensor, Tensor]:
    """Scale-adapted SGHMC's inverse mass and noise from the gradient's running second moment
    ``V_hat``: ``(M^-1, noise_sd, clipped)`` with::

        M^-1     = (V_hat + floor)^(-1/2)
        noise_sd = sqrt(max(0, 2 eps^2 mdecay T M^-1 - c)),    c = eps^4 if noise_correction else 0

    and ``clipped`` the fraction of coordinates (over the last dimension) whose variance was
    clipped at 0.
    """
    inv_mass = (v_hat + VHAT_FLOOR).rsqrt()
    # variance per unit M^-1, and the - eps^4 of the paper's noise estimate
    var = inv_mass * (2.0 * eps2 * mdecay * temperature) - (eps2 * eps2 if noise_correction else 0.0)
    clipped = (var <= 0).to(v_hat.dtype).mean(-1)
    return inv_mass, var.clamp_min(0.0).sqrt(), clipped


def asghmc_update(
    x: Tensor,
    v: Tensor,
    g: Tensor,
    eps2: float,
    mdecay: float,
    inv_mass: Tensor,
    noise_sd: Tensor,
    xi: Tensor | None,
) -> tuple[Tensor, Tensor]:
    """One scale-adapted SGHMC step (:class:`~bnnkit.sgmcmc.AdaptiveSGHMC`), returning
    ``(w', v')``::

        v' = (1 - mdecay) v + eps^2 M^-1 g + noise_sd xi
        w' = w + v'

    with ``g = -grad U`` and ``M^-1``, ``noise_sd`` from :func:`asghmc_noise`.
    """
    v_new = _add_scaled(v * (1.0 - mdecay), inv_mass * g, eps2)
    if xi is not None:
        v_new = v_new + xi * noise_sd
    return x + v_new, v_new
