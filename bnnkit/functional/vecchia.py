"""A functional prior whose per-step cost does not grow with the data: Vecchia factors on a fixed pool.

The exact form (:mod:`bnnkit.functional.posterior`, ``prior_form="exact"``) evaluates
``log N(f_M; m, K)`` at ``M`` measurement points every step: the network on ``M`` extra rows and,
for fresh points, an ``M x M`` kernel matrix and its Cholesky factor (``O(M^3)``).  This module
replaces it, on a fixed **pool** ``X_P`` of ``P`` points (the posterior's reference measurement
set), by the Vecchia approximation of the same GP marginal (Vecchia 1988; Katzfuss & Guinness
2021).  With the pool in a random order and ``N(i)`` the (at most) ``k`` earlier points most
correlated with point ``i`` under the kernel::

    log p_V(f_P) = sum_{i=1..P} log N( f_i ; m_i + b_i^T (f_{N(i)} - m_{N(i)}), d_i )
    b_i = (K_{N(i)N(i)} + delta I)^{-1} K_{N(i) i}
    d_i = K_ii + delta - K_{i N(i)} b_i                       (conditional variance, >= delta)

``delta = jitter * mean(diag K_PP)`` as in :class:`~bnnkit.functional.GPPrior`.  ``p_V`` is a
proper Gaussian on ``f_P``; it equals the exact marginal ``N(m, K + delta I)`` when every point
conditions on all earlier ones (``k >= P - 1``), and is close to it when ``k`` covers the points
that carry the kernel's correlation.  ``b_i`` and ``d_i`` depend on the kernel only, whose
hyperparameters are frozen during sampling, so they are computed once.

Per step an unbiased estimate of ``log p_V`` and its gradient uses ``q`` factors ``S`` drawn
uniformly (from the chain's generator; see :meth:`VecchiaFactors.draw`)::

    log p_V(f_P) ~= -(P/q) sum_{i in S} r_i^2 / (2 d_i) - (1/2) sum_{i=1..P} log(2 pi d_i)
    r_i = (f_i - m_i) - b_i^T (f_{N(i)} - m_{N(i)})

which needs the network at only ``q (k + 1)`` pool rows, whatever ``N`` and ``P`` are, plus
``O(q k)`` arithmetic: no kernel matrix and no factorisation in the step.  With ``R`` pools
(:class:`Vecchia` ``pools``) the prior is ``(1/R) sum_r log p_V(f_{P_r})``, ``T = sum_r P_r``
factors in all, and the factor ``P/q`` becomes ``T/(q R)``.  What this changes about the target
is in ``docs/fsgmcmc_design.md`` section 12.3.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least

LOG_2PI = math.log(2 * math.pi)
_F64 = torch.float64
_CHUNK = 512  # pool rows per kernel evaluation while building (memory O(chunk * P))


@dataclass(frozen=True)
class Vecchia:
    """Settings of the cheap functional prior (``FunctionalPosterior(prior_form=Vecchia(...))``).

    Args:
        neighbours: ``k``, earlier pool points each factor conditions on (more: closer to the
            exact GP marginal at the pool; ``k >= P - 1`` is exact).
        factors_per_step: ``q``, factors drawn per step (scaled by ``T / (q R)``); the network runs on
            ``q (k + 1)`` pool rows per step.  ``q >= P`` uses every factor (no subsampling noise).
        pools: ``R``, independent draws of the measurement-point spec (seeds ``reference_seed + r``),
            each factorised on its own; the prior is the average of their energies, a fixed
            ``R``-sample version of the fresh-draw target ``E_{X_M} U``.  A fixed point set (a
            tensor) has one pool whatever ``R`` is.  The step's cost does not depend on ``R``.
        order_seed: seed of the random ordering of the pool (pool ``r``: ``order_seed + r``).
    """

    neighbours: int = 8
    factors_per_step: int = 8
    pools: int = 8
    order_seed: int = 0

    def __post_init__(self) -> None:
        check_int_at_least("neighbours", self.neighbours, 1)
        check_int_at_least("factors_per_step", self.factors_per_step, 1)
        check_int_at_least("pools", self.pools, 1)

    def config(self) -> dict:
        return {"form": "vecchia", **asdict(self)}


class VecchiaFactors:
    """The precomputed factors ``(N(i), b_i, d_i)`` of :class:`Vecchia` on ``R`` pools (module docstring).

    Each pool is factorised on its own (neighbours within the pool); the prior energy is the
    average over the pools, ``(1/R) sum_r -log p_V(f_{P_r})``, so every factor has weight ``1/R``.
    Attributes (all pools' factors concatenated, each pool in its Vecchia order): ``points``
    [T, D] float64, ``neighbours`` [T, k] long (a slot with no earlier point holds ``i`` itself
    with ``b = 0``), ``coef`` [T, k] and ``cond_var`` [T] float64, ``mean`` [C] or [1],
    ``delta`` (largest absolute jitter of the pools), ``log_det`` ``= (1/R) sum_i log d_i``.
    """

    def __init__(self, gp, pools: Tensor | list[Tensor], settings: Vecchia) -> None:
        pools = [pools] if isinstance(pools, Tensor) else list(pools)
        self.settings, self.num_pools = settings, len(pools)
        self.k = max(1, min(settings.neighbours, min(p.shape[0] for p in pools) - 1))
        parts, offset = [], 0
        for r, pool in enumerate(pools):
            x, nbr, coef, var, delta = _build_pool(gp, pool, self.k, settings.order_seed + r)
            parts.append((x, nbr + offset, coef, var, delta))
            offset += x.shape[0]
        self.points = torch.cat([p[0] for p in parts])
        self.neighbours = torch.cat([p[1] for p in parts])
        self.coef = torch.cat([p[2] for p in parts])
        self.cond_var = torch.cat([p[3] for p in parts])
        self.delta = max(p[4] for p in parts)
        self.num_points = self.points.shape[0]
        self.weight = 1.0 / self.num_pools
        self.log_det = self.weight * float(self.cond_var.log().sum())
        mean = gp.mean(self.points[:1]).to(_F64)  # the prior mean is constant: [1] or [1, C]
        self.mean = mean.reshape(-1)
        self.inv_var = 1.0 / self.cond_var
        # Per factor: its rows (i, then N(i)) and their weights (1, -b_i), so a step is two gathers.
        ar = torch.arange(self.num_points, device=self.points.device)[:, None]
        self.factor_rows = torch.cat([ar, self.neighbours], 1)  # [T, k+1]
        self.row_weights = torch.cat([torch.ones_like(self.coef[:, :1]), -self.coef], 1)
        self.whitened_weights = self.row_weights * self.inv_var.sqrt()[:, None]
        self.nonzero_mean = bool((self.mean != 0).any())

    # ------------------------------------------------------------------ per step
    def draw(self, generator: torch.Generator | None) -> Tensor:
        """Indices ``S`` of the factors used this step (all of them for ``generator=None``).

        ``q`` uniform draws: without replacement from a small table (``T <= 64 q``), else with
        replacement (``randperm(T)`` costs 40 us at T = 8000; a repeat among 8 of 8000 has
        probability 0.4%).  Either way ``E[(T/q) sum_{i in S} e_i] = sum_i e_i``.
        """
        q, num = self.settings.factors_per_step, self.num_points
        if generator is None or q >= num:
            return torch.arange(num, device=self.points.device)
        if num <= 64 * q:
            idx = torch.randperm(num, generator=generator, device=generator.device)[:q]
        else:
            idx = torch.randint(num, (q,), generator=generator, device=generator.device)
        return idx.to(self.points.device)

    def rows(self, sel: Tensor) -> Tensor:
        """Pool rows the network is evaluated at: for each ``i`` in ``S``, ``i`` then ``N(i)``."""
        return self.factor_rows[sel].reshape(-1)

    def log_prob_and_alpha(self, f2: Tensor, sel: Tensor) -> tuple[Tensor, Tensor]:
        """Estimate of ``log p_V`` and ``alpha = -d(estimate)/d f`` at the rows of :meth:`rows`.

        ``f2`` is ``[Q, C]`` or stacked chains ``[K, Q, C]`` with ``Q = |S| (k + 1)``; float64
        outputs.  With ``w_i = (1, -b_i)`` the factor's row weights, ``r_i = w_i^T (f_rows - m)``
        and ``alpha_rows = (T / (q R)) w_i r_i / d_i``.  As in the exact form,
        ``-(alpha.detach() * f2).sum()`` backpropagates to the prior's weight gradient.
        """
        q = sel.shape[0]
        f = f2.detach().to(_F64)
        if self.nonzero_mean:
            f = f - self.mean
        f = f.unflatten(-2, (q, self.k + 1))  # [..., q, k+1, C]
        # Whitened weights (1, -b_i) / sqrt(d_i): r_i / sqrt(d_i) in one multiply-and-sum.
        wts = self.whitened_weights[sel][..., None]  # [q, k+1, 1]
        z = (wts * f).sum(-2)  # [..., q, C]
        # Uniform draws of q of the T factors, each of weight 1/R: scale T / (q R), unbiased.
        scale = self.num_points * self.weight / q
        quad = z.square().sum(dim=(-2, -1))
        lp = quad * (-0.5 * scale) - 0.5 * f.shape[-1] * (
            self.log_det + self.num_points * self.weight * LOG_2PI
        )
        return lp, (wts * z[..., None, :]).flatten(-3, -2).mul_(scale)

    def covariance(self) -> Tensor:
        """The dense covariance of ``p_V`` at a single pool (``[P, P]``, for tests and diagnostics):
        ``(I - B)^{-1} D (I - B)^{-T}`` with ``B`` the strictly lower-triangular coefficients."""
        if self.num_pools != 1:
            raise BnnkitError("covariance() is defined for a single pool; this prior averages several.")
        num = self.num_points
        bmat = torch.zeros(num, num, dtype=_F64, device=self.points.device)
        rows = torch.arange(num, device=bmat.device)[:, None].expand_as(self.neighbours)
        bmat.index_put_((rows, self.neighbours), self.coef, accumulate=True)
        inv = torch.linalg.inv(torch.eye(num, dtype=_F64, device=bmat.device) - bmat)
        return inv @ torch.diag(self.cond_var) @ inv.T

    def config(self) -> dict:
        return {
            **self.settings.config(),
            "pool_points": self.num_points // self.num_pools,
            "pools_built": self.num_pools,
            "delta": self.delta,
        }


def _build_pool(gp, pool: Tensor, k: int, seed: int) -> tuple[Tensor, Tensor, Tensor, Tensor, float]:
    """One pool in a random order (``seed``) and its ``(neighbours, b, d, delta)``."""
    x = gp._inputs(pool, "pool")
    order = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(seed))
    x = x[order.to(x.device)]
    with torch.no_grad():
        diag = _kernel(gp, x, x, diag=True)
        scale = float(diag.mean())
        if not math.isfinite(scale) or scale <= 0:
            raise BnnkitError(
                "the prior variance at the pool is not positive and finite (mean(diag K) = "
                f"{scale}); check the kernel hyperparameters and the pool points."
            )
        nbr, valid = _neighbours(gp, x, diag, k)
        rel = gp.jitter
        while True:
            delta = rel * scale
            out = _conditionals(gp, x, diag, nbr, valid, delta)
            if out is not None:
                return x, nbr, out[0], out[1], delta
            if rel >= gp.max_jitter:
                raise BnnkitError(
                    f"the Vecchia conditionals are not positive definite even at the maximum relative "
                    f"jitter {gp.max_jitter:g}; deduplicate the pool or raise max_jitter."
                )
            rel = min(2.0 * rel, gp.max_jitter)


def _kernel(gp, a: Tensor, b: Tensor, diag: bool = False) -> Tensor:
    import gpytorch

    with gpytorch.settings.lazily_evaluate_kernels(False):
        out = gp.kernel(a, b, diag=diag)
    return out if isinstance(out, Tensor) else out.to_dense()


def _neighbours(gp, x: Tensor, diag: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """For each point the ``k`` earlier points of largest kernel correlation, and which are real."""
    num = x.shape[0]
    nbr = torch.empty(num, k, dtype=torch.long, device=x.device)
    valid = torch.empty(num, k, dtype=torch.bool, device=x.device)
    sd = diag.sqrt()
    for a in range(0, num, _CHUNK):
        b = min(num, a + _CHUNK)
        corr = _kernel(gp, x[a:b], x[:b]) / (sd[a:b, None] * sd[None, :b])
        i = torch.arange(a, b, device=x.device)[:, None]
        j = torch.arange(b, device=x.device)[None, :]
        # Only earlier points may condition a factor (the product of conditionals is a density).
        corr = corr.masked_fill(j >= i, -math.inf)
        top = corr.topk(min(k, b), dim=1)
        idx, ok = top.indices, torch.isfinite(top.values)
        if idx.shape[1] < k:  # fewer than k points in the whole prefix: pad
            pad = k - idx.shape[1]
            idx = torch.cat([idx, idx.new_zeros(b - a, pad)], 1)
            ok = torch.cat([ok, ok.new_zeros(b - a, pad)], 1)
        nbr[a:b] = torch.where(ok, idx, i)  # a padding slot points at the row itself, with b = 0
        valid[a:b] = ok
    return nbr, valid


def _conditionals(
    gp, x: Tensor, diag: Tensor, nbr: Tensor, valid: Tensor, delta: float
) -> tuple[Tensor, Tensor] | None:
    """``b_i`` and ``d_i`` for every point, or None when a conditional fails to factorise."""
    num, k = nbr.shape
    coef = torch.empty(num, k, dtype=_F64, device=x.device)
    var = torch.empty(num, dtype=_F64, device=x.device)
    eye = torch.eye(k, dtype=_F64, device=x.device)
    for a in range(0, num, _CHUNK):
        b = min(num, a + _CHUNK)
        xn = x[nbr[a:b]]  # [c, k, D]
        v = valid[a:b].to(_F64)
        vv = v[:, :, None] * v[:, None, :]
        # Padding slots become unit-variance, uncorrelated dummies: their coefficient is then 0.
        knn = _kernel(gp, xn, xn) * vv + eye * (1 - v)[:, None, :] + delta * eye
        kni = _kernel(gp, xn, x[a:b, None, :])[..., 0] * v  # [c, k]
        chol, info = torch.linalg.cholesky_ex(knn)
        if bool((info != 0).any()):
            return None
        sol = torch.cholesky_solve(kni[..., None], chol)[..., 0]
        coef[a:b] = sol * v
        var[a:b] = diag[a:b] + delta - (kni * sol).sum(-1)
    # The conditional variance of K + delta I is at least delta; rounding can undershoot it.
    return coef, var.clamp_min(delta)
