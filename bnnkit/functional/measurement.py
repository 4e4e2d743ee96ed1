"""Measurement sets ``X_M`` for the functional prior, redrawn at every sampler step.

Each draw is ``num_from_data`` rows of the training inputs (or of the current minibatch) plus
``num_uniform`` points uniform in a box; the default box is the per-dimension training range
widened by ``margin * range`` on each side::

    low_j  = min_i x_ij - margin (max_i x_ij - min_i x_ij)
    high_j = max_i x_ij + margin (max_i x_ij - min_i x_ij)

Data rows are drawn without replacement when there are enough, with replacement otherwise (the
1-D protocol draws 40 points from 20 inputs).  Exact duplicate rows make ``K(X_M, X_M)`` singular,
so they are removed by default, and a draw may then hold fewer than the requested ``M`` points.
All randomness comes from the ``torch.Generator`` passed to ``sample``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_finite_rows

_SOURCES = ("train", "batch")
Bound = float | Sequence[float] | Tensor | None


def _as_matrix(name: str, x: Tensor) -> Tensor:
    if not isinstance(x, Tensor):
        raise BnnkitError(f"{name} must be a torch.Tensor of shape [N, d], got {type(x)}.")
    if x.ndim == 1:
        x = x.reshape(-1, 1)
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1:
        raise BnnkitError(f"{name} must be a non-empty 2-D tensor [N, d], got shape {tuple(x.shape)}.")
    check_finite_rows(name, x)
    return x.detach()


def _bound(name: str, value: Bound) -> tuple[float, ...] | None:
    if value is None:
        return None
    v = torch.as_tensor(value, dtype=torch.float64).detach().flatten()
    if v.numel() == 0 or not torch.isfinite(v).all():
        raise BnnkitError(f"{name} must be a finite number or a sequence of them, got {value!r}.")
    return tuple(float(a) for a in v)


def dedupe_rows(x: Tensor) -> Tensor:
    """Drop exact duplicate rows, keeping the first occurrence of each in the original order."""
    if x.shape[0] < 2:
        return x
    uniq, inverse = torch.unique(x, dim=0, return_inverse=True)
    if uniq.shape[0] == x.shape[0]:
        return x
    order = torch.arange(x.shape[0], device=x.device)
    first = torch.full((uniq.shape[0],), x.shape[0], dtype=order.dtype, device=x.device)
    first = first.scatter_reduce(0, inverse, order, reduce="amin")
    return x[first.sort().values]


def _rows(x: Tensor, k: int, generator: torch.Generator) -> Tensor:
    """``k`` rows of ``x``: without replacement when ``k <= len(x)``, with replacement otherwise."""
    if k == 0:
        return x[:0]
    n = x.shape[0]
    if k <= n:
        idx = torch.randperm(n, generator=generator, device=generator.device)[:k]
    else:
        idx = torch.randint(n, (k,), generator=generator, device=generator.device)
    return x[idx.to(x.device)]


@dataclass(frozen=True)
class MeasurementPoints:
    """How to draw ``X_M``: ``num_from_data`` data rows plus ``num_uniform`` uniform box points
    plus ``num_edge`` edge points.

    Args:
        num_from_data: rows taken from the inputs named by ``source``.
        num_uniform: points uniform in the box ``[low, high]``.
        num_edge: points just beyond the data along one input: a training row drawn at random with
            one of its inputs ``j`` (at random) moved past the training range on a random side,
            uniformly into the margin: ``max_j + u (high_j - max_j)`` or ``min_j - u (min_j -
            low_j)``.  Unlike box points, which in many dimensions fall far from every row, they
            sit next to the data, where extrapolating along one input takes a model first.
        source: ``"train"`` (all training inputs) or ``"batch"`` (the current minibatch's inputs).
        margin: the default box is the training range widened by ``margin * range`` on each side
            (a dimension with zero range stays at its constant value).
        low, high: explicit box bounds (a number or one per dimension), replacing the data-derived
            bound on that side.
        dedupe: remove exact duplicate rows (they make ``K`` singular).

    Use :meth:`bind` with the training inputs to get a sampler, or :meth:`fixed` for a constant set.
    """

    num_from_data: int = 40
    num_uniform: int = 40
    num_edge: int = 0
    source: str = "train"
    margin: float = 0.1
    low: Bound = None
    high: Bound = None
    dedupe: bool = True

    def __post_init__(self) -> None:
        for name in ("num_from_data", "num_uniform", "num_edge"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise BnnkitError(f"{name} must be an integer >= 0, got {v!r}.")
        if self.num_from_data + self.num_uniform + self.num_edge < 1:
            raise BnnkitError(
                "num_from_data + num_uniform must be at least 1: the prior needs measurement points "
                "(the paper's 1-D setting uses 40 + 40)."
            )
        if self.source not in _SOURCES:
            raise BnnkitError(f"source must be 'train' or 'batch', got {self.source!r}.")
        m = float(self.margin)
        if not math.isfinite(m) or m < 0:
            raise BnnkitError(f"margin must be a finite number >= 0, got {self.margin!r}.")
        low, high = _bound("low", self.low), _bound("high", self.high)
        if low is not None and high is not None:
            if len(low) != len(high) and 1 not in (len(low), len(high)):
                raise BnnkitError(
                    f"low has {len(low)} values and high has {len(high)}; give matching lengths."
                )
            lo, hi = torch.tensor(low), torch.tensor(high)
            if (lo >= hi).any():
                raise BnnkitError(f"low must be < high in every dimension, got low={low}, high={high}.")
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)

    @property
    def max_points(self) -> int:
        """Largest ``M`` a draw can have (fewer after deduplication)."""
        return self.num_from_data + self.num_uniform + self.num_edge

    def bind(self, train_x: Tensor) -> BoundMeasurementPoints:
        """Compute the box from ``train_x`` [N, d] and return the sampler."""
        x = _as_matrix("train_x", train_x)
        d = x.shape[1]
        lo_data, hi_data = x.min(0).values, x.max(0).values
        width = hi_data - lo_data
        low = lo_data - self.margin * width
        high = hi_data + self.margin * width
        for name, value in (("low", self.low), ("high", self.high)):
            if value is None:
                continue
            if len(value) not in (1, d):
                raise BnnkitError(f"{name} has {len(value)} values but the inputs have {d} columns.")
            v = torch.tensor(value, dtype=x.dtype, device=x.device).expand(d)
            if name == "low":
                low = v.clone()
            else:
                high = v.clone()
        if (self.low is not None or self.high is not None) and (low >= high).any():
            raise BnnkitError(
                f"the measurement box needs low < high in every dimension, got low={low.tolist()}, "
                f"high={high.tolist()} (an explicit bound combined with the training range)."
            )
        # Checked once, and only where sample() can use it (data rows alone, from the training set).
        can_skip = self.dedupe and self.source == "train" and self.num_uniform == 0 and self.num_edge == 0
        distinct = can_skip and dedupe_rows(x).shape[0] == x.shape[0]
        return BoundMeasurementPoints(self, x, low, high, distinct, lo_data, hi_data)

    @staticmethod
    def fixed(x: Tensor, dedupe: bool = True) -> FixedMeasurementPoints:
        """A constant ``X_M`` (e.g. all training inputs when ``N <= 1000``, the UCI protocol)."""
        return FixedMeasurementPoints(x, dedupe)

    def config(self) -> dict:
        return {
            "num_from_data": self.num_from_data,
            "num_uniform": self.num_uniform,
            "num_edge": self.num_edge,
            "source": self.source,
            "margin": self.margin,
            "low": None if self.low is None else list(self.low),
            "high": None if self.high is None else list(self.high),
            "dedupe": self.dedupe,
        }


@dataclass(frozen=True, eq=False)
class BoundMeasurementPoints:
    """:class:`MeasurementPoints` bound to training inputs; ``sample`` draws a fresh ``X_M``."""

    spec: MeasurementPoints
    train_x: Tensor = field(repr=False)
    low: Tensor
    high: Tensor
    train_distinct: bool = False  # data-only draws from training rows known to be distinct (bind)
    data_low: Tensor | None = None  # the training range, for edge points
    data_high: Tensor | None = None

    @property
    def input_dim(self) -> int:
        return self.train_x.shape[1]

    def sample(self, batch_x: Tensor | None, generator: torch.Generator) -> Tensor:
        """Draw ``X_M`` [M', d] (``M' <= num_from_data + num_uniform``) using only ``generator``.

        ``batch_x`` is the current minibatch's inputs; it is only read when ``source="batch"``.
        """
        if not isinstance(generator, torch.Generator):
            raise BnnkitError("sample needs a torch.Generator: all randomness is drawn from it.")
        spec = self.spec
        if spec.source == "batch":
            if batch_x is None:
                raise BnnkitError(
                    "source='batch' needs the minibatch inputs: call sample(batch_x, generator)."
                )
            pool = _as_matrix("batch_x", batch_x)
            if pool.shape[1] != self.input_dim:
                raise BnnkitError(
                    f"batch_x has {pool.shape[1]} columns but the training inputs have {self.input_dim}."
                )
            pool = pool.to(self.train_x)
        else:
            pool = self.train_x
        parts = [_rows(pool, spec.num_from_data, generator)]
        if spec.num_uniform:
            u = torch.rand(
                spec.num_uniform,
                self.input_dim,
                generator=generator,
                device=generator.device,
                dtype=pool.dtype,
            ).to(pool.device)
            parts.append(self.low + u * (self.high - self.low))
        if spec.num_edge:
            parts.append(self._edge(spec.num_edge, generator))
        xm = torch.cat(parts)
        # Rows drawn without replacement from distinct training rows cannot repeat: skip the
        # row-wise unique (3 ms per step at M = 1000), which would return xm unchanged.
        no_repeats = self.train_distinct and spec.num_from_data <= pool.shape[0]
        return dedupe_rows(xm) if spec.dedupe and not no_repeats else xm

    def _edge(self, k: int, generator: torch.Generator) -> Tensor:
        """``k`` edge points (see :class:`MeasurementPoints`), drawn from ``generator`` only."""
        x, d = self.train_x, self.input_dim
        dev = generator.device
        rows = torch.randint(x.shape[0], (k,), generator=generator, device=dev).to(x.device)
        dim = torch.randint(d, (k,), generator=generator, device=dev).to(x.device)
        up = torch.rand(k, generator=generator, device=dev, dtype=x.dtype).to(x.device) < 0.5
        u = torch.rand(k, generator=generator, device=dev, dtype=x.dtype).to(x.device)
        lo, hi = self.data_low[dim], self.data_high[dim]
        value = torch.where(up, hi + u * (self.high[dim] - hi), lo - u * (lo - self.low[dim]))
        out = x[rows].clone()
        out[torch.arange(k, device=x.device), dim] = value
        return out

    def config(self) -> dict:
        return {**self.spec.config(), "box_low": self.low.tolist(), "box_high": self.high.tolist()}


@dataclass(frozen=True, eq=False)
class FixedMeasurementPoints:
    """The same ``X_M`` at every step; ``bind`` returns itself so it stands in for a bound sampler."""

    points: Tensor = field(repr=False)
    dedupe: bool = True

    def __post_init__(self) -> None:
        x = _as_matrix("points", self.points)
        object.__setattr__(self, "points", dedupe_rows(x) if self.dedupe else x)

    @property
    def input_dim(self) -> int:
        return self.points.shape[1]

    @property
    def max_points(self) -> int:
        return self.points.shape[0]

    def bind(self, train_x: Tensor | None = None) -> FixedMeasurementPoints:
        if train_x is not None:
            x = _as_matrix("train_x", train_x)
            if x.shape[1] != self.input_dim:
                raise BnnkitError(
                    f"the fixed measurement points have {self.input_dim} columns but train_x has "
                    f"{x.shape[1]}."
                )
        return self

    def sample(self, batch_x: Tensor | None = None, generator: torch.Generator | None = None) -> Tensor:
        return self.points

    def config(self) -> dict:
        return {"fixed": True, "num_points": self.points.shape[0], "dedupe": self.dedupe}
