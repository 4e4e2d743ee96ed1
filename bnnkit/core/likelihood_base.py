"""Likelihood interface (the base class; concrete likelihoods live in :mod:`bnnkit.likelihoods`).

A likelihood maps network outputs and targets to a summed log-likelihood.  It may own extra
parameters (e.g. a learnt noise precision), which are sampled alongside the network weights under
names prefixed ``"likelihood."``.
"""

from __future__ import annotations

from torch import Tensor

from .errors import BnnkitError


class Likelihood:
    """Base class. Subclasses implement :meth:`log_prob` (summed over rows)."""

    kind: str = "base"

    def extra_params(self) -> dict[str, Tensor]:
        """Initial values of parameters this likelihood owns (sampled with the weights)."""
        return {}

    def log_prob(self, output: Tensor, target: Tensor, extra: dict[str, Tensor]) -> Tensor:
        raise NotImplementedError

    def scaled_log_prob(
        self, output: Tensor, target: Tensor, extra: dict[str, Tensor], scale: float
    ) -> Tensor:
        """``scale * log_prob(output, target, extra)``: a minibatch's log-likelihood scaled by N/M.

        A subclass may fold ``scale`` into its own arithmetic: at BNN sizes every operation on the
        autograd tape costs microseconds per step, on the way in and on the way back.
        """
        ll = self.log_prob(output, target, extra)
        return ll if scale == 1.0 else scale * ll

    #: whether :meth:`log_prob_rows` is implemented (it lets K chains share one likelihood call)
    per_row: bool = False

    def log_prob_rows(self, output: Tensor, target: Tensor, extra: dict[str, Tensor]) -> Tensor:
        """The log-likelihood of each row, ``[N]``; :meth:`log_prob` is its sum."""
        raise NotImplementedError(f"the {self.kind} likelihood has no per-row log probability.")

    def extra_log_prior(self, extra: dict[str, Tensor]) -> Tensor | float:
        """Log prior (incl. change-of-variables Jacobian) of the extra parameters."""
        return 0.0

    def log_prob_upper_bound(self, target: Tensor) -> Tensor | None:
        """An upper bound of ``log_prob`` over all outputs (``None`` when unbounded)."""
        return None

    def check(self, output: Tensor, target: Tensor) -> None:
        """Validate that ``output`` and ``target`` fit this likelihood; raise a clear error if not."""
        if output.shape[0] != target.shape[0]:
            raise BnnkitError(
                f"model output has {output.shape[0]} rows but targets have {target.shape[0]}; "
                "inputs and targets must have the same number of rows."
            )

    def config(self) -> dict:
        return {"kind": self.kind}
