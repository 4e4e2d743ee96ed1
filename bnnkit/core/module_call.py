"""Calling an ``nn.Module`` with substituted parameters, with low per-call overhead.

``torch.func.functional_call`` walks the module tree and checks for tied weights on every call,
which costs tens of microseconds: at BNN-benchmark sizes that is a large share of a gradient
evaluation.  :class:`ModuleCaller` resolves the (submodule, attribute) slots once and swaps the
tensors in and out around the forward call.  Modules with tied (shared) parameters, or
parametrisations, fall back to ``functional_call``, which handles them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call
from torch.nn.modules import module as _module

# elementwise activations with a one-op backward from their output: (forward, backward(g, out))
ACTIVATION_BACKWARD: dict[type, tuple] = {
    nn.Tanh: (torch.tanh, torch.ops.aten.tanh_backward),
    nn.Sigmoid: (torch.sigmoid, torch.ops.aten.sigmoid_backward),
    nn.ReLU: (torch.relu, lambda g, out: torch.ops.aten.threshold_backward(g, out, 0)),
}


def sequential_layers(module: nn.Module, prefix: str = "") -> list[tuple[str, nn.Module]] | None:
    """``(name prefix, module)`` in call order: a (nested) plain ``Sequential`` flattened, or the
    module itself; None where a hook could change what a module computes or a module is used
    twice (shared weights), so that callers writing their own forward fall back to the module."""
    seen: set[int] = set()

    def walk(mod: nn.Module, pre: str) -> list[tuple[str, nn.Module]] | None:
        if mod._forward_hooks or mod._forward_pre_hooks or id(mod) in seen:
            return None
        seen.add(id(mod))
        if type(mod) is not nn.Sequential:
            return [(pre, mod)]
        out: list[tuple[str, nn.Module]] = []
        for name, child in mod._modules.items():
            sub = None if child is None else walk(child, f"{pre}{name}.")
            if sub is None:
                return None
            out.extend(sub)
        return out

    return walk(module, prefix)


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
        self.plan = self._mlp_plan() if self.fast else None

    def _mlp_plan(self) -> list[tuple] | None:
        """For a plain ``Sequential`` of ``Linear`` and tanh / sigmoid / ReLU layers: the forward
        as ``("linear", weight index, bias index or None)`` and ``("act", fn)`` steps over the
        parameter values (``names`` then ``fixed``), which skips ``nn.Module.__call__`` (tens of
        microseconds per layer at these sizes) and runs the same operations the modules run."""
        chain = sequential_layers(self.module)
        if chain is None:
            return None
        self.plan_dicts = [m.__dict__ for m in (self.module, *(m for _, m in chain))]
        index = {n: i for i, n in enumerate((*self.names, *self.fixed))}
        plan: list[tuple] = []
        used: set[str] = set()
        for prefix, m in chain:
            if type(m) is nn.Linear:
                w, b = prefix + "weight", prefix + "bias"
                if w not in index or (m.bias is not None and b not in index):
                    return None
                used.update([w] + ([b] if m.bias is not None else []))
                plan.append(("linear", index[w], index[b] if m.bias is not None else None))
            elif type(m) in ACTIVATION_BACKWARD:
                plan.append(("act", ACTIVATION_BACKWARD[type(m)][0]))
            elif type(m) is not nn.Identity:
                return None
        return plan if used == set(index) else None

    def _patched(self) -> bool:
        """Whether a forward was patched or hooked since the plan was made (e.g. the flipout and
        local-reparameterisation estimators replace a layer's ``forward`` for one call): then the
        modules must run themselves."""
        if _module._global_forward_hooks or _module._global_forward_pre_hooks:
            return True
        for d in self.plan_dicts:
            if "forward" in d or d["_forward_hooks"] or d["_forward_pre_hooks"]:
                return True
        return False

    def __call__(self, params: Sequence[Tensor], inputs: Tensor) -> Tensor:
        """Forward pass with ``params`` (in ``names`` order) in place of the module's parameters."""
        if not self.fast:
            return functional_call(self.module, {**self.fixed, **dict(zip(self.names, params))}, (inputs,))
        if self.plan is not None and not self._patched():
            values = (*params, *self.fixed_values)
            h = inputs
            for step in self.plan:
                if step[0] == "linear":
                    h = F.linear(h, values[step[1]], None if step[2] is None else values[step[2]])
                else:
                    h = step[1](h)
            return h
        saved = [sub._parameters[attr] for sub, attr in self.slots]
        try:
            for (sub, attr), t in zip(self.slots, (*params, *self.fixed_values)):
                sub._parameters[attr] = t
            return self.module(inputs)
        finally:
            for (sub, attr), t in zip(self.slots, saved):
                sub._parameters[attr] = t
