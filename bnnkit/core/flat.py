"""Flat-vector view of a dict of tensors (ravel / unravel).

Algorithms work on one flat position vector: every update is then a handful of vector ops rather
than one op per parameter tensor, which is what dominates the cost at BNN-benchmark sizes.
``unravel`` returns views (no copies), so the model sees its parameters at zero cost.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping

import torch
from torch import Tensor

from .errors import BnnkitError


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

    def ravel(
        self, params: Mapping[str, Tensor], *, what: str = "the parameter dict", batch_dims: bool = True
    ) -> Tensor:
        """Concatenate ``params`` (in this view's order) into one vector; leading batch dims kept.

        ``params`` must have exactly this view's names, each with its shape (a value holding one
        number may be a scalar or of shape ``(1,)`` either way), or all with the same leading batch
        dimensions ``[..., *shape]`` when ``batch_dims``.  Anything else (an unknown, missing or
        mis-shaped entry: a transposed weight, an extra dimension) raises one
        :class:`~bnnkit.core.errors.BnnkitError` naming every problem; ``what`` names the dict
        in that message (e.g. ``"init"``).  NumPy arrays and integer tensors become tensors of
        this view's floating dtype.
        """
        if not isinstance(params, Mapping):
            raise BnnkitError(
                f"{what} must be a dict of tensors keyed by parameter name, got {type(params).__name__}; "
                f"expected {self._layout()}."
            )
        values = params
        if not self._exact(params):
            values, lead = self._match(params, what, batch_dims)
            if lead:
                return torch.cat(
                    [values[n].reshape(*lead, k) for n, k in zip(self.names, self.numels)], dim=-1
                )
            return torch.cat([values[n].reshape(k) for n, k in zip(self.names, self.numels)])
        return torch.cat([values[n].reshape(-1) for n in self.names])

    def _exact(self, params: Mapping[str, Tensor]) -> bool:
        """The common case, cheaply: exactly these names, as tensors of exactly these shapes."""
        if len(params) != len(self.names):
            return False
        for name, shape in zip(self.names, self.shapes):
            p = params.get(name)
            if not isinstance(p, Tensor) or p.shape != shape or not p.is_floating_point():
                return False
        return True

    def _match(
        self, params: Mapping[str, Tensor], what: str, batch_dims: bool
    ) -> tuple[dict[str, Tensor], tuple[int, ...]]:
        """``params`` checked by name and shape: the values (as tensors) and their batch dims."""
        known = set(self.names)
        unknown = [k for k in params if k not in known]
        missing = [n for n in self.names if n not in params]
        problems: list[str] = []
        values: dict[str, Tensor] = {}
        for name in self.names:
            if name not in params:
                continue
            v = params[name]
            if not isinstance(v, Tensor):
                try:
                    v = torch.as_tensor(v, dtype=self.dtype if self.dtype.is_floating_point else None)
                except (TypeError, ValueError, RuntimeError):
                    problems.append(f"{name!r} is a {type(v).__name__}, not a tensor")
                    continue
            if v.dtype == torch.bool or v.is_complex():
                problems.append(f"{name!r} has dtype {v.dtype}; parameters are real numbers ({self.dtype})")
                continue
            if not v.is_floating_point() and self.dtype.is_floating_point:
                v = v.to(self.dtype)  # integers: exactly representable at these sizes
            values[name] = v
        # the batch dims: none if that fits every entry, else those most entries share
        leads: dict[tuple[int, ...], int] = {}
        for name, shape in zip(self.names, self.shapes):
            if name in values:
                shp, k = tuple(values[name].shape), values[name].ndim - len(shape)
                if k > 0 and shp[k:] == tuple(shape):
                    leads[shp[:k]] = leads.get(shp[:k], 0) + 1
        candidates = [()] + (sorted(leads, key=lambda s: -leads[s]) if batch_dims else [])
        lead: tuple[int, ...] = ()
        for cand in candidates:
            if all(self._fits(values[n], s, cand) for n, s in zip(self.names, self.shapes) if n in values):
                lead = cand
                break
        else:
            lead = candidates[1] if len(candidates) > 1 and leads[candidates[1]] > 1 else ()
        for name, shape in zip(self.names, self.shapes):
            if name in values and not self._fits(values[name], shape, lead):
                given = tuple(values[name].shape)
                expected = tuple(lead) + tuple(shape)
                hint = ""
                if len(given) == len(expected) == 2 and given == expected[::-1]:
                    hint = " (transposed?)"
                elif tuple(d for d in given if d != 1) == tuple(d for d in expected if d != 1):
                    hint = " (an extra or missing dimension of size 1?)"
                elif values[name].numel() == math.prod(expected):
                    hint = " (same number of elements, different layout)"
                problems.append(f"{name!r} has shape {given}, expected {expected}{hint}")
        if not (unknown or missing or problems):
            return values, lead
        parts = []
        if unknown:
            shown = []
            for k in unknown:
                close = difflib.get_close_matches(str(k), missing or self.names, n=1)
                shown.append(f"{k!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
            parts.append(f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(shown)}")
        if missing:
            parts.append(
                f"missing key{'s' if len(missing) > 1 else ''} {', '.join(repr(m) for m in missing)}"
            )
        if problems:
            parts.append("; ".join(problems))
        extras = [m for m in missing if m.startswith(("likelihood.", "prior."))]
        hint = (
            " Entries named likelihood.* / prior.* are the likelihood's and the prior's own parameters: add "
            "posterior.initial_extras to the dict ({**weights, **posterior.initial_extras})."
            if extras
            else ""
        )
        raise BnnkitError(
            f"{what} does not match the model's parameters: {'; '.join(parts)}. It needs exactly these names "
            f"and shapes: {self._layout()}.{hint}"
        )

    @staticmethod
    def _fits(value: Tensor, shape: torch.Size, lead: tuple[int, ...]) -> bool:
        shp = tuple(value.shape)
        if shp == tuple(lead) + tuple(shape):
            return True
        # one number per batch element: a scalar and a shape-(1,) value are the same thing
        k = len(lead)
        return math.prod(shape) == 1 and shp[:k] == tuple(lead) and math.prod(shp[k:]) == 1

    def _layout(self, limit: int = 12) -> str:
        items = [f"{n} {tuple(s)}" for n, s in zip(self.names, self.shapes)]
        more = f", ... ({len(items) - limit} more)" if len(items) > limit else ""
        return ", ".join(items[:limit]) + more

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
