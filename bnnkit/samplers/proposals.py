"""Independent proposal distributions for rejection and importance sampling."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_positive
from ..core.target import Target


class Proposal(Protocol):
    def sample(self, gen: torch.Generator) -> Tensor: ...

    def log_prob(self, x: Tensor) -> Tensor: ...


@dataclass(frozen=True)
class GaussianProposal:
    """``q(x) = N(mean, diag(scale^2))`` over the flat parameter vector."""

    mean: Tensor
    scale: Tensor | float

    def __post_init__(self) -> None:
        check_positive("proposal scale", torch.as_tensor(self.scale), "Pass positive standard deviations.")

    def sample(self, gen: torch.Generator) -> Tensor:
        z = torch.randn(self.mean.shape, generator=gen, dtype=self.mean.dtype, device=self.mean.device)
        return self.mean + self.scale * z

    def log_prob(self, x: Tensor) -> Tensor:
        s = torch.as_tensor(self.scale, dtype=x.dtype).expand_as(x)
        z = (x - self.mean) / s
        return (-0.5 * z * z - torch.log(s) - 0.5 * math.log(2 * math.pi)).sum(-1)

    def config(self) -> dict:
        return {"kind": "gaussian", "dim": int(self.mean.numel())}


@dataclass(frozen=True)
class PriorProposal:
    """The target's prior (``Target.prior_sample`` / ``Target.prior_log_prob``)."""

    target: Target

    def __post_init__(self) -> None:
        if self.target.prior_sample is None or self.target.prior_log_prob is None:
            raise BnnkitError(
                "the target has no prior to propose from (a plain log density); pass proposal=GaussianProposal(...)."
            )

    def sample(self, gen: torch.Generator) -> Tensor:
        return self.target.prior_sample(gen)  # type: ignore[misc]

    def log_prob(self, x: Tensor) -> Tensor:
        return self.target.prior_log_prob(x)  # type: ignore[misc]


def proposal_config(proposal: object | None) -> dict:
    if proposal is None:
        return {"kind": "prior"}
    cfg = getattr(proposal, "config", None)
    return cfg() if callable(cfg) else {"kind": type(proposal).__name__}
