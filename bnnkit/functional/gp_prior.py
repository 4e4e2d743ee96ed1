"""Gaussian-process prior on network outputs, evaluated at a finite measurement set ``X_M``.

With ``m`` the prior mean, ``K = k(X_M, X_M)`` and a relative jitter ``delta = jitter * mean(diag K)``
(doubled while the Cholesky factorisation fails, up to ``max_jitter * mean(diag K)``)::

    log p(f_M) = sum_c log N(f_M[:, c]; m, K + delta I)                         (C outputs, shared kernel)
    alpha      = (K + delta I)^{-1} (f_M - m)                         (docs/fsgmcmc_design.md, E4)

``-J_M^T alpha`` is the functional-prior drift of fSGLD / fSGHMC (E5): run backward on
``(alpha.detach() * f_M).sum()``.  Kernel, Cholesky and solves run in float64.

The hyperparameters are "pre-trained" by :meth:`GPPrior.fit` (exact GP regression, type-II maximum
likelihood, in :mod:`bnnkit.functional.gp_fit`) and then frozen; the fitted observation noise is
kept in ``noise_variance`` (a good initial regression noise) and never added to ``K``.
"""

from __future__ import annotations

import copy
import logging
import math

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_finite_rows, check_int_at_least, check_positive
from .gp_fit import SharedKernelMLL, _SharedKernelGP, fit_gp_prior  # noqa: F401 (its classes stay importable from here)
from .kernels import (
    Kernel,
    kernel_hyperparameters,
    kernel_label,
    kernel_matrix,
    make_kernel,
    set_hyperparameter,
)

log = logging.getLogger(__name__)
_F64 = torch.float64
_MEANS = ("zero", "constant")


