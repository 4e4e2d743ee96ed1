"""An MLP posterior's log density and gradient with a hand-written backward: one chain, or K
chains as one batched pass.

Vectorised chains (``chain_method="vectorized"``) map the generic log density over stacked
positions with ``torch.func.vmap``; at BNN sizes its per-operation dispatch dominates the step.  An
MLP (a ``Sequential`` of ``Linear`` layers and tanh / sigmoid / ReLU) can instead be written
directly on the stacked weights, ``W_l`` a ``[K, out, in]`` view of the positions ``x [K, D]``:

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

from dataclasses import dataclass

import torch
from torch import Tensor

from .module_call import ACTIVATION_BACKWARD, mlp_layers
from .types import Batch


@dataclass(frozen=True)
class _Layer:
    w: slice  # columns of the weight in the flat position
    b: slice | None
    shape: tuple[int, int]  # (out, in)
    act: tuple | None  # activation after this layer


class StackedMLP:
    """Value and gradient of an MLP posterior's log density at one position ``[D]``
    (:meth:`value_and_grad_one`) or over stacked positions ``[K, D]`` (:meth:`value_and_grad`)."""

    def __init__(self, likelihood, layers: list[_Layer], prior_value_and_grad):
        self.likelihood = likelihood
        self.layers = layers
        self.prior = prior_value_and_grad
        self.in_features = layers[0].shape[1]

    @classmethod
    def build(cls, posterior) -> StackedMLP | None:
        lik = posterior.likelihood
        prior = posterior.bound_prior.value_and_grad
        if prior is None or posterior.d_net != posterior.view.size:  # extras (learnt noise, ...)
            return None
        if not lik.per_row:
            return None
        view = posterior.view
        found = mlp_layers(posterior.module, view.names)  # None also for a fixed parameter
        if found is None:
            return None
        layers = [
            _Layer(
                view.slice(w),
                None if b is None else view.slice(b),
                shape,
                None if act is None else ACTIVATION_BACKWARD[act],
            )
            for w, b, shape, act in found
        ]
        if getattr(posterior.bound_prior, "stacked", False):
            prior_vg = prior
        else:
            prior_vg = torch.func.vmap(prior)
        return cls(lik, layers, prior_vg)

    def applies_to(self, batch: Batch, chains: bool = True) -> bool:
        """Inputs must be rows of features, ``[M, in]``, or per chain ``[K, M, in]`` where ``chains``."""
        inputs = batch[0]
        ndims = (2, 3) if chains else (2,)
        return inputs.ndim in ndims and inputs.shape[-1] == self.in_features and inputs.is_floating_point()

    def value_and_grad_one(self, x: Tensor, batch: Batch, scale: float) -> tuple[Tensor, Tensor]:
        """Log density and gradient at one position ``x [D]`` on ``batch`` (inputs ``[M, in]``),
        the likelihood scaled by ``scale`` (N/M)."""
        inputs, targets = batch
        h = inputs.to(x.dtype)
        hidden = [h]
        weights = [x[layer.w].view(layer.shape) for layer in self.layers]
        for layer, w in zip(self.layers, weights):
            h = h.mm(w.t()) if layer.b is None else torch.addmm(x[layer.b], h, w.t())
            if layer.act is not None:
                h = layer.act[0](h)
            hidden.append(h)
        out = hidden.pop()
        with torch.enable_grad():
            f = out.detach().requires_grad_(True)
            ll = self.likelihood.scaled_log_prob(f, targets, {}, scale)
            (g,) = torch.autograd.grad(ll, f)
        lp, prior_grad = self.prior(x)
        grad = torch.empty_like(x)
        for i in range(len(self.layers) - 1, -1, -1):
            layer = self.layers[i]
            if layer.act is not None:
                g = layer.act[1](g, out if i == len(self.layers) - 1 else hidden[i + 1])
            torch.mm(g.t(), hidden[i], out=grad[layer.w].view(layer.shape))
            if layer.b is not None:
                torch.sum(g, 0, out=grad[layer.b])
            if i > 0:
                g = g.mm(weights[i])
        return ll.detach() + lp, grad.add_(prior_grad)

    def value_and_grad(
        self, x: Tensor, batch: Batch, chain_batched: bool, num_data: int | None
    ) -> tuple[Tensor, Tensor]:
        """Log density and gradient at ``K`` positions ``x [K, D]``; ``num_data`` N scales a
        minibatch of M rows by N/M (None: no scaling)."""
        inputs, targets = batch
        k, m = x.shape[0], inputs.shape[-2]
        if not chain_batched:  # every chain sees the same rows
            inputs = inputs.expand(k, *inputs.shape)
            targets = targets.expand(k, *targets.shape)
        h = inputs.to(x.dtype)
        hidden = [h]
        weights = [x[:, layer.w].view(k, *layer.shape) for layer in self.layers]
        for layer, w in zip(self.layers, weights):
            if layer.b is None:
                h = torch.bmm(h, w.transpose(1, 2))
            else:
                h = torch.baddbmm(x[:, layer.b].unsqueeze(1), h, w.transpose(1, 2))
            if layer.act is not None:
                h = layer.act[0](h)
            hidden.append(h)
        out = hidden.pop()
        scale = 1.0 if num_data is None else num_data / m
        with torch.enable_grad():
            f = out.detach().requires_grad_(True)
            rows = self.likelihood.log_prob_rows(f.flatten(0, 1), targets.flatten(0, 1), {})
            ll = rows.view(k, m).sum(1) * scale
            (g,) = torch.autograd.grad(ll.sum(), f)
        lp, grad = self.prior(x)
        if grad.data_ptr() == x.data_ptr():  # the likelihood part is added in place below
            grad = grad.clone()
        for i in range(len(self.layers) - 1, -1, -1):
            layer, h_in = self.layers[i], hidden[i]
            if layer.act is not None:
                g = layer.act[1](g, out if i == len(self.layers) - 1 else hidden[i + 1])
            gw = grad[:, layer.w].view(k, *layer.shape)
            gw.add_(torch.bmm(g.transpose(1, 2), h_in))
            if layer.b is not None:
                grad[:, layer.b].add_(g.sum(1))
            if i > 0:
                g = torch.bmm(g, weights[i])
        return ll.detach() + lp, grad
