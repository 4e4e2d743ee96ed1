"""Stopping rules for :func:`bnnkit.sample`: run until the chains agree in function space.

Weight-space R-hat of a neural network never converges (the posterior is multimodal and
symmetric: chains that predict alike sit in different, permuted modes).  What a user needs to
agree is the *function*: the network's outputs at held-out inputs.  :class:`FunctionSpaceConvergence`
computes them for every kept draw as the chains run, and the rank-normalised split R-hat and bulk
ESS of every output (Vehtari et al. 2021; ArviZ's numbers, :mod:`bnnkit.diagnostics.rank_stats`).
The run stops at the first check where

    max_j R-hat(f_j) <= rhat   and   min_j ESS_bulk(f_j) >= ess

or when its budget (``num_samples``) is spent; the returned ``samples.config["stopped"]`` says
which, with the last values.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least
from .arviz_utils import ess as ess_of
from .arviz_utils import rhat as rhat_of


class FunctionSpaceConvergence:
    """Stop when the network outputs at ``inputs`` have converged across chains.

    Args:
        posterior: the :class:`~bnnkit.Posterior` being sampled (its ``forward`` gives the outputs).
        inputs: held-out inputs ``[P, ...]`` (a few dozen rows suffice; more cost more per check).
        rhat: the largest acceptable R-hat over all outputs.
        ess: the smallest acceptable bulk ESS (over all chains together) of any output.
        min_draws: draws per chain before the first check (R-hat of a few draws is noise).
    """

    def __init__(
        self, posterior: Any, inputs: Tensor, rhat: float = 1.1, ess: float = 100.0, min_draws: int = 20
    ):
        if not hasattr(posterior, "forward") or not hasattr(posterior, "split"):
            raise BnnkitError("FunctionSpaceConvergence needs the bnnkit.Posterior that is being sampled.")
        if not isinstance(inputs, Tensor) or inputs.ndim == 0 or inputs.shape[0] == 0:
            raise BnnkitError("inputs must be a tensor of held-out inputs with at least one row.")
        if not rhat > 1.0:
            raise BnnkitError(f"rhat must exceed 1 (1.01-1.1 are the usual thresholds), got {rhat!r}.")
        check_int_at_least("min_draws", min_draws, 4)
        self.posterior, self.inputs = posterior, inputs
        self.rhat, self.ess, self.min_draws = float(rhat), float(ess), min_draws
        self.reset()

    def config(self) -> dict:
        return {
            "rule": "function_space",
            "rhat": self.rhat,
            "ess": self.ess,
            "min_draws": self.min_draws,
            "num_inputs": int(self.inputs.shape[0]),
        }

    def reset(self) -> None:
        self._f: Tensor | None = None
        self.last: dict[str, float] = {}

    def outputs(self, positions: Tensor) -> Tensor:
        """Outputs ``[K, n, P_out]`` of draws ``[K, n, D]``."""
        k, n, d = positions.shape
        post = self.posterior

        def one(x: Tensor) -> Tensor:
            return post.forward(post.split(x)[0], self.inputs)

        with torch.no_grad():
            flat = positions.reshape(k * n, d)
            try:
                out = torch.func.vmap(one)(flat)
            except (RuntimeError, ValueError):  # modules vmap cannot trace
                out = torch.stack([one(x) for x in flat])
        return out.reshape(k, n, -1).double()

    def update(self, positions: Tensor) -> str | None:
        """Take the new draws ``[K, n, D]``; return why to stop, or ``None`` to go on."""
        f = self.outputs(positions)
        self._f = f if self._f is None else torch.cat([self._f, f], dim=1)
        if self._f.shape[1] < self.min_draws:
            return None
        r = float(rhat_of(self._f).max())
        e = float(ess_of(self._f).min())
        self.last = {"rhat": r, "ess": e, "draws_per_chain": int(self._f.shape[1])}
        if r <= self.rhat and e >= self.ess:
            return (
                f"converged: max function-space R-hat {r:.3f} <= {self.rhat}, min ESS {e:.0f} >= {self.ess:g}"
            )
        return None

    def budget_message(self) -> str:
        if not self.last:
            return "budget spent before the first convergence check"
        return (
            f"budget spent: max function-space R-hat {self.last['rhat']:.3f} (target {self.rhat}), min ESS "
            f"{self.last['ess']:.0f} (target {self.ess:g})"
        )


class ConvergenceWarning(UserWarning):
    """A run ended with chains that disagree in function space (R-hat above the threshold) or with
    too few effective draws (ESS below it): its predictive should be read with that in mind."""
