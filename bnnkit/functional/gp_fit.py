"""Pre-training of a :class:`~bnnkit.functional.GPPrior` by exact GP regression (type-II maximum
likelihood) with GPyTorch: :func:`fit_gp_prior`, which is :meth:`GPPrior.fit <bnnkit.functional.GPPrior.fit>`.

Model ``y[:, c] = g_c(x) + noise``, ``g_c ~ GP(mu_c, k)`` independent over the ``C`` target columns
with the prior's kernel shared and one noise variance; the loss is ``-sum_c log p(y[:, c]) / n``
(:class:`SharedKernelMLL`).  The fitted kernel is frozen and the noise kept in
``GPPrior.noise_variance``; :func:`fit_gp_prior` documents the starts, subsampling and the choice
between two optima.  ``gp_prior`` imports this module, so the prior
arrives as an argument (typed ``Any``) and is never imported here.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_finite_rows, check_int_at_least, check_positive
from .kernels import Kernel, gpytorch, hyperparameter_sites, kernel_hyperparameters, set_hyperparameter
from .measurement import dedupe_rows

_psd_safe_cholesky = gpytorch.utils.cholesky.psd_safe_cholesky

_F64 = torch.float64


class _SharedKernelGP(gpytorch.models.ExactGP):
    """``C`` independent GPs on the columns of ``y`` [n, C] sharing one kernel and one noise."""

    def __init__(self, x: Tensor, y: Tensor, likelihood, kernel: Kernel, constant_mean: bool):
        super().__init__(x, y.T, likelihood)
        self.covar_module = kernel
        c = y.shape[1]
        self.output_mean = gpytorch.means.ConstantMean(batch_shape=torch.Size([c])) if constant_mean else None

    def forward(self, x: Tensor):
        mean = torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)
        return gpytorch.distributions.MultivariateNormal(mean, self.covar_module(x))

    def constants(self, c: int, like: Tensor) -> Tensor:
        if self.output_mean is None:
            return torch.zeros(c, dtype=like.dtype, device=like.device)
        return self.output_mean.constant.reshape(c)


class _InvQuadLogdet(torch.autograd.Function):
    """``(sum_c r_c^T K^-1 r_c, log det K)`` of a dense ``K [n, n]`` and ``R [n, C]``, with the
    closed-form backward::

        d/dK = g_logdet K^-1 - g_quad A A^T,    d/dR = 2 g_quad A,    A = K^-1 R

    One Cholesky factor (gpytorch's ``psd_safe_cholesky``, which adds jitter only where the
    factorisation fails) and its inverse, where autograd through the factorisation runs several
    ``n x n`` triangular solves: the fit on 500 rows is about 1.5x faster with the same loss to
    ten digits (``experiments/functional_step_cost.py``; the gradient against gpytorch's in
    ``tests/functional/test_gp_prior.py``)."""

    @staticmethod
    def forward(ctx, k: Tensor, r: Tensor) -> tuple[Tensor, Tensor]:
        chol = _psd_safe_cholesky(k)
        a = torch.cholesky_solve(r, chol)
        ctx.save_for_backward(chol, a)
        return (r * a).sum(), 2.0 * chol.diagonal().log().sum()

    @staticmethod
    def backward(ctx, g_quad: Tensor, g_logdet: Tensor) -> tuple[Tensor, Tensor]:
        chol, a = ctx.saved_tensors
        return torch.cholesky_inverse(chol) * g_logdet - (a @ a.T) * g_quad, a * (2.0 * g_quad)


class SharedKernelMLL(gpytorch.mlls.ExactMarginalLogLikelihood):
    """Exact log marginal likelihood of ``C`` GPs with one kernel, per data row, summed over outputs.

    ``sum_c log N(y[:, c]; mu_c, K + noise I) / n``: one factorisation for all columns (gpytorch's
    batched MLL would factorise the same matrix ``C`` times), differentiated in closed form
    (:class:`_InvQuadLogdet`).  For ``C = 1`` this is gpytorch's
    :class:`~gpytorch.mlls.ExactMarginalLogLikelihood`.
    """

    def forward(self, function_dist, target: Tensor, *params, **kwargs) -> Tensor:
        output = self.likelihood(function_dist, *params, **kwargs)  # adds the noise to the covariance
        n, c = target.shape
        diff = target - output.mean.unsqueeze(-1) - self.model.constants(c, target)
        inv_quad, logdet = _InvQuadLogdet.apply(output.covariance_matrix, diff)
        res = -0.5 * (inv_quad + c * logdet + n * c * math.log(2 * math.pi))
        res = self._add_other_terms(res, params)
        return res / n


def _distinct_rows(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    """``(x, y)`` without exact repeats of a whole row, first occurrences kept in order."""
    xy = dedupe_rows(torch.cat([x, y], dim=1))
    return xy[:, : x.shape[1]], xy[:, x.shape[1] :]


def _median_distance(x: Tensor) -> float:
    if x.shape[0] < 2:
        return 1.0
    d = torch.pdist(x)
    med = float(d.median()) if d.numel() else 0.0
    if med <= 0 or not math.isfinite(med):
        positive = d[d > 0]
        med = float(positive.median()) if positive.numel() else 1.0
    return med


def fit_gp_prior(
    prior: Any,
    x: Tensor,
    y: Tensor,
    num_steps: int = 1000,
    lr: float = 0.05,
    max_points: int = 1000,
    generator: torch.Generator | None = None,
    progress: bool = True,
) -> dict:
    """Pre-train the kernel by maximising the exact GP log marginal likelihood, then freeze it.

    :meth:`GPPrior.fit <bnnkit.functional.GPPrior.fit>` is this function, ``prior`` the GPPrior.
    Model ``y[:, c] = g_c(x) + noise``, ``g_c ~ GP(mu_c, k)`` independent over the ``C`` target
    columns with one shared kernel and noise variance; loss ``-sum_c log p(y[:, c]) / n``
    (:class:`SharedKernelMLL`), minimised by Adam on the raw (softplus) parameters in float64 on
    at most ``max_points`` random rows, drawn from ``generator`` (default: a generator seeded
    with 0, so the same data always gives the same fit; the global RNG is never used). Exact
    repeats of an ``(x, y)`` row are dropped first: each one adds an observation whose density
    grows without bound as the noise goes to 0, so the fit collapses the noise onto its floor
    (wine-quality-red, 186 repeated rows of 1,439: noise variance 1e-4 with the repeats, 0.56
    without). With ``mean="zero"`` the targets are centred by their column means first (``mu_c =
    0``, the prior mean stays 0); with ``mean="constant"`` ``mu_c`` is learned and becomes the
    prior mean. The lengthscale starts at the median pairwise distance times the best (by
    marginal likelihood) of ``2^-k``, ``k = 0..6``; the outputscale (linear variance) at the
    target variance; the noise at 10% of it (gpytorch bounds the noise below by 1e-4, so
    standardise the targets). When at least ``max_points`` further distinct rows remain outside
    the subset, a second fit starts from the median distance itself, and the fit with the lower
    GP predictive NLL on ``max_points`` of those rows is kept: optima of close marginal
    likelihood can differ tenfold in the noise (protein, split 4: noise sd 0.11 from the picked
    start, 0.73 from the median, held-out NLL 1.21 against 1.17). Each step costs ``O(n^3)``,
    ``n = min(N, max_points)``.
    Hyperparameters given to the constructor are starting values here, not held fixed.

    Returns (and keeps as ``prior.fitted``) the fitted hyperparameters, ``noise_variance``,
    ``mean_constant``, ``loss`` (final negative log marginal likelihood per row, summed over
    outputs), ``num_points``, ``num_outputs``, ``target_mean`` and ``starts`` (None after one
    start; else per start its lengthscale, loss, held-out NLL, noise and fitted hyperparameters).
    """
    check_int_at_least("num_steps", num_steps, 1)
    check_int_at_least("max_points", max_points, 2)
    check_positive("lr", lr, "Try 0.05.")
    xs, ys, held = _fit_rows(prior, x, y, max_points, generator)
    target_mean = ys.mean(0)
    constant = prior.mean_type == "constant"
    if not constant:
        ys = ys - target_mean
        held = None if held is None else (held[0], held[1] - target_mean)
    likelihood, model, loss_value, starts = _fit_starts(
        prior, xs, ys, held, constant, target_mean, num_steps, lr, progress
    )
    for p in prior.kernel.parameters():
        p.requires_grad_(False)
    n, c = ys.shape
    prior.noise_variance = float(likelihood.noise.detach())
    if constant:
        const = model.constants(c, ys).detach().clone()
        prior.mean_constant = const.reshape(()) if y.ndim == 1 else const
    else:
        prior.mean_constant = torch.zeros((), dtype=_F64, device=xs.device)
    if not math.isfinite(loss_value):
        raise BnnkitError(
            "GP pre-training diverged (non-finite marginal likelihood); lower lr, standardise x and y, "
            "or give initial hyperparameters (lengthscale=..., outputscale=...)."
        )
    const_value = prior.mean_constant.cpu()
    prior.fitted = {
        **kernel_hyperparameters(prior.kernel),
        "noise_variance": prior.noise_variance,
        "mean_constant": float(const_value) if const_value.ndim == 0 else const_value.tolist(),
        "loss": loss_value,
        "num_points": n,
        "num_outputs": c,
        "target_mean": float(target_mean[0]) if y.ndim == 1 else target_mean.cpu().tolist(),
        "starts": starts,
    }
    return prior.fitted


def _fit_rows(
    prior: Any, x: Tensor, y: Tensor, max_points: int, generator: torch.Generator | None
) -> tuple[Tensor, Tensor, tuple[Tensor, Tensor] | None]:
    """The distinct ``(x, y)`` rows the fit uses (float64 targets ``[n, C]``; at most
    ``max_points``, drawn from ``generator``), and ``max_points`` rows it never sees to choose
    between two starts (None when fewer remain)."""
    xs = prior._inputs(x, "x")
    if not isinstance(y, Tensor) or y.ndim not in (1, 2) or y.shape[0] != xs.shape[0]:
        raise BnnkitError(
            f"y must be a tensor [N] or [N, C] with N = {xs.shape[0]} rows like x, got "
            f"{tuple(y.shape) if isinstance(y, Tensor) else type(y)}."
        )
    check_finite_rows("y", y)
    if xs.shape[0] < 2:
        raise BnnkitError("fit needs at least 2 rows of data.")
    ys = y.detach().to(device=xs.device, dtype=_F64).reshape(y.shape[0], -1)
    xs, ys = _distinct_rows(xs, ys)
    if xs.shape[0] < 2:
        raise BnnkitError("fit needs at least 2 distinct (x, y) rows of data.")
    held: tuple[Tensor, Tensor] | None = None
    if xs.shape[0] > max_points:
        if generator is None:
            generator = torch.Generator().manual_seed(0)
        perm = torch.randperm(xs.shape[0], generator=generator, device=generator.device).to(xs.device)
        rest = perm[max_points : 2 * max_points]
        if rest.numel() == max_points:  # rows the fit never sees, to choose between two starts
            held = xs[rest], ys[rest]
        xs, ys = xs[perm[:max_points]], ys[perm[:max_points]]
    return xs, ys, held


def _fit_starts(prior, xs, ys, held, constant, target_mean, num_steps, lr, progress) -> tuple:
    """Adam from the picked lengthscale and, with held-out rows (and a lengthscale not given),
    from the median distance too, keeping the fit that predicts the held-out rows better; returns
    ``(likelihood, model, final loss, starts)`` (``starts`` None after one start)."""
    c = ys.shape[1]
    restart = (
        held is not None
        and "lengthscale" not in prior.explicit
        and bool(hyperparameter_sites(prior.kernel, "lengthscale"))
    )
    bar = _progress(num_steps * (2 if restart else 1)) if progress else None
    try:
        with gpytorch.settings.max_cholesky_size(ys.shape[0] + 1):
            likelihood, model, loss_value, picked = _optimise(
                prior, xs, ys, constant, target_mean, None, num_steps, lr, bar
            )
            starts = None
            median = _median_distance(xs) if restart else None  # only a restart starts there
            if held is not None and median is not None and picked != median:
                # Two optima with close marginal likelihoods can differ tenfold in the noise
                # (protein: 0.11 vs 0.73); the one that predicts unseen rows better is kept.
                first = (copy.deepcopy(prior.kernel.state_dict()), likelihood, model, loss_value)
                first_nll = prior._heldout_nll(xs, ys, held, *_noise_and_means(likelihood, model, c, ys))
                first_hp = kernel_hyperparameters(prior.kernel)
                likelihood, model, loss_value, _ = _optimise(
                    prior, xs, ys, constant, target_mean, median, num_steps, lr, bar
                )
                second_nll = prior._heldout_nll(xs, ys, held, *_noise_and_means(likelihood, model, c, ys))
                starts = [
                    {"lengthscale_start": picked, "loss": first[3], "heldout_nll": first_nll,
                     "noise_variance": float(first[1].noise.detach()), "hyperparameters": first_hp},
                    {"lengthscale_start": median, "loss": loss_value, "heldout_nll": second_nll,
                     "noise_variance": float(likelihood.noise.detach()),
                     "hyperparameters": kernel_hyperparameters(prior.kernel)},
                ]  # fmt: skip
                if not second_nll < first_nll:  # ties and NaN keep the first start's fit
                    prior.kernel.load_state_dict(first[0])
                    _, likelihood, model, loss_value = first
            elif bar is not None:  # the second start was not needed
                bar.total = num_steps
                bar.refresh()
    finally:
        if bar is not None:
            bar.close()
    return likelihood, model, loss_value, starts


def _optimise(
    prior: Any,
    xs: Tensor,
    ys: Tensor,
    constant: bool,
    target_mean: Tensor,
    lengthscale: float | None,
    num_steps: int,
    lr: float,
    bar,
) -> tuple:
    """Adam on the marginal likelihood from fresh starting values (the lengthscale picked by
    :func:`_pick_lengthscale` when ``lengthscale`` is None); returns ``(likelihood, model,
    final loss, starting lengthscale)``."""
    _initialise(prior, xs, ys)
    likelihood = gpytorch.likelihoods.GaussianLikelihood().to(device=xs.device, dtype=_F64)
    likelihood.noise = max(0.1 * float(ys.var(0).mean()), 1e-3)
    for p in prior.kernel.parameters():
        p.requires_grad_(True)
    model = _SharedKernelGP(xs, ys, likelihood, prior.kernel, constant).to(device=xs.device, dtype=_F64)
    if constant:
        model.output_mean.constant = target_mean
    mll = SharedKernelMLL(likelihood, model)
    model.train()
    likelihood.train()
    if lengthscale is None:
        picked = _pick_lengthscale(prior, model, mll, xs, ys)
    else:
        set_hyperparameter(prior.kernel, "lengthscale", lengthscale)
        picked = lengthscale
    optim = torch.optim.Adam(model.parameters(), lr=lr)
    loss_value = float("nan")
    for step in range(num_steps):
        optim.zero_grad()
        loss = -mll(model(xs), ys)
        loss.backward()
        optim.step()
        loss_value = float(loss.detach())
        if bar is not None:
            bar.update(1)
            if step % 10 == 0 or step == num_steps - 1:
                bar.set_postfix(loss=f"{loss_value:.4f}")
    with torch.no_grad():  # the loss at the returned (final) parameters
        loss_value = float(-mll(model(xs), ys))
    return likelihood, model, loss_value, picked


def _noise_and_means(likelihood, model: _SharedKernelGP, c: int, ys: Tensor) -> tuple[Tensor, Tensor]:
    """The fitted observation noise variance [] and per-output constant means [C], without a graph."""
    with torch.no_grad():
        return likelihood.noise.detach().reshape(()), model.constants(c, ys)


def _initialise(prior: Any, xs: Tensor, ys: Tensor) -> None:
    var = max(float(ys.var(0).mean()), 1e-6)
    init = {"lengthscale": _median_distance(xs), "outputscale": var}
    # A linear kernel's variance v gives Var f(x) = v ||x||^2: match the target variance.
    init["variance"] = var / max(float(xs.square().sum(1).mean()), 1e-12)
    for name, value in init.items():
        if name not in prior.explicit and hyperparameter_sites(prior.kernel, name):
            set_hyperparameter(prior.kernel, name, value)


def _pick_lengthscale(prior: Any, model, mll, xs: Tensor, ys: Tensor) -> float | None:
    """Start from the best of ``median distance * 2^-k``, k = 0..6, by marginal likelihood.

    The median distance alone can start far above a short lengthscale, in the basin of the
    "everything is noise" optimum; seven likelihood evaluations avoid that at little cost.
    """
    if "lengthscale" in prior.explicit or not hyperparameter_sites(prior.kernel, "lengthscale"):
        return None
    median = _median_distance(xs)
    best, best_loss = median, math.inf
    with torch.no_grad():
        for k in range(7):
            ls = median * 2.0**-k
            set_hyperparameter(prior.kernel, "lengthscale", ls)
            try:
                loss = float(-mll(model(xs), ys))
            except Exception:  # an unusable candidate (e.g. a failed factorisation): skip it
                continue
            if loss < best_loss:
                best, best_loss = ls, loss
    set_hyperparameter(prior.kernel, "lengthscale", best)
    return best


def _progress(total: int):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="gp prior fit", unit="step", mininterval=0.25, dynamic_ncols=True)


__all__ = ["SharedKernelMLL", "fit_gp_prior"]
