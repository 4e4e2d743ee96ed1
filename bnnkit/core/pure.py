"""Side-effect-free log densities and compiled ``scan`` loops, shared by the fused samplers.

A fused sampler (:mod:`bnnkit.sgmcmc.fused` for SGLD / SGHMC, :mod:`bnnkit.samplers.fused_hmc`
for HMC) runs a block of steps as one ``torch.compile``-d ``scan``.  ``scan`` refuses side
effects in its body, and a :class:`~bnnkit.Posterior`'s fast module call swaps the flat weights
into the module (a side effect), so :func:`pure_log_prob` writes the same log density on views of
the flat ``w`` instead, ``(N/M) log p(y | f(x; w)) + log p(w)``: by hand for an MLP
(:func:`mlp_log_prob`), through ``torch.func.functional_call`` for other networks without buffers
(:func:`module_log_prob`).
:func:`compile_scan` compiles ``scan(step, carry, xs)`` once for every block length and
:func:`call_scan` calls it, starting dynamo's cache afresh when a process has compiled more
settings than dynamo's per-function limit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from .errors import BnnkitError
from .mlp import activation, forward, mlp_layers
from .target import Target
from .types import Batch


def mlp_log_prob(posterior: Any) -> Callable[[Tensor, Batch], Tensor] | None:
    """A side-effect-free log density of an MLP posterior (``Sequential`` of ``Linear`` and
    tanh / sigmoid / ReLU), or None where the posterior is something else.

    Same value as ``posterior.log_prob_flat``: ``(N/M) log p(y | f(x; w)) + log p(w)``, with the
    forward (:func:`bnnkit.core.mlp.forward`) on views of the flat ``w`` instead of swapping them
    into the module; in
    float32 its ``tanh`` is :func:`bnnkit.core.fast_tanh.fast_tanh` (at most 1.5 ulp from
    ``torch.tanh``, a fifth of a full-batch gradient's time less inside a compiled block).
    """
    if getattr(posterior, "d_net", None) != getattr(getattr(posterior, "view", None), "size", -1):
        return None  # extras (a learnt noise or prior scale)
    view = posterior.view
    found = mlp_layers(posterior.module, view.names, view.slice)
    if found is None:
        return None
    layers = [(layer.w, layer.shape, layer.b, activation(layer.act, fast_tanh32=True)) for layer in found]
    likelihood, prior, num_data = posterior.likelihood, posterior.bound_prior, posterior.num_data

    def log_prob(x: Tensor, batch: Batch) -> Tensor:
        inputs, targets = batch
        h = forward(
            inputs.to(x.dtype),
            [(x[w].view(shape), None if b is None else x[b], act) for w, shape, b, act in layers],
        )
        ll = likelihood.log_prob(h, targets, {})
        if num_data is not None:
            ll = ll * (num_data / inputs.shape[0])
        return ll + prior.log_prob(x, {})

    return log_prob


def module_log_prob(posterior: Any) -> Callable[[Tensor, Batch], Tensor] | None:
    """A side-effect-free log density of any posterior whose network has no buffers and no
    dropout in training mode (a CNN, say), or None: ``torch.func.functional_call`` of the module
    with its parameters as views of the flat ``w`` (it swaps them in and out inside the traced
    graph, which ``scan`` accepts).  Same value as ``posterior.log_prob_flat``."""
    if getattr(posterior, "d_net", None) != getattr(getattr(posterior, "view", None), "size", -1):
        return None
    module = posterior.module
    if any(True for _ in module.buffers()):
        return None  # e.g. batch-norm statistics, updated in place by a forward in training mode
    if any(isinstance(m, nn.modules.dropout._DropoutNd) and m.training for m in module.modules()):
        return None  # random numbers outside the chain's generator
    view = posterior.view
    shapes = dict(module.named_parameters())
    if sorted(shapes) != sorted(view.names):
        return None
    parts = [(name, view.slice(name), tuple(shapes[name].shape)) for name in view.names]
    likelihood, prior, num_data = posterior.likelihood, posterior.bound_prior, posterior.num_data

    def log_prob(x: Tensor, batch: Batch) -> Tensor:
        inputs, targets = batch
        if inputs.is_floating_point():
            inputs = inputs.to(x.dtype)
        params = {name: x[sl].view(shape) for name, sl, shape in parts}
        f = torch.func.functional_call(module, params, (inputs,))
        ll = likelihood.log_prob(f, targets, {})
        if num_data is not None:
            ll = ll * (num_data / inputs.shape[0])
        return ll + prior.log_prob(x, {})

    return log_prob


def pure_log_prob(model: Any) -> tuple[Target, Callable[[Tensor, Batch], Tensor], bool]:
    """The target, a log density to differentiate inside the block, and whether that log density
    is free of side effects (so it may run inside ``scan``)."""
    from .posterior import Posterior

    if isinstance(model, Posterior):
        target = model.target()
        # A subclass with a target of its own (data-parallel all-reduce, functional prior) is not
        # the plain likelihood + prior that the pure MLP log density rewrites.
        own_target = type(model).target is not Posterior.target
        pure = None if own_target else (mlp_log_prob(model) or module_log_prob(model))
        if pure is not None:
            return target, pure, True
        return target, target.log_prob, False
    if isinstance(model, Target):
        # A user's log density through FlatView.unravel is pure; a custom Target is trusted.
        return model, model.log_prob, True
    raise BnnkitError(
        f"a fused sampler samples a bnnkit.Posterior or a Target, got {type(model).__name__}; wrap a log "
        "density with bnnkit.core.target.as_target(log_density, example_params)."
    )


def fused_log_prob(model: Any, sampler: str) -> tuple[Target, Callable[[Tensor, Batch], Tensor], bool]:
    """:func:`pure_log_prob` for a fused sampler, which needs the exact gradient: a target with a
    stochastic one (a functional prior) is refused with a message naming ``sampler``."""
    target, log_prob, pure = pure_log_prob(model)
    if target.stochastic_grad is not None:
        raise BnnkitError(
            f"fused {sampler} needs the exact gradient of the log density; this target has a stochastic one "
            f"(a functional prior). Run {sampler} step at a time (bnnkit.sample without fused=)."
        )
    return target, log_prob, pure


def transition_log_prob(model: Any, sampler: str, loop: str) -> tuple[Target, Callable, str]:
    """:func:`fused_log_prob` for a fused HMC or NUTS kernel, with its ``loop`` (``"scan"`` or
    ``"eager"``) checked; returns ``(target, log_prob, loop)``, the loop ``"unroll"`` where the log
    density cannot run inside ``scan`` (the driver refuses it with a clear message)."""
    if loop not in ("scan", "eager"):
        raise BnnkitError(f"loop must be 'scan' or 'eager', got {loop!r}.")
    target, log_prob, pure = fused_log_prob(model, sampler)
    return target, log_prob, loop if pure else "unroll"


def compile_scan(step: Callable, cpp_wrapper: bool = True) -> tuple[Callable, Any]:
    """``block(carry, consts, xs) -> (carry, ys)``: ``scan`` of ``step(carry, x, *consts)`` over
    the leading dimension of ``xs`` under ``torch.compile`` (one graph for every block length:
    :func:`call_scan` marks that dimension dynamic), and the code object whose dynamo cache
    :func:`call_scan` resets.  ``consts`` are tensors every step reads (a full batch, a step size).

    ``cpp_wrapper``: Inductor's C++ wrapper runs the scan's loop in C++ (on a CPU the Python
    wrapper's loop costs tens of microseconds per step), at the price of a C++ build on the first
    compile.
    """
    from torch._higher_order_ops.scan import scan

    def scanned(carry, consts, xs):
        def body(c, x):
            return step(c, x, *consts)

        return scan(body, carry, xs)

    options = {"cpp_wrapper": True} if cpp_wrapper else None
    return torch.compile(scanned, dynamic=False, fullgraph=True, options=options), scanned.__code__


def call_scan(block: Callable, code: Any, carry: Any, xs: tuple, consts: tuple = ()) -> Any:
    """Call a :func:`compile_scan` block on ``xs`` (their leading dimension marked dynamic)."""
    for t in leaves(xs):
        torch._dynamo.maybe_mark_dynamic(t, 0)
    try:
        return block(carry, consts, xs)
    except torch._dynamo.exc.FailOnRecompileLimitHit:
        # Every kernel shares one scanned function, and each new setting in a process (a step
        # size, a likelihood scale, a network) adds a graph of its own; past dynamo's limit of
        # graphs per function, start its cache afresh.
        torch._dynamo.reset_code(code)
        return block(carry, consts, xs)


def leading_finite(positions: Tensor, log_density: Tensor) -> int:
    """How many leading steps of a block (``positions [T, ...]``, ``log_density [T, ...]``) are
    finite, judged as the step-at-a-time driver judges a step (the sum of the new position and the
    log density is finite); one host sync per block."""
    t = positions.shape[0]
    ok = torch.isfinite(positions.flatten(1).sum(-1) + log_density.reshape(t, -1).sum(-1))
    return t if bool(ok.all()) else int((~ok).nonzero()[0, 0])


def leaves(args: tuple) -> list[Tensor]:
    """The tensors of a tuple of tensors and tuples of tensors."""
    out: list[Tensor] = []
    for a in args:
        if isinstance(a, tuple):
            out.extend(leaves(a))
        else:
            out.append(a)
    return out
