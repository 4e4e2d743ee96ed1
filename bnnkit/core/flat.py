"""Flat-vector view of a dict of tensors (ravel / unravel).

Algorithms work on one flat position vector: every update is then a handful of vector ops rather
than one op per parameter tensor, which is what dominates the cost at BNN-benchmark sizes.
``unravel`` returns views (no copies), so the model sees its parameters at zero cost.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch
from torch import Tensor


class FlatView:
    """Layout of a dict of tensors inside one flat vector, in insertion order."""

    def __init__(self, params: Mapping[str, Tensor]):
        if not params:
            raise ValueError("FlatView needs at least one tensor; the model has no parameters to sample.")
        self.names: tuple[str, ...] = tuple(params)
        self.shapes: tuple[torch.Size, ...] = tuple(torch.Size(p.shape) for p in params.values())
        self.numels: tuple[int, ...] = tuple(int(p.numel()) for p in params.values())
        offsets = [0]
        for n in self.numels:
            offsets.append(offsets[-1] + n)
        self.offsets: tuple[int, ...] = tuple(offsets)
        self.size: int = offsets[-1]
        first = next(iter(params.values()))
        self.dtype = first.dtype
        self.device = first.device

    def ravel(self, params: Mapping[str, Tensor]) -> Tensor:
        """Concatenate ``params`` (in this view's order) into one vector; leading batch dims kept."""
        parts = []
        for name, shape in zip(self.names, self.shapes):
            p = params[name]
            lead = p.shape[: p.ndim - len(shape)]
            parts.append(p.reshape(*lead, -1))
        return torch.cat(parts, dim=-1)

    def unravel(self, x: Tensor) -> dict[str, Tensor]:
        """Split a ``[..., size]`` vector into views shaped like the original tensors."""
        lead = x.shape[:-1]
        chunks = torch.split(x, self.numels, dim=-1)
        # A chunk already of its shape (a bias, say) is used as it is: a view would only add an
        # autograd node, a few microseconds per tensor per gradient at BNN-benchmark sizes.
        return {
            n: c if c.shape == lead + s else c.view(lead + s)
            for n, c, s in zip(self.names, chunks, self.shapes)
        }

    def slice(self, name: str) -> slice:
        i = self.names.index(name)
        return slice(self.offsets[i], self.offsets[i + 1])

    def mask(self, names: Iterable[str]) -> Tensor:
        """Boolean mask over the flat vector selecting the given tensors."""
        m = torch.zeros(self.size, dtype=torch.bool, device=self.device)
        for n in names:
            if n not in self.names:
                raise KeyError(f"unknown parameter {n!r}; known: {', '.join(self.names)}")
            m[self.slice(n)] = True
        return m

    def describe(self) -> dict[str, list[int]]:
        return {n: list(s) for n, s in zip(self.names, self.shapes)}