class GPPrior:
    """GP prior ``GP(m, k)`` at measurement points, with a GPyTorch kernel held in float64.

    Args:
        kernel: a spec for :func:`~bnnkit.functional.make_kernel` (``"rbf"``, ``"matern52"``,
            ``"rbf+linear"``, ...) or a ``gpytorch.kernels.Kernel`` (deep-copied, then cast to float64).
        input_dim: number of input columns.
        mean: ``"zero"`` (``m = 0``; standardise regression targets) or ``"constant"`` (a constant
            per output, 0 until fitted).
        ard: one lengthscale per input dimension when ``input_dim > 1``.
        jitter: relative jitter: ``delta = jitter * mean(diag K)``.
        max_jitter: largest relative jitter tried (doubling from ``jitter``) before giving up.
        lengthscale, outputscale, variance, period: explicit hyperparameter values (a number or one
            per dimension), set on every kernel component that has them; :meth:`fit` starts from
            them instead of its data-driven initial values.
    """

    def __init__(
        self,
        kernel: str | Kernel = "rbf",
        input_dim: int = 1,
        mean: str = "zero",
        ard: bool = True,
        jitter: float = 1e-6,
        max_jitter: float = 1e-2,
        lengthscale: float | list[float] | Tensor | None = None,
        outputscale: float | None = None,
        variance: float | list[float] | Tensor | None = None,
        period: float | list[float] | Tensor | None = None,
    ) -> None:
        check_int_at_least("input_dim", input_dim, 1)
        if mean not in _MEANS:
            raise BnnkitError(f"mean must be one of {', '.join(_MEANS)}, got {mean!r}.")
        check_positive("jitter", jitter, "It is relative to mean(diag K); try 1e-6.")
        check_positive("max_jitter", max_jitter, "It is relative to mean(diag K); try 1e-2.")
        if max_jitter < jitter:
            raise BnnkitError(f"max_jitter={max_jitter} must be >= jitter={jitter}.")
        self.spec = kernel if isinstance(kernel, str) else kernel_label(kernel)
        built = make_kernel(kernel, input_dim, ard)
        self.kernel: Kernel = (built if isinstance(kernel, str) else copy.deepcopy(built)).to(_F64)
        for module in self.kernel.modules():
            ard_dims = getattr(module, "ard_num_dims", None)
            if ard_dims is not None and ard_dims != input_dim:
                raise BnnkitError(
                    f"kernel component '{kernel_label(module)}' has ard_num_dims={ard_dims} but "
                    f"input_dim={input_dim}; build the kernel for {input_dim} input columns."
                )
        self.input_dim, self.mean_type, self.ard = input_dim, mean, ard
        self.jitter, self.max_jitter = float(jitter), float(max_jitter)
        self.explicit: dict[str, float | list[float]] = {}
        given = {
            "lengthscale": lengthscale,
            "outputscale": outputscale,
            "variance": variance,
            "period": period,
        }
        for name, value in given.items():
            if value is not None:
                set_hyperparameter(self.kernel, name, value)
                v = torch.as_tensor(value, dtype=_F64).flatten()
                self.explicit[name] = float(v[0]) if v.numel() == 1 else v.tolist()
        self.mean_constant = torch.zeros((), dtype=_F64)  # [] or [C] after a multi-output fit
        self.noise_variance: float | None = None
        self.fitted: dict | None = None

    # ------------------------------------------------------------------ inputs
    def _inputs(self, x: Tensor, name: str = "xm") -> Tensor:
        if not isinstance(x, Tensor):
            raise BnnkitError(f"{name} must be a torch.Tensor of shape [M, {self.input_dim}], got {type(x)}.")
        if x.ndim == 1 and self.input_dim == 1:
            x = x.reshape(-1, 1)
        if x.ndim != 2:
            raise BnnkitError(
                f"{name} must be a 2-D tensor [M, input_dim={self.input_dim}], got shape {tuple(x.shape)}."
            )
        if x.shape[1] != self.input_dim:
            raise BnnkitError(
                f"the kernel was built for input_dim={self.input_dim}, got inputs with {x.shape[1]} "
                f"columns ({name} of shape {tuple(x.shape)})."
            )
        if x.shape[0] < 1:
            raise BnnkitError(f"{name} has no rows; the prior needs at least one measurement point.")
        check_finite_rows(name, x)
        device = x.device
        if self._device() != device:
            self.kernel.to(device)
        return x.detach().to(_F64)

    def _device(self) -> torch.device:
        p = next(self.kernel.parameters(), None)
        return p.device if p is not None else torch.device("cpu")

    def to(self, device: str | torch.device) -> GPPrior:
        """Move the kernel (and fitted mean) to ``device``; inputs on another device also move it."""
        self.kernel.to(device)
        self.mean_constant = self.mean_constant.to(device)
        return self

    def _outputs(self, f: Tensor, m: int) -> None:
        if not isinstance(f, Tensor) or f.ndim not in (1, 2):
            raise BnnkitError(f"f must be a tensor of shape [M] or [M, C], got {getattr(f, 'shape', f)!r}.")
        if f.shape[0] != m:
            raise BnnkitError(
                f"f has {f.shape[0]} rows but there are {m} measurement points; f must be the network "
                "outputs at exactly those points, shape [M] or [M, C]."
            )

    # ------------------------------------------------------------------ prior quantities
    def mean(self, xm: Tensor) -> Tensor:
        """``m(X_M)`` in float64: ``[M]``, or ``[M, C]`` after a multi-output ``mean="constant"`` fit."""
        x = self._inputs(xm)
        const = self.mean_constant.to(x.device)
        return const.expand(x.shape[0], *const.shape).clone()

    def covariance(self, xm: Tensor) -> Tensor:
        """``K(X_M, X_M)`` [M, M] in float64, without jitter (no autograd graph)."""
        x = self._inputs(xm)
        with torch.no_grad():
            return kernel_matrix(self.kernel, x)

    def cholesky(self, xm: Tensor) -> tuple[Tensor, float]:
        """Lower Cholesky factor of ``K + delta I`` and the absolute ``delta`` used.

        ``delta = jitter * mean(diag K)``, doubled on failure up to ``max_jitter * mean(diag K)``.
        """
        return self._cholesky(self.covariance(xm))

    def _cholesky(self, k: Tensor) -> tuple[Tensor, float]:
        # ``k`` is a fresh matrix of ours: the jitter goes onto its diagonal in place.  Each try
        # writes ``diag0 + delta`` (not ``+=`` on the last try's value), so the factor is bitwise
        # that of ``k + delta * eye``; at M = 1000 this saves three full passes and two 8 MB
        # allocations per step (measured: the factorisation costs 11 ms, the checks cost 18).
        if not torch.isfinite(k.sum()):  # one pass; NaN or inf anywhere makes the sum non-finite
            raise BnnkitError(
                "the prior covariance K(X_M, X_M) contains NaN or inf; check the kernel hyperparameters "
                f"({kernel_hyperparameters(self.kernel)}) and the measurement points."
            )
        diag = k.diagonal()
        diag0 = diag.clone()
        scale = float(diag0.mean())
        if scale <= 0:
            raise BnnkitError(
                "the prior variance is zero at every measurement point (mean(diag K) = 0), e.g. a linear "
                "kernel at x = 0; use a kernel with a bias ('linear+constant') or other points."
            )
        rel = self.jitter
        while True:
            delta = rel * scale
            torch.add(diag0, delta, out=diag)
            chol, info = torch.linalg.cholesky_ex(k)
            # A finite K that factorised gives a finite factor: its diagonal is the cheap check.
            if int(info) == 0 and torch.isfinite(chol.diagonal()).all():
                if rel > self.jitter:
                    log.debug("GP prior Cholesky needed relative jitter %.3g (delta %.3g)", rel, delta)
                return chol, delta
            if rel >= self.max_jitter:
                break
            rel = min(2.0 * rel, self.max_jitter)
        raise BnnkitError(
            f"K(X_M, X_M) + delta I is not positive definite even at the maximum relative jitter "
            f"{self.max_jitter:g} (delta = {delta:.3g}, M = {k.shape[0]}). This usually means duplicate "
            "or too-dense measurement points for the lengthscale: deduplicate X_M "
            "(MeasurementPoints(dedupe=True)), use fewer points, or raise max_jitter."
        )

    def _centred(self, f: Tensor, x: Tensor) -> Tensor:
        """``f - m`` as a float64 [M, C] matrix."""
        f2 = f.to(_F64).reshape(f.shape[0], -1)
        const = self.mean_constant.to(x.device)
        if const.ndim == 1 and const.numel() != f2.shape[1]:
            raise BnnkitError(
                f"the prior mean was fitted for {const.numel()} outputs but f has {f2.shape[1]}; "
                "pass f of shape [M, C] with the same C as the targets given to fit()."
            )
        return f2 - const

    def alpha_and_jitter(self, f: Tensor, xm: Tensor) -> tuple[Tensor, float]:
        """:meth:`alpha` and the absolute jitter ``delta`` that the Cholesky factorisation needed."""
        x = self._inputs(xm)
        self._outputs(f, x.shape[0])
        with torch.no_grad():
            chol, delta = self.cholesky(x)
            sol = torch.cholesky_solve(self._centred(f.detach(), x), chol)
        return sol.reshape(f.shape).to(f.dtype), delta

    def alpha(self, f: Tensor, xm: Tensor) -> Tensor:
        """``(K + delta I)^{-1} (f - m(X_M))`` with one Cholesky and ``C`` right-hand sides.

        No autograd graph; returned in ``f``'s dtype and shape ([M] or [M, C]).
        """
        return self.alpha_and_jitter(f, xm)[0]

    def log_prob(self, f: Tensor, xm: Tensor) -> Tensor:
        """``sum_c log N(f[:, c]; m, K + delta I)``, differentiable with respect to ``f``."""
        x = self._inputs(xm)
        self._outputs(f, x.shape[0])
        with torch.no_grad():
            chol, _ = self.cholesky(x)
        diff = self._centred(f, x)
        z = torch.linalg.solve_triangular(chol, diff, upper=False)
        m, c = diff.shape
        logdet = 2.0 * chol.diagonal().log().sum()
        lp = -0.5 * (z.square().sum() + c * logdet + m * c * math.log(2 * math.pi))
        return lp.to(f.dtype)

    # ------------------------------------------------------------------ pre-training
    fit = fit_gp_prior  # GPPrior.fit(x, y, ...): gp_fit.py's function, this prior its first argument

    def _heldout_nll(
        self, xs: Tensor, ys: Tensor, held: tuple[Tensor, Tensor], noise: Tensor, consts: Tensor
    ) -> float:
        """Mean GP predictive NLL (summed over outputs) of the ``held`` rows given the fit's rows
        ``(xs, ys)``, the observation noise variance ``noise`` [] and the constant means ``consts`` [C]."""
        xh, yh = held
        parts = self._conditioned(xs, ys - consts, xh, noise)
        if parts is None:
            return math.inf
        fit_mean, kdiag, explained = parts
        with torch.no_grad():
            mu = fit_mean + consts
            var = (kdiag + noise - explained).clamp_min(1e-12)
            nll = 0.5 * (torch.log(2 * math.pi * var).unsqueeze(1) + (yh - mu).square() / var.unsqueeze(1))
        return float(nll.sum(1).mean())

    def _conditioned(
        self, xs: Tensor, centred: Tensor | None, xn: Tensor, noise: float | Tensor
    ) -> tuple[Tensor | None, Tensor, Tensor] | None:
        """The pieces of exact GP regression on rows ``(xs, centred [N, C])`` at ``xn``: the
        posterior mean of the centred targets ``K_*x (K_xx + s2 I)^-1 centred`` [N*, C] (None
        without ``centred``: the variance needs no targets), the prior variance ``k_**`` [N*] and
        the part the rows explain ``diag K_*x (K_xx + s2 I)^-1 K_x*`` [N*]; None where
        ``K_xx + s2 I`` has no Cholesky factor.  :meth:`predict`, :meth:`latent_variance` and the
        fit's held-out score all condition here."""
        with torch.no_grad():
            k = self.kernel(xs).to_dense() + noise * torch.eye(xs.shape[0], dtype=xs.dtype, device=xs.device)
            chol, info = torch.linalg.cholesky_ex(k)
            if int(info) != 0:
                return None
            k_nx = self.kernel(xn, xs).to_dense()
            fit_mean = None if centred is None else k_nx @ torch.cholesky_solve(centred, chol)
            v = torch.linalg.solve_triangular(chol, k_nx.T, upper=False)
            return fit_mean, self.kernel(xn, diag=True), v.square().sum(0)

    def predict(self, x: Tensor, y: Tensor, x_new: Tensor) -> tuple[Tensor, Tensor]:
        """Exact GP regression with this prior and its fitted noise variance ``s2``: the predictive
        mean and variance ``[N*]`` (float64) at ``x_new`` given the rows ``(x, y [N])``::

            mean = m + K_*x (K_xx + s2 I)^-1 (y - m),    var = k_** - K_*x (K_xx + s2 I)^-1 K_x* + s2

        with ``m`` the fitted constant (``mean="constant"``) or, for ``mean="zero"``, the mean of
        ``y`` (its fit centres the targets).  What the functional samplers' prior says by itself,
        e.g. to score it on held-out rows before sampling under it."""
        if self.noise_variance is None:
            raise BnnkitError(
                "predict needs a fitted prior: call fit(x, y) first (it sets the noise variance)."
            )
        xs, xn = self._inputs(x, "x"), self._inputs(x_new, "x_new")
        ys = torch.as_tensor(y, dtype=_F64, device=xs.device).reshape(-1)
        if ys.shape[0] != xs.shape[0]:
            raise BnnkitError(
                f"x has {xs.shape[0]} rows but y has {ys.shape[0]} values; give one target per row."
            )
        m = ys.mean() if self.mean_type == "zero" else self.mean_constant.to(xs.device).reshape(-1)[0]
        parts = self._conditioned(xs, (ys - m).unsqueeze(-1), xn, self.noise_variance)
        if parts is None:
            raise BnnkitError(
                "K(x, x) plus the fitted noise is not positive definite; drop repeated rows of x or refit."
            )
        fit_mean, kdiag, explained = parts
        mean = m + fit_mean.squeeze(-1)
        var = (kdiag - explained).clamp_min(0.0) + self.noise_variance
        return mean, var

    def latent_variance(self, x: Tensor, x_new: Tensor) -> Tensor:
        """The posterior variance ``[N*]`` (float64) of the latent function at ``x_new`` given
        observations at the rows ``x`` with the fitted noise variance ``s2`` (targets not needed)::

            v = k_** - diag K_*x (K_xx + s2 I)^-1 K_x*

        :meth:`predict`'s variance less ``s2``: small near the rows, the prior's ``k_**`` far
        from them."""
        if self.noise_variance is None:
            raise BnnkitError(
                "latent_variance needs a fitted prior: call fit(x, y) first (it sets the noise)."
            )
        xs, xn = self._inputs(x, "x"), self._inputs(x_new, "x_new")
        parts = self._conditioned(xs, None, xn, self.noise_variance)
        if parts is None:
            raise BnnkitError(
                "K(x, x) plus the fitted noise is not positive definite; drop repeated rows of x or refit."
            )
        _, kdiag, explained = parts
        return (kdiag - explained).clamp_min(0.0)

    # ------------------------------------------------------------------ description
    def hyperparameters(self) -> dict[str, float | list[float]]:
        """Current kernel hyperparameters (``lengthscale``, ``outputscale``, ...)."""
        return kernel_hyperparameters(self.kernel)

    @classmethod
    def from_config(cls, config: dict) -> GPPrior:
        """The prior :meth:`config` describes, its hyperparameters, fitted mean constant and noise
        variance set (not the fit's report); the kernel must be a spec string."""
        hp = config["hyperparameters"]
        gp = cls(
            config["kernel"],
            input_dim=config["input_dim"],
            mean=config["mean"],
            ard=config["ard"],
            jitter=config["jitter"],
            max_jitter=config["max_jitter"],
            **{k: hp[k] for k in ("lengthscale", "outputscale", "variance", "period") if k in hp},
        )
        gp.noise_variance = config["noise_variance"]
        gp.mean_constant = torch.as_tensor(config["mean_constant"], dtype=_F64)
        return gp

    def config(self) -> dict:
        const = self.mean_constant.cpu()
        return {
            "kernel": self.spec,
            "input_dim": self.input_dim,
            "mean": self.mean_type,
            "ard": self.ard,
            "jitter": self.jitter,
            "max_jitter": self.max_jitter,
            "hyperparameters": self.hyperparameters(),
            "mean_constant": float(const) if const.ndim == 0 else const.tolist(),
            "noise_variance": self.noise_variance,
            "fitted": self.fitted,
        }

    def __repr__(self) -> str:
        hp = ", ".join(f"{k}={v}" for k, v in self.hyperparameters().items())
        return f"GPPrior(kernel={self.spec!r}, input_dim={self.input_dim}, mean={self.mean_type!r}, {hp})"


__all__ = ["GPPrior", "SharedKernelMLL"]
