"""Self-normalised importance sampling.

Draw ``x_s ~ q`` independently and weight each by ``w_s = p~(x_s) / q(x_s)`` (``p~`` the
unnormalised posterior), stored as the per-draw stat ``log_weight``.  Expectations are
``E[f] ~ sum_s w_s f(x_s) / sum_s w_s``, normalised with log-sum-exp (``Samples.log_weights``);
the predictive in :mod:`bnnkit.predict` uses these weights.  The Kish effective sample size
``(sum w)^2 / sum w^2`` measures weight degeneracy: when it is a tiny fraction of the draws the
estimate rests on a handful of points and a warning is raised.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

import torch
from torch import Tensor

from ..core.samples import Samples
from ..core.target import Target
from ..core.types import Batch, Kernel
from ..diagnostics import warn_if_degenerate
from .proposals import PriorProposal, Proposal, proposal_config

S = TypeVar("S")


def independent_init(target: Target, state: Callable[[Tensor, Tensor], S]) -> Callable[[Tensor, Batch], S]:
    """The ``init`` of a sampler of independent draws (importance, rejection): the state
    ``state(position, log_density)`` at the initial position, without a gradient."""

    def init(position: Tensor, batch: Batch) -> S:
        with torch.no_grad():
            return state(position.detach().clone(), target.log_prob(position, batch))

    return init


class ImportanceState(NamedTuple):
    position: Tensor
    log_density: Tensor


class ImportanceInfo(NamedTuple):
    log_density: Tensor
    log_weight: Tensor


@dataclass(frozen=True)
class ImportanceSampler:
    proposal: Any = None
    name: str = "importance"

    def config(self) -> dict:
        return {"proposal": proposal_config(self.proposal)}

    def build(self, target: Target) -> Kernel:
        proposal: Proposal = PriorProposal(target) if self.proposal is None else self.proposal

        init = independent_init(target, ImportanceState)

        def step(
            state: ImportanceState, batch: Batch, gen: torch.Generator
        ) -> tuple[ImportanceState, ImportanceInfo]:
            with torch.no_grad():
                x = proposal.sample(gen)
                lp = target.log_prob(x, batch)
                lw = lp - proposal.log_prob(x)
            return ImportanceState(x, lp), ImportanceInfo(lp, torch.nan_to_num(lw, nan=-torch.inf))

        return Kernel(init, step, None)


def importance_summary(samples: Samples, min_ess_fraction: float = 0.01) -> dict[str, Any]:
    """Weight ESS, normalised weights and weighted mean/covariance of the flat draws.

    Warns when the weight ESS is below ``min_ess_fraction`` of the number of draws.
    """
    lw = samples.log_weights
    if lw is None:
        raise ValueError("these samples carry no importance weights (stat 'log_weight').")
    n = lw.numel()
    ess = warn_if_degenerate(lw, min_ess_fraction)
    w = lw.exp()
    x = samples.flat().double()
    mean = (w[:, None] * x).sum(0)
    c = x - mean
    cov = (w[:, None] * c).T @ c
    return {"ess": ess, "ess_fraction": ess / n, "weights": w, "mean": mean, "cov": cov}
