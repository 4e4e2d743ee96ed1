"""Rejection sampling: exact, independent draws.

With proposal ``q`` and a bound ``k`` such that ``p~(x) <= k q(x)`` everywhere (``p~`` the
unnormalised posterior), repeat::

    x ~ q,  u ~ U(0, 1);   accept x if  u < p~(x) / (k q(x))

Default (``proposal=None``): the prior as proposal and ``k`` the maximum of the likelihood, so the
acceptance probability is ``L(x) / max L``; this is safe for likelihoods bounded above (Bernoulli,
Categorical, Gaussian with fixed noise, where the maximum is attained at zero residual).  The
expected number of proposals per accepted draw is ``k / Z``; it is reported per draw as the stat
``num_proposals``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least
from ..core.target import Target
from ..core.types import Batch, Kernel
from .importance import independent_init
from .proposals import PriorProposal, Proposal, proposal_config


class RejectionState(NamedTuple):
    position: Tensor
    log_density: Tensor


class RejectionInfo(NamedTuple):
    log_density: Tensor
    num_proposals: Tensor
    accept_prob: Tensor
    is_accepted: Tensor


@dataclass(frozen=True)
class RejectionSampler:
    proposal: Any = None
    log_bound: float | None = None
    max_proposals: int = 1_000_000
    name: str = "rejection"

    def __post_init__(self) -> None:
        check_int_at_least("max_proposals", self.max_proposals, 1)
        if self.proposal is not None and self.log_bound is None:
            raise BnnkitError(
                "rejection sampling with a custom proposal needs log_bound = log k with p~(x) <= k q(x) for all x."
            )

    def config(self) -> dict:
        return {
            "proposal": proposal_config(self.proposal),
            "log_bound": self.log_bound,
            "max_proposals": self.max_proposals,
        }

    def build(self, target: Target) -> Kernel:
        if self.proposal is None:
            prior = PriorProposal(target)
            if target.log_likelihood is None:
                raise BnnkitError(
                    "the prior-proposal default needs a Posterior target (with a log-likelihood)."
                )

            def log_ratio(x: Tensor, batch: Batch) -> tuple[Tensor, Tensor]:
                ll = target.log_likelihood(x, batch)  # type: ignore[misc]
                if self.log_bound is not None:
                    bound = torch.as_tensor(self.log_bound, dtype=ll.dtype)
                elif target.log_likelihood_bound is not None:
                    bound = target.log_likelihood_bound(batch).to(ll.dtype)
                else:
                    raise BnnkitError("no likelihood bound available; pass log_bound=log(max likelihood).")
                return ll - bound, ll + prior.log_prob(x)

            proposal: Proposal = prior
        else:
            proposal = self.proposal

            def log_ratio(x: Tensor, batch: Batch) -> tuple[Tensor, Tensor]:
                lp = target.log_prob(x, batch)
                return lp - self.log_bound - proposal.log_prob(x), lp

        max_n = self.max_proposals

        def draw(batch: Batch, gen: torch.Generator) -> tuple[Tensor, Tensor, int]:
            with torch.no_grad():
                for n in range(1, max_n + 1):
                    x = proposal.sample(gen)
                    lr, lp = log_ratio(x, batch)
                    if float(lr) > 1e-6:
                        raise BnnkitError(
                            f"the bound is violated: p~(x) / (k q(x)) = exp({float(lr):.3g}) > 1 at a proposed point, "
                            "so the draws would be wrong. Increase log_bound (or use a wider proposal)."
                        )
                    u = torch.rand((), generator=gen, dtype=torch.float64)
                    if float(torch.log(u)) < float(lr):
                        return x, lp, n
            raise BnnkitError(
                f"no proposal accepted in {max_n} tries: the proposal is too far from the posterior or the "
                "bound too loose. Use a proposal closer to the posterior (e.g. a Gaussian around a mode), a "
                "tighter bound, or an MCMC sampler."
            )

        init = independent_init(target, RejectionState)

        def step(
            state: RejectionState, batch: Batch, gen: torch.Generator
        ) -> tuple[RejectionState, RejectionInfo]:
            x, lp, n = draw(batch, gen)
            dt = x.dtype
            info = RejectionInfo(lp, torch.tensor(n), torch.tensor(1.0 / n, dtype=dt), torch.tensor(True))
            return RejectionState(x, lp), info

        return Kernel(init, step, None)
