"""Local reparameterisation for plain MLPs, with a hand-written backward.

For a ``Sequential`` of ``Linear`` layers (weights sampled) and elementwise activations, the whole
local-reparameterised forward ``z = h mu_W^T + mu_b + sqrt(h^2 sigma_W^2^T + sigma_b^2) * eps`` is
one autograd node: the forward runs on views of the flat ``mu`` / ``sigma^2`` vectors with the
noise of every layer drawn in one call, and the backward writes the gradients straight into flat
vectors.  At BNN sizes (tens of units, minibatches of tens) the cost of a step is per-operation
overhead, not arithmetic; one node instead of ~8 per layer (and no module calls, parameter swaps
or dict building) is what makes a Bayes-by-Backprop step cheap.  :meth:`LocalMLP.functional` is the
same computation from differentiable ops, which is what ``torch.compile`` traces.

The noise layout is fixed: one ``[rows, S]`` standard-normal draw per forward, ``S`` the summed
output widths of the layers, columns in layer order.  ``num_mc`` draws of a minibatch are the
minibatch tiled ``num_mc`` times (local reparameterisation draws every row independently, so this
is exactly ``num_mc`` independent forwards).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from ..core.mlp import ACTIVATIONS, sequential_layers
from ..core.posterior import Posterior

# besides bnnkit.core.mlp.ACTIVATIONS (closed-form backward from the output), other parameter-free elementwise modules: backward by autograd on the saved sub-graph
_ELEMENTWISE = {
    nn.ELU,
    nn.GELU,
    nn.SiLU,
    nn.Mish,
    nn.LeakyReLU,
    nn.Softplus,
    nn.Hardtanh,
    nn.ReLU6,
    nn.SELU,
    nn.CELU,
    nn.Softsign,
    nn.Tanhshrink,
    nn.Hardswish,
    nn.Hardsigmoid,
    nn.LogSigmoid,
}


@dataclass(frozen=True)
class _Linear:
    w: int  # index of the weight in the flat layout
    shape: tuple[int, int]
    b: int | None  # index of a sampled bias, None if the bias is fixed or absent
    fixed_b: Tensor | None
    first: bool  # first layer: its input is data, no gradient to propagate


@dataclass(frozen=True)
class _Act:
    module: nn.Module
    fast: tuple | None  # (forward, backward from output) or None: autograd sub-graph


class LocalMLP:
    """The layers of an MLP posterior, resolved once; :meth:`build` returns None when the model
    is not a chain of sampled ``Linear`` layers and elementwise activations."""

    def __init__(self, steps: list, numels: tuple[int, ...], widths: list[int]):
        self.steps = steps
        self.numels = tuple(numels)
        self.widths = tuple(widths)
        self.noise_width = sum(widths)

    @classmethod
    def build(cls, posterior: Posterior) -> LocalMLP | None:
        view = posterior.net_view
        index = {n: i for i, n in enumerate(view.names)}
        chain = sequential_layers(posterior.module)
        if chain is None:
            return None
        steps: list = []
        widths: list[int] = []
        covered: set[str] = set()
        for prefix, m in chain:
            if type(m) is nn.Linear:
                wn, bn = prefix + "weight", prefix + "bias"
                if wn not in index:
                    return None  # a fixed layer between sampled ones: use the general path
                covered.add(wn)
                if bn in index:
                    covered.add(bn)
                steps.append(
                    _Linear(
                        index[wn],
                        (m.out_features, m.in_features),
                        index.get(bn),
                        None if bn in index else posterior.fixed.get(bn),
                        not widths,
                    )
                )
                widths.append(m.out_features)
            elif type(m) in ACTIVATIONS:  # applied out of place whatever ``inplace`` says
                steps.append(_Act(m, ACTIVATIONS[type(m)]))
            elif type(m) is nn.Identity:
                continue
            elif type(m) in _ELEMENTWISE and not getattr(m, "inplace", False):
                steps.append(_Act(m, None))
            else:
                return None
        if not widths or covered != set(view.names):
            return None
        return cls(steps, view.numels, widths)

    def noise(self, rows: int, gen: torch.Generator, like: Tensor) -> Tensor:
        """Standard-normal noise for one forward of ``rows`` rows."""
        return torch.randn((rows, self.noise_width), generator=gen, dtype=like.dtype, device=like.device)

    # ------------------------------------------------------------------ eager, hand-written backward
    def forward(self, mu: Tensor, var: Tensor, x: Tensor, eps: Tensor) -> tuple[Tensor, list]:
        """Output and what :meth:`backward` needs; no autograd (call under ``no_grad`` or in a Function)."""
        mus = mu.split_with_sizes(self.numels)  # the method, not Tensor.split's Python wrapper
        vs = var.split_with_sizes(self.numels)
        es = eps.split_with_sizes(self.widths, 1)
        h = x
        saved: list = []
        k = 0
        last = len(self.steps) - 1
        for j, st in enumerate(self.steps):
            if type(st) is _Linear:
                mw = mus[st.w].view(st.shape)
                vw = vs[st.w].view(st.shape)
                if st.b is None:
                    mb, vb = st.fixed_b, None
                else:
                    mb, vb = mus[st.b], vs[st.b]
                a2 = h * h
                v = F.linear(a2, vw, vb)
                if vb is None:  # a sampled bias keeps v > 0; without one, guard the sqrt
                    v.add_(1e-16)
                s = v.sqrt_()
                e = es[k]
                k += 1
                out = torch.addcmul(F.linear(h, mw, mb), s, e)
                saved.append((h, a2, s, e, mw, vw))
            elif st.fast is not None:
                out = st.fast[0](h)
                saved.append(None if j == last else out)
            else:
                with torch.enable_grad():
                    hin = h.detach().requires_grad_(True)
                    hout = st.module(hin)
                saved.append((hin, hout))
                out = hout.detach()
            h = out
        return h, saved

    def backward(self, saved: list, out: Tensor, g: Tensor, like: Tensor) -> tuple[Tensor, Tensor]:
        """Gradients ``(d/d mu, 2 d/d var)`` of ``<g, out>``, as flat vectors shaped like ``like``."""
        n = like.numel()
        buf = torch.empty(2 * n, dtype=like.dtype, device=like.device)
        parts = buf.split_with_sizes(self.numels * 2)
        gms, gvs = parts[: len(self.numels)], parts[len(self.numels) :]
        for st, sv in zip(reversed(self.steps), reversed(saved)):
            if type(st) is _Linear:
                h, a2, s, e, mw, vw = sv
                gv = torch.mul(g, e).div_(s)  # 2 dL/dv: dz/dv = eps / (2 s)
                torch.mm(g.t(), h, out=gms[st.w].view(st.shape))
                torch.mm(gv.t(), a2, out=gvs[st.w].view(st.shape))
                if st.b is not None:
                    torch.sum(g, 0, out=gms[st.b])
                    torch.sum(gv, 0, out=gvs[st.b])
                if st.first:
                    break  # what comes before acts on the data alone
                g = torch.addcmul(g.mm(mw), gv.mm(vw), h)
            elif st.fast is not None:
                g = st.fast[1](g, out if sv is None else sv)
            else:
                hin, hout = sv
                (g,) = torch.autograd.grad(hout, hin, g, retain_graph=True)
        return buf[:n], buf[n:]

    # ------------------------------------------------------------------ differentiable ops
    def functional(self, mu: Tensor, var: Tensor, x: Tensor, eps: Tensor) -> Tensor:
        """The same forward from differentiable ops (for ``torch.compile`` and for checks)."""
        mus = mu.split(self.numels)
        vs = var.split(self.numels)
        es = eps.split(self.widths, 1)
        h = x
        k = 0
        for st in self.steps:
            if type(st) is _Linear:
                if st.b is None:
                    mb, vb = st.fixed_b, None
                else:
                    mb, vb = mus[st.b], vs[st.b]
                v = F.linear(h * h, vs[st.w].view(st.shape), vb)
                s = torch.sqrt(v if vb is not None else v + 1e-16)
                h = F.linear(h, mus[st.w].view(st.shape), mb) + s * es[k]
                k += 1
            elif st.fast is not None:
                h = st.fast[0](h)
            else:
                h = st.module(h)
        return h


class LocalForward(torch.autograd.Function):
    """Network output for one local-reparameterised draw; inputs ``(mu, sigma)``."""

    @staticmethod
    def forward(ctx, mlp: LocalMLP, mu: Tensor, sigma: Tensor, x: Tensor, eps: Tensor) -> Tensor:
        out, saved = mlp.forward(mu, sigma * sigma, x, eps)
        ctx.mlp, ctx.saved = mlp, saved
        ctx.save_for_backward(sigma, out)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, g: Tensor):
        sigma, out = ctx.saved_tensors
        gmu, gvar2 = ctx.mlp.backward(ctx.saved, out, g, sigma)
        return None, gmu, gvar2.mul_(sigma), None, None


class LocalELBO(torch.autograd.Function):
    """Network output for one local-reparameterised draw and the closed-form KL to a Gaussian
    prior, from ``(mu, rho)`` with ``sigma = softplus(rho)``: one autograd node for both.

    The prior ``N(0, s^2)`` enters as ``inv_var = 1 / s^2``, ``half_inv_var = inv_var / 2`` and
    ``const = sum(log s) - D/2``: ``KL = sum[(sigma^2 + mu^2) / (2 s^2) - log sigma] + const``.
    """

    @staticmethod
    def forward(ctx, mlp, mu, rho, x, eps, inv_var, half_inv_var, const):
        sigma = F.softplus(rho)
        var = sigma * sigma
        out, saved = mlp.forward(mu, var, x, eps)
        kl = torch.dot(torch.addcmul(var, mu, mu), half_inv_var).sub_(sigma.log().sum()).add_(const)
        ctx.mlp, ctx.saved = mlp, saved
        ctx.save_for_backward(mu, rho, sigma, inv_var, out)
        return out, kl

    @staticmethod
    @once_differentiable
    def backward(ctx, g: Tensor, g_kl: Tensor):
        mu, rho, sigma, inv_var, out = ctx.saved_tensors
        gmu, gvar2 = ctx.mlp.backward(ctx.saved, out, g, mu)
        # dKL/dmu = mu / s^2, dKL/dsigma = sigma / s^2 - 1 / sigma, dsigma/drho = sigmoid(rho)
        a = inv_var * g_kl
        gmu.addcmul_(mu, a)
        grho = gvar2.add_(a).mul_(sigma).sub_(g_kl / sigma).mul_(torch.sigmoid(rho))
        return None, gmu, grho, None, None, None, None, None
