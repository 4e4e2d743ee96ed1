"""A regression predictive widened by a fitted GP prior's latent posterior variance.

A functional prior constrains the network at its measurement points; beyond the data a network's
draws extrapolate with less spread than the prior gives (docs/results/gap_tail.md, "Is it the
prior or the sampler?").  :class:`PriorWidening` adds what the prior says there to each draw's
Gaussian: with ``v(x)`` the GP's latent posterior variance given the training inputs
(:meth:`GPPrior.latent_variance`),

    p(y | x) = sum_s w_s N(y; f_s(x), sigma_s^2 + v(x))

``v`` is small near the training rows and grows to the prior's variance away from them (a
distance-aware term, as in SNGP, Liu et al. 2020).  The mean is the network's.  Attached to a
posterior as ``posterior.predictive_widening``, :func:`bnnkit.predict.predict` adds it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from .gp_prior import GPPrior

MAX_ROWS = 2000  # training inputs the variance conditions on, at most (a seeded subset beyond)


class PriorWidening:
    """``v(x)`` of a fitted ``gp`` given (at most :data:`MAX_ROWS` of) ``train_inputs``, flattened
    to rows as the GP sees them; the subset beyond that is the first rows of a permutation drawn
    from ``seed``."""

    def __init__(self, gp: GPPrior, train_inputs: Tensor, seed: int = 0):
        rows = train_inputs.detach().reshape(train_inputs.shape[0], -1).to(torch.float64).cpu()
        if rows.shape[0] > MAX_ROWS:
            keep = torch.randperm(rows.shape[0], generator=torch.Generator().manual_seed(seed))[:MAX_ROWS]
            rows = rows[keep.sort().values]
        self.gp, self.rows = gp, rows

    def __call__(self, x: Tensor) -> Tensor:
        """``v(x)`` at the inputs ``x [N, ...]``: ``[N]``, float64, on ``x``'s device."""
        flat = x.detach().reshape(x.shape[0], -1).to(torch.float64)
        gp = self.gp.to(flat.device)
        return gp.latent_variance(self.rows.to(flat.device), flat)

    def state_dict(self) -> dict[str, Any]:
        c = self.gp.config()
        return {
            "rows": self.rows,
            "gp": {
                k: c[k]
                for k in ("kernel", "input_dim", "mean", "ard", "jitter", "max_jitter", "hyperparameters")
            }
            | {"noise_variance": c["noise_variance"], "mean_constant": c["mean_constant"]},
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> PriorWidening:
        g = state["gp"]
        hp = g["hyperparameters"]
        gp = GPPrior(
            g["kernel"],
            input_dim=g["input_dim"],
            mean=g["mean"],
            ard=g["ard"],
            jitter=g["jitter"],
            max_jitter=g["max_jitter"],
            **{k: hp[k] for k in ("lengthscale", "outputscale", "variance", "period") if k in hp},
        )
        gp.noise_variance = g["noise_variance"]
        gp.mean_constant = torch.as_tensor(g["mean_constant"], dtype=torch.float64)
        out = cls.__new__(cls)
        out.gp, out.rows = gp, state["rows"]
        return out
