"""Homoscedastic Gaussian likelihood, fixed or learnt noise."""

from __future__ import annotations

import math
import struct

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_positive
from .base import Likelihood

LOG_2PI = math.log(2 * math.pi)


class Gaussian(Likelihood):
    """``y ~ N(f(x), sigma^2)``.

    Args:
        noise: the standard deviation sigma (fixed), or the initial value when learnt.
        learn_noise: sample the noise precision ``tau = 1/sigma^2`` with the weights, under the
            name ``"likelihood.log_precision"`` (unconstrained log scale).
        precision_prior: ``(a, b)`` of the Gamma(a, rate=b) prior on ``tau`` when learnt. It is
            conjugate, so :class:`~bnnkit.samplers.gibbs.MetropolisWithinGibbs` can update it exactly.
    """

    kind = "gaussian"

    def __init__(
        self,
        noise: float = 1.0,
        learn_noise: bool = False,
        precision_prior: tuple[float, float] = (1.0, 1.0),
    ):
        check_positive("Gaussian noise", noise, "Pass the observation noise standard deviation.")
        a, b = precision_prior
        check_positive("Gamma shape a of the noise precision prior", a)
        check_positive("Gamma rate b of the noise precision prior", b)
        self.noise = float(noise)
        self.learn_noise = bool(learn_noise)
        self.precision_prior = (float(a), float(b))

    def extra_params(self) -> dict[str, Tensor]:
        if not self.learn_noise:
            return {}
        return {"log_precision": torch.tensor(-2.0 * math.log(self.noise))}

    def precision(self, extra: dict[str, Tensor]) -> Tensor | float:
        if self.learn_noise:
            return extra["log_precision"].exp()
        return 1.0 / self.noise**2

    def log_prob(self, output: Tensor, target: Tensor, extra: dict[str, Tensor]) -> Tensor:
        f = _match(output, target)
        r = target - f
        n = r.numel()
        if self.learn_noise:
            return _learnt_noise_log_density(r.reshape(-1), extra["log_precision"], n)
        tau = 1.0 / self.noise**2
        return 0.5 * n * (math.log(tau) - LOG_2PI) - 0.5 * tau * (r * r).sum()

    def scaled_log_prob(
        self, output: Tensor, target: Tensor, extra: dict[str, Tensor], scale: float
    ) -> Tensor:
        """``scale * log_prob``, with a fixed noise as ``c * sum(r^2) + scale * const``: two operations
        on the tape where ``scale * (const - tau/2 * sum(r^2))`` has three, and one node on the way
        back where it has three.  ``c`` is ``-scale * tau/2`` rounded as the three-operation chain
        rounds its gradient, so the gradient (what a sampler moves by) is the same to the last bit;
        the value can differ from it in the last bit where ``scale != 1``."""
        if not self.learn_noise:
            tau = 1.0 / self.noise**2
            coef = _gradient_coefficient(scale, 0.5 * tau, output.dtype)
            if coef is not None:
                r = target - _match(output, target)
                const = 0.5 * r.numel() * (math.log(tau) - LOG_2PI)
                return (r * r).sum().mul(coef).add(scale * const)
        return super().scaled_log_prob(output, target, extra, scale)

    @property
    def per_row(self) -> bool:  # type: ignore[override]
        return not self.learn_noise

    def log_prob_rows(self, output: Tensor, target: Tensor, extra: dict[str, Tensor]) -> Tensor:
        if self.learn_noise:
            raise NotImplementedError("per-row log probabilities need a fixed noise.")
        r = target - _match(output, target)
        sq = (r * r).flatten(1).sum(1) if r.ndim > 1 else r * r
        per = r[0].numel() if r.ndim > 1 else 1  # outputs per row
        tau = 1.0 / self.noise**2
        return sq.mul(-0.5 * tau).add(0.5 * per * (math.log(tau) - LOG_2PI))

    def log_prob_rows_and_grad(
        self, output: Tensor, target: Tensor, scale: float
    ) -> tuple[Tensor, Tensor] | None:
        """:meth:`log_prob_rows` (fixed noise) and the gradient of ``scale * sum(rows)`` with
        respect to ``output``, without autograd: ``d = -2 fl(c r)``, ``c`` the coefficient autograd
        forms through ``scale * (const - tau/2 * r^2)`` (:func:`_gradient_coefficient`) and ``fl(c r)``
        each of the two products its backward of ``r * r`` adds, so ``d`` is autograd's to the last
        bit (``tests/core/test_stacked_mlp.py``).  None where that cannot be promised (learnt noise, other
        dtypes): take autograd's."""
        if self.learn_noise:
            return None
        coef = _gradient_coefficient(scale, 0.5 / self.noise**2, output.dtype)
        if coef is None:
            return None
        r = target - _match(output, target)
        return self.log_prob_rows(output, target, {}), ((r * coef) * -2.0).reshape(output.shape)

    def scaled_log_prob_chains_and_grad(
        self, output: Tensor, target: Tensor, extra: dict[str, Tensor], scale: float
    ) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
        """K chains' ``scale * log_prob`` plus the extras' log prior, ``[K]`` (outputs and targets
        with a leading chain dimension, each extra ``[K]``; the stacked-MLP gradient of
        :mod:`bnnkit.core.mlp`), and its
        gradients in closed form: with respect to the outputs ``scale tau r``, and to a learnt
        ``log tau``: ``scale (n/2 - tau/2 sum r^2) + a - b tau`` (Gamma(a, b) prior of tau)."""
        r = target - _match(output, target)
        rows = r.reshape(r.shape[0], -1)
        n = rows.shape[1]
        ss = (rows * rows).sum(-1)
        if not self.learn_noise:
            tau = 1.0 / self.noise**2
            value = 0.5 * n * (math.log(tau) - LOG_2PI) - 0.5 * tau * ss
            return scale * value, ((scale * tau) * r).reshape(output.shape), {}
        a, b = self.precision_prior
        log_tau = extra["log_precision"]
        tau = log_tau.exp()
        value = scale * _learnt_noise_log_density(rows, log_tau, n) + self.extra_log_prior(extra)
        d_out = ((scale * tau).reshape(-1, *[1] * (r.ndim - 1)) * r).reshape(output.shape)
        return value, d_out, {"log_precision": scale * (0.5 * n - 0.5 * tau * ss) + (a - b * tau)}

    def extra_log_prior(self, extra: dict[str, Tensor]) -> Tensor | float:
        if not self.learn_noise:
            return 0.0
        a, b = self.precision_prior
        log_tau = extra["log_precision"]
        # Gamma(a, b) density of tau, times the Jacobian |d tau / d log tau| = tau.
        return a * log_tau - b * log_tau.exp()

    def log_prob_upper_bound(self, target: Tensor) -> Tensor | None:
        if self.learn_noise:
            return None  # unbounded as the noise shrinks
        n = target.numel()
        return torch.tensor(0.5 * n * (-2 * math.log(self.noise) - LOG_2PI))

    def check(self, output: Tensor, target: Tensor) -> None:
        super().check(output, target)
        if not torch.is_floating_point(target):
            raise BnnkitError(
                f"Gaussian targets must be real numbers; got dtype {target.dtype}. Use targets.float() (or "
                ".double()) for a regression, or Categorical / Bernoulli for class labels."
            )
        _match(output, target)

    def config(self) -> dict:
        return {
            "kind": self.kind,
            "noise": self.noise,
            "learn_noise": self.learn_noise,
            "precision_prior": list(self.precision_prior),
        }


