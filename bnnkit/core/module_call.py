"""Calling an ``nn.Module`` with substituted parameters, with low per-call overhead.

``torch.func.functional_call`` walks the module tree and checks for tied weights on every call,
which costs tens of microseconds: at BNN-benchmark sizes that is a large share of a gradient
evaluation.  :class:`ModuleCaller` resolves the (submodule, attribute) slots once and swaps the
tensors in and out around the forward call.  Modules with tied (shared) parameters, or
parametrisations, fall back to ``functional_call``, which handles them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from torch import Tensor, nn
from torch.func import functional_call


class ModuleCaller:
    def __init__(self, module: nn.Module, names: Sequence[str], fixed: Mapping[str, Tensor]):
        self.module = module
        self.names = tuple(names)
        self.fixed = dict(fixed)
        counts: dict[int, int] = {}
        for _, p in module.named_parameters(remove_duplicate=False):
            counts[id(p)] = counts.get(id(p), 0) + 1
        tied = any(c > 1 for c in counts.values())
        parametrized = any(hasattr(m, "parametrizations") for m in module.modules())
        self.fast = not (tied or parametrized)
        self.slots: list[tuple[nn.Module, str]] = []
        if self.fast:
            for n in (*self.names, *self.fixed):
                path, _, attr = n.rpartition(".")
                sub = module.get_submodule(path) if path else module
                self.slots.append((sub, attr))
            self.fixed_values = list(self.fixed.values())

    def __call__(self, params: Sequence[Tensor], inputs: Tensor) -> Tensor:
        """Forward pass with ``params`` (in ``names`` order) in place of the module's parameters."""
        if not self.fast:
            return functional_call(self.module, {**self.fixed, **dict(zip(self.names, params))}, (inputs,))
        saved = [sub._parameters[attr] for sub, attr in self.slots]
        try:
            for (sub, attr), t in zip(self.slots, (*params, *self.fixed_values)):
                sub._parameters[attr] = t
            return self.module(inputs)
        finally:
            for (sub, attr), t in zip(self.slots, saved):
                sub._parameters[attr] = t
