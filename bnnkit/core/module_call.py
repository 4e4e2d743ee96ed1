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


def mlp_layers(
    module: nn.Module, names: Sequence[str]
) -> list[tuple[str, str | None, tuple[int, int], type | None]] | None:
    """The layers of a plain MLP ``module`` (a ``Sequential`` of ``Linear`` layers, each followed
    by at most one tanh / sigmoid / ReLU): per ``Linear``, in call order, ``(weight name, bias name
    or None, (out_features, in_features), activation type or None)``.  None where the module is
    anything else, or where ``names`` are not exactly its layers' parameters; the callers that
    write the forward themselves (a flat-vector log density, the stacked-chain MLP, the
    layer-by-layer call below) then use the module."""
    chain = sequential_layers(module)
    if chain is None:
        return None
    layers: list[tuple[str, str | None, tuple[int, int], type | None]] = []
    used: list[str] = []
    for prefix, m in chain:
        if type(m) is nn.Linear:
            wn, bn = prefix + "weight", prefix + "bias"
            if wn not in names or (m.bias is not None and bn not in names):
                return None  # e.g. a fixed parameter
            used += [wn] + ([bn] if m.bias is not None else [])
            layers.append((wn, bn if m.bias is not None else None, (m.out_features, m.in_features), None))
        elif type(m) in ACTIVATION_BACKWARD and layers and layers[-1][3] is None:
            layers[-1] = (*layers[-1][:3], type(m))
        elif type(m) is not nn.Identity:
            return None
    if not layers or sorted(used) != sorted(names):
        return None
    return layers


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
        """For a plain MLP (:func:`mlp_layers`): the forward as ``(weight index, bias index or
        None, activation or None)`` per layer over the parameter values (``names`` then
        ``fixed``), which skips ``nn.Module.__call__`` (tens of microseconds per layer at these
        sizes) and runs the same operations the modules run."""
        all_names = (*self.names, *self.fixed)
        layers = mlp_layers(self.module, all_names)
        if layers is None:
            return None
        self.plan_dicts = [m.__dict__ for m in self.module.modules()]
        index = {n: i for i, n in enumerate(all_names)}
        return [
            (index[w], None if b is None else index[b], None if act is None else ACTIVATION_BACKWARD[act][0])
            for w, b, _, act in layers
        ]

    def patched(self) -> bool:
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
        if self.plan is not None and not self.patched():
            values = (*params, *self.fixed_values)
            h = inputs
            for w, b, act in self.plan:
                h = F.linear(h, values[w], None if b is None else values[b])
                if act is not None:
                    h = act(h)
            return h
        saved = [sub._parameters[attr] for sub, attr in self.slots]
        try:
            for (sub, attr), t in zip(self.slots, (*params, *self.fixed_values)):
                sub._parameters[attr] = t
            return self.module(inputs)
        finally:
            for (sub, attr), t in zip(self.slots, saved):
                sub._parameters[attr] = t