def _learnt_noise_log_density(r: Tensor, log_tau: Tensor, n: int) -> Tensor:
    """sum_i log N(r_i; 0, 1/tau) over the last dimension of the residuals ``r`` (``n`` of them),
    tau = exp(log_tau): ``n/2 (log tau - log 2 pi) - tau/2 sum_i r_i^2``."""
    return 0.5 * n * (log_tau - LOG_2PI) - 0.5 * log_tau.exp() * (r * r).sum(-1)


def _match(output: Tensor, target: Tensor) -> Tensor:
    """Return ``output`` shaped like ``target`` (dropping a trailing singleton), or raise."""
    if output.shape == target.shape:
        return output
    if output.ndim == target.ndim + 1 and output.shape[-1] == 1 and output.shape[:-1] == target.shape:
        return output.squeeze(-1)
    raise BnnkitError(
        f"model output shape {tuple(output.shape)} does not match target shape "
        f"{tuple(target.shape)}; for regression the model should output [N] or [N, 1] for targets [N] "
        "(or exactly the target shape for multi-output regression)."
    )


def _round(x: float, dtype: torch.dtype) -> float:
    """``x`` rounded to ``dtype`` (float32 or float64), as a Python float."""
    return x if dtype == torch.float64 else struct.unpack("f", struct.pack("f", x))[0]


def _gradient_coefficient(scale: float, half_tau: float, dtype: torch.dtype) -> float | None:
    """``-scale * tau/2`` as autograd forms it in ``dtype`` through ``scale * (c - tau/2 * s)``: each
    Python number rounded to ``dtype``, their product (exact in a double) rounded once more.  None for
    other dtypes."""
    if dtype not in (torch.float32, torch.float64):
        return None
    return _round(-_round(scale, dtype) * _round(half_tau, dtype), dtype)
