"""One call for the benchmarks: fit, tune by marginal likelihood, draw."""

from __future__ import annotations

from collections.abc import Mapping

from torch import Tensor

from ..core.posterior import Posterior
from ..core.samples import Samples
from .posterior import Laplace, Subset


def fit_laplace(
    posterior: Posterior,
    data: tuple[Tensor, Tensor],
    *,
    subset: Subset = "last_layer",
    structure: str = "kron",
    curvature: str = "ggn",
    map: str | Mapping[str, Tensor] | Tensor | None = None,  # noqa: A002
    steps: int = 1000,
    lr: float = 1e-2,
    batch_size: int | None = None,
    marglik: bool = True,
    noise: bool | None = None,
    num_samples: int = 100,
    seed: int = 0,
    **laplace_kwargs,
) -> tuple[Laplace, Samples]:
    """Fit a :class:`Laplace` to ``posterior`` on ``data`` and return it with ``num_samples`` draws.

    The MAP is found by ``steps`` of Adam (or taken from ``map``, e.g. ``"module"`` for a network
    trained elsewhere); with ``marglik`` the prior precision (and the Gaussian noise, unless
    ``noise=False``) are tuned by the Laplace evidence.  Predict with the tuned posterior:
    ``bnnkit.predict(la.posterior, samples, X)`` (sampled) or ``la.predict(X)`` (linearised).
    """
    la = Laplace(posterior, subset=subset, structure=structure, curvature=curvature, **laplace_kwargs)
    la.fit(data, map, steps=steps, lr=lr, batch_size=batch_size, seed=seed)
    if marglik:
        la.optimize_marglik(prior=True, noise=noise)
    return la, la.sample(num_samples, seed=seed)
