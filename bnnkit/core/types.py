"""Shared type aliases and the algorithm protocol.

An algorithm ("kernel") is a pair of pure functions over a flat position vector::

    state = kernel.init(position, batch)
    state, info = kernel.step(state, batch, generator)

``state`` is a NamedTuple of tensors holding exactly what the next step needs; ``info`` is a
NamedTuple of per-step diagnostics.  Both are plain tensors, so a state can be checkpointed with
``torch.save`` and restored bit-for-bit.  Warm-up tuning is a separate pure component
(:class:`Adaptation`) that rewrites the tunable fields of a state between steps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, NamedTuple, Protocol

import torch
from torch import Tensor

Params = dict[str, Tensor]
"""Model parameters as a mapping from ``named_parameters`` names to tensors."""

Batch = Any
"""Whatever the log density consumes: usually ``(inputs, targets)``, or ``None``."""

LogDensityFn = Callable[[Mapping[str, Tensor], Batch], Tensor]
"""A log density over a dict of tensors, up to an additive constant."""


class Kernel(NamedTuple):
    """A built algorithm: pure ``init``/``step`` functions and an optional warm-up adaptation.

    ``fit_steps``: an optimisation algorithm (variational inference, MAP) first takes this many
    steps that fit its state (their ``info.collect`` is false, so no draw is kept), and only then
    steps that draw from what it fitted.  The driver counts them in the progress bar and
    checkpoints during them as it does during warm-up; samplers leave it at 0.
    """

    init: Callable[[Tensor, Batch], Any]
    step: Callable[[Any, Batch, torch.Generator], tuple[Any, Any]]
    adaptation: Adaptation | None = None
    fit_steps: int = 0


class Adaptation(NamedTuple):
    """Warm-up tuning as pure functions of tensor states.

    ``init(state, num_warmup)`` returns the adaptation state; ``update(astate, state, info)``
    returns ``(astate, state)`` with tuned fields replaced; ``finalize(astate, state)`` returns the
    state to sample with once warm-up is over.
    """

    init: Callable[[Any, int], Any]
    update: Callable[[Any, Any, Any], tuple[Any, Any]]
    finalize: Callable[[Any, Any], Any]


class Algorithm(Protocol):
    """Hyperparameters of an algorithm, buildable against a :class:`~bnnkit.core.target.Target`.

    Optional attributes, declared as class attributes or properties, are listed (with their
    defaults) by :class:`Capabilities`, through which the driver reads them.
    """

    name: str

    def build(self, target: Any) -> Kernel:  # pragma: no cover - protocol
        ...

    def config(self) -> dict[str, Any]:  # pragma: no cover - protocol
        ...


@dataclass(frozen=True)
class Capabilities:
    """What the driver needs to know about an algorithm besides ``build`` and ``config``.

    Each field is the algorithm's attribute of the same name, or the default below where the
    algorithm declares none (:meth:`of`).
    """

    needs_model: bool = False
    """``build(target, model=posterior)`` needs the model itself, not only its flat log density
    (variational inference: the network's forward, likelihood and prior)."""
    default_init: Any = None
    """The ``init=`` used when the caller gives none (None: ``"prior"`` for a posterior)."""
    vectorizable: bool = False
    """Its chains can run as one computation over stacked positions ``[K, D]``."""
    not_vectorizable_because: str | None = None
    """Why not, when ``vectorizable`` is false (the driver's error message says it)."""
    sampling_fraction: float = 1.0
    """The share of steps that keep draws (a cyclical schedule's sampling stages)."""

    @classmethod
    def of(cls, algorithm: Any) -> Capabilities:
        return cls(**{f.name: getattr(algorithm, f.name, f.default) for f in fields(cls)})
