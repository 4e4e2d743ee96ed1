"""Prior interface (the base classes; concrete priors live in :mod:`bnnkit.priors`).

A prior is declared over named parameters and *bound* to the flat layout of the sampled weights,
so that its log density is one or two vector ops on the flat vector (no per-tensor Python loop).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from torch import Tensor

from .errors import BnnkitError, check_positive
from .flat import FlatView


def scale_vector(view: FlatView, scale: float, scales: Mapping[str, float] | None) -> Tensor:
    """Per-element scale: ``scales`` maps a parameter name or name prefix (e.g. ``"0."``) to a scale."""
    check_positive("prior scale", scale, "Pass a positive standard deviation.")
    out = torch.full((view.size,), float(scale), dtype=view.dtype, device=view.device)
    for key, s in (scales or {}).items():
        check_positive(f"prior scale for {key!r}", s, "Pass a positive standard deviation.")
        hit = [n for n in view.names if n == key or n.startswith(key if key.endswith(".") else key + ".")]
        if not hit:
            raise BnnkitError(
                f"prior scale given for {key!r}, which matches no sampled parameter; "
                f"sampled parameters are: {', '.join(view.names)}."
            )
        for n in hit:
            out[view.slice(n)] = float(s)
    return out


class BoundPrior:
    """A prior laid out over a flat weight vector ``w`` (the sampled network parameters)."""

    def __init__(
        self,
        log_prob: Callable[[Tensor, dict[str, Tensor]], Tensor],
        sample: Callable[[torch.Generator], Tensor],
        extra: dict[str, Tensor] | None = None,
        extra_log_prior: Callable[[dict[str, Tensor]], Tensor | float] | None = None,
        conjugate: Mapping[str, Callable[[Tensor, torch.Generator], Tensor]] | None = None,
        value_and_grad: Callable[[Tensor], tuple[Tensor, Tensor]] | None = None,
        stacked: bool = False,
    ):
        self.log_prob = log_prob
        self.sample = sample
        self.extra = extra or {}
        self.extra_log_prior = extra_log_prior or (lambda e: 0.0)
        self.conjugate = dict(conjugate or {})
        # optional closed-form (log p(w), grad log p(w)): keeps the prior out of autograd
        self.value_and_grad = value_and_grad
        # value_and_grad also takes stacked positions [K, D] (one value per row)
        self.stacked = stacked


class Prior:
    """Base class: subclasses implement :meth:`bind`."""

    kind = "base"

    def bind(self, view: FlatView) -> BoundPrior:
        raise NotImplementedError

    def config(self) -> dict:
        return {"kind": self.kind}
