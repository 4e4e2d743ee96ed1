"""A short MAP phase before sampling: each chain starts at a mode found from its own prior draw.

``map_init(posterior, data, steps)`` returns an ``init`` for :func:`bnnkit.sample`.  Chain ``c``
draws its starting point from the prior with its own generator, then runs ``steps`` of Adam on
the negative log posterior (minibatches drawn from the same generator), so a warm start is as
reproducible as a cold one.  Starting SG-MCMC near a mode skips the long climb from a prior draw
that otherwise eats most of a short run's burn-in; chains still start from different modes.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from .errors import BnnkitError, check_int_at_least, check_positive
from .posterior import Posterior


def map_init(
    posterior: Posterior,
    data: tuple[Tensor, Tensor],
    steps: int = 500,
    lr: float = 1e-2,
    batch_size: int | None = None,
) -> Callable[[int, torch.Generator], dict[str, Tensor]]:
    """An ``init`` that starts every chain from ``steps`` Adam steps of MAP from a prior draw.

    Args:
        posterior: the posterior that will be sampled (``num_data`` scales minibatches as usual).
        data: ``(inputs, targets)``, the whole training set.
        steps: Adam steps per chain.
        lr: Adam's learning rate.
        batch_size: rows per step (``None``: full batch).
    """
    if not isinstance(posterior, Posterior):
        raise BnnkitError("map_init needs a bnnkit.Posterior (it optimises the posterior's log density).")
    check_int_at_least("steps", steps, 1)
    check_positive("lr", lr)
    posterior.check_data(data)
    inputs, targets = data
    n = int(inputs.shape[0])
    if batch_size is not None and not 1 <= batch_size <= n:
        raise BnnkitError(f"batch_size must lie in [1, {n}], got {batch_size!r}.")
    if batch_size is not None and batch_size < n and posterior.num_data is None:
        raise BnnkitError("a minibatch MAP phase needs the Posterior's num_data (the training-set size N).")

    def init(chain: int, gen: torch.Generator) -> dict[str, Tensor]:
        x = posterior.initial_position("prior", gen).detach().clone().requires_grad_(True)
        opt = torch.optim.Adam([x], lr=lr)
        for _ in range(steps):
            if batch_size is None or batch_size >= n:
                batch = (inputs, targets)
            else:
                idx = torch.randint(n, (batch_size,), generator=gen)
                batch = (inputs[idx], targets[idx])
            opt.zero_grad(set_to_none=True)
            loss = -posterior.log_prob_flat(x, batch)
            loss.backward()
            opt.step()
        if not torch.isfinite(x).all():
            raise BnnkitError(f"the MAP phase of chain {chain} diverged; lower lr (e.g. by 10x).")
        return posterior.view.unravel(x.detach())

    init.__name__ = f"map_init(steps={steps}, lr={lr}, batch_size={batch_size})"
    return init
