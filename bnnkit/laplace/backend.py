"""The bridge to curvlinops: a module copy at the MAP, the loss matching the likelihood, the data.

curvlinops (``curvlinops-for-pytorch``) works on an ``nn.Module`` whose ``nn.Parameter`` objects
are the curvature's coordinates and a ``torch.nn`` loss with ``reduction="sum"``.  Each bnnkit
likelihood maps to one such loss; the constant ``unit`` rescales curvlinops' matrix to the
curvature of the *negative log-likelihood at unit noise precision*:

* Gaussian: ``-log p(y | f) = tau/2 (y - f)^2 + const`` and ``MSELoss(sum) = (y - f)^2``, so the
  GGN of the NLL is ``tau / 2`` times that of the MSE, and the empirical Fisher (squared
  gradients) ``tau^2 / 4`` times.  Stored at ``tau = 1`` (``unit = 1/2`` or ``1/4``) and scaled
  by ``tau`` or ``tau^2`` when the noise is tuned.
* Categorical / Bernoulli: ``CrossEntropyLoss(sum)`` / ``BCEWithLogitsLoss(sum)`` *are* the NLL.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Mapping, Sequence
from types import ModuleType

import torch
from torch import Tensor, nn

from ..core.errors import BnnkitError
from ..core.posterior import Posterior
from ..likelihoods import Bernoulli, Categorical, Gaussian

INSTALL = "pip install --no-deps curvlinops-for-pytorch==3.0.1"


def curvlinops() -> ModuleType:
    """Import curvlinops' core lazily (never ``curvlinops.experimental``, which imports BackPACK).

    ``--no-deps`` because its dependency backpack-for-pytorch pulls torchvision, whose wheels
    replace a CPU torch with a CUDA build; curvlinops' other dependencies (einops, scipy, numpy,
    tqdm, einconv) are bnnkit's own.
    """
    try:
        return importlib.import_module("curvlinops")
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise BnnkitError(
            f"the Laplace approximation computes its curvature with curvlinops, which is not installed "
            f"({e}). Install it with `{INSTALL}` (no-deps: its BackPACK dependency would pull torchvision "
            "and replace a CPU torch)."
        ) from e


def loss_and_unit(likelihood, curvature: str) -> tuple[nn.Module, float]:
    """The ``torch.nn`` loss for ``likelihood`` and the factor to the unit-precision NLL curvature."""
    if isinstance(likelihood, Gaussian):
        return nn.MSELoss(reduction="sum"), (0.5 if curvature == "ggn" else 0.25)
    if isinstance(likelihood, Categorical):
        return nn.CrossEntropyLoss(reduction="sum"), 1.0
    if isinstance(likelihood, Bernoulli):
        return nn.BCEWithLogitsLoss(reduction="sum"), 1.0
    raise BnnkitError(
        f"the Laplace approximation supports the Gaussian, Categorical and Bernoulli likelihoods; got "
        f"{type(likelihood).__name__}."
    )


def module_at(
    posterior: Posterior, net: Mapping[str, Tensor], subset: Sequence[str]
) -> tuple[nn.Module, list]:
    """A copy of the posterior's module at ``net`` (fixed parameters as the posterior holds them),
    and the parameters of ``subset`` in order (the only ones with ``requires_grad``)."""
    module = copy.deepcopy(posterior.module)
    values = {**posterior.fixed, **net}
    named = dict(module.named_parameters())
    with torch.no_grad():
        for n, p in named.items():
            p.copy_(values[n])
            p.requires_grad_(n in subset)
    return module, [named[n] for n in subset]


def shaped_targets(posterior: Posterior, module: nn.Module, inputs: Tensor, targets: Tensor) -> Tensor:
    """Targets in the shape the torch loss expects for the module's output (``[N]`` -> ``[N, 1]``)."""
    if isinstance(posterior.likelihood, Categorical):
        return targets.long()
    with torch.no_grad():
        out = module(inputs[:1])
    shape = (targets.shape[0], *out.shape[1:])
    return targets.to(out.dtype).reshape(shape)


def batches(inputs: Tensor, targets: Tensor, batch_size: int) -> list[tuple[Tensor, Tensor]]:
    """The data as a fixed list of batches (curvlinops passes over it once per product)."""
    n = int(inputs.shape[0])
    return [(inputs[i : i + batch_size], targets[i : i + batch_size]) for i in range(0, n, batch_size)]
