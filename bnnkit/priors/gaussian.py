"""Gaussian prior ``w_i ~ N(0, s_i^2)``, isotropic or per layer, optionally with learnt precision."""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import Tensor

from ..core.errors import check_positive
from ..core.flat import FlatView
from ..core.random import gamma
from .base import BoundPrior, Prior, scale_vector

LOG_2PI = math.log(2 * math.pi)


class GaussianPrior(Prior):
    """Zero-mean Gaussian prior.

    ``log p(w) = -1/2 sum_i w_i^2 / s_i^2 - sum_i log s_i - d/2 log 2 pi``.

    Args:
        scale: default standard deviation.
        scales: per-layer standard deviations keyed by parameter name or prefix
            (``{"0.": 1.0, "2.weight": 0.1}``).
        learn_precision: put a Gamma(a, rate=b) hyperprior on a global precision ``lambda`` that
            multiplies ``1/s_i^2``; ``lambda`` is sampled as ``"prior.log_precision"`` and has an
            exact conjugate Gibbs update ``lambda | w ~ Gamma(a + d/2, b + 1/2 sum w_i^2/s_i^2)``.
    """

    kind = "gaussian"

    def __init__(
        self,
        scale: float = 1.0,
        scales: Mapping[str, float] | None = None,
        learn_precision: bool = False,
        precision_prior: tuple[float, float] = (1.0, 1.0),
    ):
        check_positive("prior scale", scale, "Pass a positive standard deviation.")
        check_positive("Gamma shape a of the prior precision", precision_prior[0])
        check_positive("Gamma rate b of the prior precision", precision_prior[1])
        self.scale = float(scale)
        self.scales = dict(scales or {})
        self.learn_precision = bool(learn_precision)
        self.precision_prior = (float(precision_prior[0]), float(precision_prior[1]))

    @classmethod
    def fan_in(cls, module: torch.nn.Module, scale: float = 1.0) -> GaussianPrior:
        """Neal's scaling: each weight of a layer with ``fan_in`` inputs per output (a parameter
        named ``*weight`` with two or more dimensions: Linear, Conv) ~ ``N(0, scale^2 / fan_in)``,
        every other parameter (biases) ~ ``N(0, scale^2)``.  Why: under an ``N(0, 1)`` prior a
        unit's pre-activation has variance ~ its fan-in, so a wide layer's prior functions are
        wild; with the scaling it stays ~ ``scale^2`` whatever the width."""
        scales = {
            name: float(scale) / math.sqrt(p[0].numel())
            for name, p in module.named_parameters()
            if name.rsplit(".", 1)[-1] == "weight" and p.ndim >= 2
        }
        return cls(scale, scales)

    def bind(self, view: FlatView) -> BoundPrior:
        s = scale_vector(view, self.scale, self.scales)
        inv_var = 1.0 / (s * s)
        d = view.size
        const = float(-torch.log(s).sum()) - 0.5 * d * LOG_2PI

        if not self.learn_precision:

            def log_prob(w: Tensor, extra: dict[str, Tensor]) -> Tensor:
                return -0.5 * torch.dot(w * w, inv_var) + const

            iso = float(inv_var[0]) if bool((inv_var == inv_var[0]).all()) else None

            def value_and_grad(w: Tensor) -> tuple[Tensor, Tensor]:
                if w.ndim > 1:  # stacked chains [K, D]
                    g = w.mul(-iso) if iso is not None else w * -inv_var
                    return (g * w).sum(-1).mul(0.5).add(const), g
                if iso is not None:  # one scale for all weights: fewer ops per step
                    return torch.dot(w, w).mul(-0.5 * iso).add(const), w.mul(-iso)
                g = -w * inv_var
                return 0.5 * torch.dot(g, w) + const, g

            def sample(gen: torch.Generator) -> Tensor:
                return torch.randn(d, generator=gen, dtype=view.dtype, device=view.device) * s

            return BoundPrior(log_prob, sample, value_and_grad=value_and_grad, stacked=True)

        a, b = self.precision_prior

        def log_prob_h(w: Tensor, extra: dict[str, Tensor]) -> Tensor:
            log_lam = extra["log_precision"]
            return 0.5 * d * log_lam - 0.5 * log_lam.exp() * torch.dot(w * w, inv_var) + const

        def sample_h(gen: torch.Generator) -> Tensor:
            return torch.randn(d, generator=gen, dtype=view.dtype, device=view.device) * s

        def extra_log_prior(extra: dict[str, Tensor]) -> Tensor:
            log_lam = extra["log_precision"]
            return a * log_lam - b * log_lam.exp()  # Gamma density x Jacobian of log

        def conjugate(w: Tensor, gen: torch.Generator) -> Tensor:
            rate = b + 0.5 * torch.dot(w * w, inv_var)
            lam = gamma(a + 0.5 * d, rate, gen)
            return lam.log().reshape(1).to(w.dtype)

        init = torch.tensor(0.0)  # lambda = 1: the prior starts at the given scales
        return BoundPrior(
            log_prob_h, sample_h, {"log_precision": init}, extra_log_prior, {"log_precision": conjugate}
        )

    def config(self) -> dict:
        return {
            "kind": self.kind,
            "scale": self.scale,
            "scales": self.scales,
            "learn_precision": self.learn_precision,
            "precision_prior": list(self.precision_prior),
        }
