"""The MLP fast path: a plain MLP's layers, its forward, and a hand-written backward, once.

A plain MLP (a ``Sequential`` of ``Linear`` layers, each followed by at most one tanh / sigmoid /
ReLU; :func:`mlp_layers`) is run layer by layer by :func:`forward` with the operations the modules
run, skipping ``nn.Module.__call__`` (tens of microseconds per layer at BNN sizes):
:class:`~bnnkit.core.module_call.ModuleCaller` calls it on substituted parameters,
:func:`bnnkit.core.pure.mlp_log_prob` on views of a flat position (in compiled loops), and
:class:`StackedMLP` keeps the hidden layers for :func:`backward`, its gradient without autograd.

Vectorised chains (``chain_method="vectorized"``) map the generic log density over stacked
positions with ``torch.func.vmap``; at BNN sizes its per-operation dispatch dominates the step.  An
MLP can instead be written directly on the stacked weights, ``W_l`` a ``[K, out, in]`` view of the
positions ``x [K, D]``:

    forward   h_l = act(h_{l-1} W_l^T + b_l)                 one ``baddbmm`` per layer
    output    g_L = d/df [ (N/M) sum_rows log p(y | f) ]      autograd on the output alone
    backward  dW_l = g_l^T h_{l-1},  db_l = sum_rows g_l,  g_{l-1} = act'(g_l W_l)

with the weight gradients written straight into views of the flat ``[K, D]`` gradient, and the
prior's gradient added in closed form.  Every chain gets its own gradient because the chains do
not interact.  One chain (``x [D]``, :meth:`StackedMLP.value_and_grad_one`) runs the same passes
with ``addmm`` / ``mm``: the operations autograd would run, without its graph and engine, which
at these sizes cost a fifth of a step (benchmarks/bench_sgmcmc.py); as ``K = 1`` of the batched
pass it measured 227 us against 178 (``bmm`` costs more than ``mm``).  :meth:`StackedMLP.build`
returns None for anything else (other layers, extras such as a learnt noise, likelihoods without
per-row log probabilities, priors without a closed-form gradient), and the vmap route handles those.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .fast_tanh import fast_tanh
from .types import Batch

# elementwise activations with a one-op backward from their output: (forward, backward(g, out))
ACTIVATIONS: dict[type, tuple[Callable, Callable]] = {
    nn.Tanh: (torch.tanh, torch.ops.aten.tanh_backward),
    nn.Sigmoid: (torch.sigmoid, torch.ops.aten.sigmoid_backward),
    nn.ReLU: (torch.relu, lambda g, out: torch.ops.aten.threshold_backward(g, out, 0)),
}


def activation(act: type | None, fast_tanh32: bool = False) -> Callable[[Tensor], Tensor] | None:
    """The forward of ``act`` (an :data:`ACTIVATIONS` type, or None: no activation);
    ``fast_tanh32``: ``tanh`` by :func:`~bnnkit.core.fast_tanh.fast_tanh` (float32 inside compiled loops)."""
    if act is None:
        return None
    return fast_tanh if fast_tanh32 and act is nn.Tanh else ACTIVATIONS[act][0]


@dataclass(frozen=True)
class Layer:
    """One ``Linear`` layer of a plain MLP and the activation after it."""

    w: Any  # where its weight is: a parameter name, or what ``where`` of :func:`mlp_layers` made of it
    b: Any  # where its bias is; None without one
    shape: tuple[int, int]  # (out_features, in_features)
    act: type | None  # activation after it (an ACTIVATIONS type), or None


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
    module: nn.Module, names: Sequence[str], where: Callable[[str], Any] | None = None
) -> list[Layer] | None:
    """The layers of a plain MLP ``module`` (a ``Sequential`` of ``Linear`` layers, each followed
    by at most one tanh / sigmoid / ReLU), in call order, their weights and biases named, or
    located by ``where(name)`` (an index, a slice of a flat vector).  None where the module is
    anything else, or where ``names`` are not exactly its layers' parameters; the callers that
    write the forward themselves then use the module."""
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
        elif type(m) in ACTIVATIONS and layers and layers[-1][3] is None:
            layers[-1] = (*layers[-1][:3], type(m))
        elif type(m) is not nn.Identity:
            return None
    if not layers or sorted(used) != sorted(names):
        return None
    at = where or (lambda name: name)
    return [Layer(at(w), None if b is None else at(b), shape, act) for w, b, shape, act in layers]


def forward(
    h: Tensor,
    layers: Iterable[tuple[Tensor, Tensor | None, Callable[[Tensor], Tensor] | None]],
    linear: Callable[[Tensor, Tensor, Tensor | None], Tensor] = F.linear,
    hidden: list[Tensor] | None = None,
) -> Tensor:
    """The MLP's output at inputs ``h``: ``h <- act(linear(h, weight, bias))`` for each
    ``(weight, bias or None, activation or None)`` of ``layers``.  ``linear``: ``F.linear`` (the
    modules' own op), or per chain for K stacked chains (``_CHAINS``).
    ``hidden``: a list that collects ``h`` and every layer's output, for :func:`backward`."""
    if hidden is not None:
        hidden.append(h)
    for w, b, act in layers:
        h = linear(h, w, b)
        if act is not None:
            h = act(h)
        if hidden is not None:
            hidden.append(h)
    return h


class _Ops(NamedTuple):
    """The hand-written passes' operations for one chain (``x [D]``, rows ``[M, ...]``) or K
    stacked chains (``x [K, D]``, rows ``[K, M, ...]``)."""

    linear: Callable  # F.linear, per chain for K chains
    params: Callable  # (t, layers) -> weights, biases: views of a flat t
    weight_grad: Callable  # (g, h, dest): g^T h, written (one chain) or added (K chains) into dest
    bias_grad: Callable  # (g, dest): g summed over rows, likewise
    input_grad: Callable  # (g, w): g w


_ROWS = _Ops(
    F.linear,  # addmm / mm on rows of features
    lambda t, layers: (
        [t[layer.w].view(layer.shape) for layer in layers],
        [None if layer.b is None else t[layer.b] for layer in layers],
    ),
    lambda g, h, dest: torch.mm(g.t(), h, out=dest),
    lambda g, dest: torch.sum(g, 0, out=dest),
    torch.mm,
)
_CHAINS = _Ops(
    lambda h, w, b: (
        torch.bmm(h, w.transpose(1, 2)) if b is None else torch.baddbmm(b.unsqueeze(1), h, w.transpose(1, 2))
    ),
    lambda t, layers: (
        [t[:, layer.w].view(t.shape[0], *layer.shape) for layer in layers],
        [None if layer.b is None else t[:, layer.b] for layer in layers],
    ),
    lambda g, h, dest: dest.add_(torch.bmm(g.transpose(1, 2), h)),
    lambda g, dest: dest.add_(g.sum(1)),
    torch.bmm,
)


def backward(
    g: Tensor,
    hidden: Sequence[Tensor],
    weights: Sequence[Tensor],
    act_backwards: Sequence[Callable | None],
    grad_weights: Sequence[Tensor],
    grad_biases: Sequence[Tensor | None],
    ops: _Ops = _ROWS,
) -> None:
    """The backward of :func:`forward` (``hidden``: what it collected) from ``g``, the gradient
    at its output, into ``grad_weights`` and ``grad_biases``."""
    for i in range(len(weights) - 1, -1, -1):
        if act_backwards[i] is not None:
            g = act_backwards[i](g, hidden[i + 1])
        ops.weight_grad(g, hidden[i], grad_weights[i])
        if grad_biases[i] is not None:
            ops.bias_grad(g, grad_biases[i])
        if i > 0:
            g = ops.input_grad(g, weights[i])


class StackedMLP:
    """Value and gradient of an MLP posterior's log density at one position ``[D]``
    (:meth:`value_and_grad_one`) or over stacked positions ``[K, D]`` (:meth:`value_and_grad`)."""

    def __init__(
        self,
        likelihood,
        layers: list[Layer],
        prior_value_and_grad,
        extras: tuple[str, ...] = (),
        d_net: int = 0,
    ):
        self.likelihood = likelihood
        self.layers = layers  # weights and biases as slices of the flat position
        self.acts = [activation(layer.act) for layer in layers]
        self.act_backwards = [None if layer.act is None else ACTIVATIONS[layer.act][1] for layer in layers]
        self.prior = prior_value_and_grad
        self.in_features = layers[0].shape[1]
        # the likelihood's learnt scalars (e.g. a Gaussian's log precision), in the position's
        # last len(extras) entries, after the network's d_net
        self.extras, self.d_net = extras, d_net

    @classmethod
    def build(cls, posterior) -> StackedMLP | None:
        lik = posterior.likelihood
        prior = posterior.bound_prior.value_and_grad
        if prior is None or posterior._prior_keys:  # a learnt prior scale: autograd
            return None
        extras = tuple(posterior._lik_keys)
        if posterior.d_net + len(extras) != posterior.view.size:  # an extra of more than one number
            return None
        if not (lik.per_row or extras):
            return None
        if extras and not hasattr(lik, "scaled_log_prob_chains_and_grad"):  # no closed form: autograd
            return None
        view = posterior.view
        # the network's names only: the extras follow them in the flat position
        layers = mlp_layers(
            posterior.module, posterior.net_names, view.slice
        )  # None also for a fixed parameter
        if layers is None:
            return None
        if getattr(posterior.bound_prior, "stacked", False):
            prior_vg = prior
        else:
            prior_vg = torch.func.vmap(prior)
        return cls(lik, layers, prior_vg, extras, posterior.d_net)

    def applies_to(self, batch: Batch, chains: bool = True) -> bool:
        """Inputs must be rows of features, ``[M, in]``, or per chain ``[K, M, in]`` where ``chains``."""
        inputs = batch[0]
        ndims = (2, 3) if chains else (2,)
        return inputs.ndim in ndims and inputs.shape[-1] == self.in_features and inputs.is_floating_point()

    def value_and_grad_one(self, x: Tensor, batch: Batch, scale: float) -> tuple[Tensor, Tensor]:
        """Log density and gradient at one position ``x [D]`` on ``batch`` (inputs ``[M, in]``),
        the likelihood scaled by ``scale`` (N/M)."""
        inputs, targets = batch
        weights, biases = _ROWS.params(x, self.layers)
        hidden: list[Tensor] = []
        out = forward(inputs.to(x.dtype), zip(weights, biases, self.acts), _ROWS.linear, hidden)
        with torch.enable_grad():
            f = out.detach().requires_grad_(True)
            ll = self.likelihood.scaled_log_prob(f, targets, {}, scale)
            (g,) = torch.autograd.grad(ll, f)
        lp, prior_grad = self.prior(x)
        grad = torch.empty_like(x)
        backward(g, hidden, weights, self.act_backwards, *_ROWS.params(grad, self.layers), _ROWS)
        return ll.detach() + lp, grad.add_(prior_grad)

    def value_and_grad(
        self,
        x: Tensor,
        batch: Batch,
        chain_batched: bool,
        num_data: int | None,
        shared_rows: tuple[Tensor, Callable[[Tensor], tuple[Tensor, Tensor]]] | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Log density and gradient at ``K`` positions ``x [K, D]``; ``num_data`` N scales a
        minibatch of M rows by N/M (None: no scaling).

        ``shared_rows = (rows [P, in], term)``: the network also runs on ``rows`` (the same for
        every chain) in the same pass, and ``term(f [K, P, out]) -> (value [K], cotangent)`` adds
        its value and its cotangent to the backward pass: a functional prior's
        ``log N(f_M; m, K)`` and ``-K^-1 (f_M - m)`` (:mod:`bnnkit.functional.posterior`)."""
        inputs, targets = batch
        k, m = x.shape[0], inputs.shape[-2]
        if not chain_batched:  # every chain sees the same rows
            inputs = inputs.expand(k, *inputs.shape)
            targets = targets.expand(k, *targets.shape)
        inputs = inputs.to(x.dtype)
        if shared_rows is not None:
            rows = shared_rows[0].to(x.dtype)
            inputs = torch.cat([inputs, rows.expand(k, *rows.shape)], 1)
        weights, biases = _CHAINS.params(x, self.layers)
        hidden: list[Tensor] = []
        out = forward(inputs, zip(weights, biases, self.acts), _CHAINS.linear, hidden)
        scale = 1.0 if num_data is None else num_data / m
        value, g, grad = self._output_grad(x, out[:, :m], targets, scale)
        if shared_rows is not None:
            more, cotangent = shared_rows[1](out[:, m:])
            value = value + more.to(value.dtype)
            g = torch.cat([g, cotangent.to(g.dtype)], 1)
        backward(g, hidden, weights, self.act_backwards, *_CHAINS.params(grad, self.layers), _CHAINS)
        return value, grad

    def _output_grad(
        self, x: Tensor, out: Tensor, targets: Tensor, scale: float
    ) -> tuple[Tensor, Tensor, Tensor]:
        """The log density at ``K`` positions given the outputs ``out [K, M, out]``, its gradient
        with respect to ``out``, and the position's gradient without the network's backward
        pass (the prior's, and the extras' where the likelihood has learnt scalars, the last
        entries of ``x``, in closed form by ``scaled_log_prob_chains_and_grad``, which
        :meth:`build` requires)."""
        k, m = out.shape[:2]
        if self.extras:
            extra = {name: x[:, self.d_net + i] for i, name in enumerate(self.extras)}
            total, g, d_extra = self.likelihood.scaled_log_prob_chains_and_grad(out, targets, extra, scale)
            g_extra = torch.stack([d_extra[name] for name in self.extras], 1)
            lp, g_net = self.prior(x[:, : self.d_net])
            grad = torch.empty_like(x)
            grad[:, : self.d_net] = g_net
            grad[:, self.d_net :] = g_extra
            return total + lp, g, grad
        # a Gaussian's output gradient in closed form, equal to autograd's bit for bit (autograd's
        # engine was 0.15 ms of a 1.3 ms four-chain step on UCI yacht)
        rows_and_grad = getattr(self.likelihood, "log_prob_rows_and_grad", None)
        closed = rows_and_grad and rows_and_grad(out.flatten(0, 1), targets.flatten(0, 1), scale)
        if closed:
            rows, g = closed
            ll, g = rows.view(k, m).sum(1) * scale, g.view(out.shape)
        else:
            with torch.enable_grad():
                f = out.detach().requires_grad_(True)
                rows = self.likelihood.log_prob_rows(f.flatten(0, 1), targets.flatten(0, 1), {})
                ll = rows.view(k, m).sum(1) * scale
                (g,) = torch.autograd.grad(ll.sum(), f)
        lp, grad = self.prior(x)
        if grad.data_ptr() == x.data_ptr():  # the likelihood part is added in place below
            grad = grad.clone()
        return ll.detach() + lp, g, grad
