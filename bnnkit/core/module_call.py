"""Calling an ``nn.Module`` with substituted parameters, with low per-call overhead.

``torch.func.functional_call`` walks the module tree and checks for tied weights on every call,
which costs tens of microseconds: at BNN-benchmark sizes that is a large share of a gradient
evaluation.  :class:`ModuleCaller` resolves the (submodule, attribute) slots once and swaps the
tensors in and out around the forward call; a plain MLP it runs layer by layer instead
(:func:`bnnkit.core.mlp.forward`).  Modules with tied (shared) parameters, or parametrisations,
fall back to ``functional_call``, which handles them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from torch import Tensor, nn
from torch.func import functional_call
from torch.nn.modules import module as _module

from .mlp import activation, forward, mlp_layers


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
        """For a plain MLP (:func:`bnnkit.core.mlp.mlp_layers`): ``(weight index, bias index or
        None, activation or None)`` per layer over the parameter values (``names`` then
        ``fixed``), for :func:`bnnkit.core.mlp.forward`, which skips ``nn.Module.__call__`` (tens
        of microseconds per layer at these sizes) and runs the same operations the modules run."""
        all_names = (*self.names, *self.fixed)
        index = {n: i for i, n in enumerate(all_names)}
        layers = mlp_layers(self.module, all_names, index.__getitem__)
        if layers is None:
            return None
        self.plan_dicts = [m.__dict__ for m in self.module.modules()]
        return [(layer.w, layer.b, activation(layer.act)) for layer in layers]

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
            return forward(
                inputs, [(values[w], None if b is None else values[b], act) for w, b, act in self.plan]
            )
        saved = [sub._parameters[attr] for sub, attr in self.slots]
        try:
            for (sub, attr), t in zip(self.slots, (*params, *self.fixed_values)):
                sub._parameters[attr] = t
            return self.module(inputs)
        finally:
            for (sub, attr), t in zip(self.slots, saved):
                sub._parameters[attr] = t
