"""Posterior draws: parameters stacked ``[chain, draw, ...]`` plus per-draw statistics."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from .flat import FlatView


@dataclass
class Samples:
    """Draws of a run.

    Attributes:
        positions: flat draws ``[chain, draw, D]``.
        stats: per-draw statistics ``[chain, draw]`` (``log_density``, ``accept_prob``, ``step_size``,
            ``diverging``, ``energy``, ... depending on the algorithm).
        view: layout of the flat vector; :attr:`params` unravels through it.
        config: the run configuration.
    """

    positions: Tensor
    stats: dict[str, Tensor]
    view: FlatView
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def num_chains(self) -> int:
        return int(self.positions.shape[0])

    @property
    def num_draws(self) -> int:
        return int(self.positions.shape[1])

    @property
    def params(self) -> dict[str, Tensor]:
        """Parameters as a dict of ``[chain, draw, *shape]`` tensors."""
        return self.view.unravel(self.positions)

    @property
    def dim(self) -> int:
        return int(self.view.size)

    def flat(self) -> Tensor:
        """All draws as ``[chain * draw, D]``."""
        return self.positions.reshape(-1, self.positions.shape[-1])

    def iter_flat(self, chunk: int = 256) -> Iterator[Tensor]:
        """The draws of :meth:`flat`, ``chunk`` at a time (what the predictive consumes)."""
        flat = self.flat()
        for i in range(0, flat.shape[0], chunk):
            yield flat[i : i + chunk]

    @property
    def log_weights(self) -> Tensor | None:
        """Normalised log importance weights over all draws (``None`` for unweighted samplers)."""
        if "log_weight" not in self.stats:
            return None
        lw = self.stats["log_weight"].reshape(-1).double()
        return lw - torch.logsumexp(lw, 0)

    @property
    def weights(self) -> Tensor | None:
        lw = self.log_weights
        return None if lw is None else lw.exp()

    def to_arviz(self, var_names: list[str] | None = None, max_elements: int = 1000):
        """Export to an ``arviz.InferenceData`` (posterior + sample_stats) for R-hat, ESS, plots."""
        import arviz as az  # imported lazily: a heavy import

        params = self.params
        names = var_names or list(params)
        post = {}
        for n in names:
            v = params[n]
            if v[0, 0].numel() > max_elements:
                warnings.warn(
                    f"{n} has {v[0, 0].numel()} elements; exporting the first {max_elements}.", stacklevel=2
                )
                v = v.reshape(*v.shape[:2], -1)[..., :max_elements]
            post[n.replace(".", "_")] = v.detach().double().numpy()
        stats = {k: v.detach().numpy() for k, v in self.stats.items()}
        return az.from_dict(posterior=post, sample_stats=_arviz_stats(stats))

    def summary(self, var_names: list[str] | None = None):
        import arviz as az

        return az.summary(self.to_arviz(var_names))

    def acceptance_rate(self) -> float:
        key = "accept_prob" if "accept_prob" in self.stats else "is_accepted"
        return float(self.stats[key].double().mean()) if key in self.stats else float("nan")

    def num_divergences(self) -> int:
        return int(self.stats["diverging"].sum()) if "diverging" in self.stats else 0

    def __repr__(self) -> str:
        return (
            f"Samples(chains={self.num_chains}, draws={self.num_draws}, dim={self.positions.shape[-1]}, "
            f"stats={sorted(self.stats)})"
        )


def _arviz_stats(stats: dict[str, Any]) -> dict[str, Any]:
    # ArviZ's conventional names for the diagnostics it knows about.
    rename = {"log_density": "lp", "accept_prob": "acceptance_rate", "num_steps": "n_steps"}
    return {rename.get(k, k): v for k, v in stats.items()}
