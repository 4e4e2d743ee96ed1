"""Forward passes of a module under the mean-field posterior, three gradient estimators.

- ``reparam``: one weight draw ``w = mu + sigma * eps`` shared by the whole minibatch.
- ``local`` (Kingma, Salimans & Welling 2015): for ``Linear`` / ``Conv2d`` layers the
  pre-activations are Gaussian given the input, so they are sampled directly, independently per
  example: ``b = x mu_W^T + mu_b + sqrt(x^2 (sigma_W^2)^T + sigma_b^2) * eps``.
- ``flipout`` (Wen et al. 2018): one shared perturbation ``dW = sigma_W * E`` decorrelated across
  examples by random signs: ``b = x mu_W^T + ((x * s) dW^T) * r + mu_b + sigma_b * e``.

``local`` and ``flipout`` give the same expected gradient as ``reparam`` with lower variance; they
apply to ``Linear`` and ``Conv2d`` submodules whose weights are sampled, other parameters use
``reparam``.  The module itself is never modified: layers' ``forward`` methods are swapped for the
duration of one call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..core.errors import BnnkitError
from ..core.posterior import Posterior
from .local_mlp import LocalForward, LocalMLP

ESTIMATORS = ("reparam", "local", "flipout")


def _signs(shape: tuple[int, ...], gen: torch.Generator, like: Tensor) -> Tensor:
    return torch.randint(0, 2, shape, generator=gen, device=like.device).to(like.dtype) * 2 - 1


def _layer_forward(
    layer: nn.Module,
    mw: Tensor,
    vw: Tensor,
    mb: Tensor | None,
    vb: Tensor | None,
    estimator: str,
    gen: torch.Generator,
) -> Callable[[Tensor], Tensor]:
    """Forward of one layer from weight means ``mw`` and variances ``vw`` (and the bias's)."""
    if isinstance(layer, nn.Linear):

        def op(x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
            return F.linear(x, w, b)
    else:
        conv: nn.Conv2d = layer  # type: ignore[assignment]

        def op(x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
            return F.conv2d(x, w, b, conv.stride, conv.padding, conv.dilation, conv.groups)

    def forward_local(x: Tensor) -> Tensor:
        mean = op(x, mw, mb)
        var = op(x * x, vw, vb)
        eps = torch.randn(mean.shape, generator=gen, dtype=mean.dtype, device=mean.device)
        return torch.addcmul(mean, torch.sqrt(var + 1e-16), eps)

    def forward_flipout(x: Tensor) -> Tensor:
        mean = op(x, mw, mb)
        dw = vw.sqrt() * torch.randn(mw.shape, generator=gen, dtype=mw.dtype, device=mw.device)
        s_in = _signs((x.shape[0], x.shape[1]), gen, x)
        s_out = _signs((mean.shape[0], mean.shape[1]), gen, mean)
        extra = (1,) * (x.ndim - 2)
        pert = op(x * s_in.view(*s_in.shape, *extra), dw, None) * s_out.view(*s_out.shape, *extra)
        if vb is not None:
            eb = torch.randn(vb.shape, generator=gen, dtype=vb.dtype, device=vb.device)
            pert = pert + (vb.sqrt() * eb).view(-1, *extra)
        return mean + pert

    return forward_local if estimator == "local" else forward_flipout


@contextlib.contextmanager
def _patched(layers: list[tuple[nn.Module, Callable[[Tensor], Tensor]]]) -> Iterator[None]:
    for layer, fwd in layers:
        layer.forward = fwd  # instance attribute shadows the class method
    try:
        yield
    finally:
        for layer, _ in layers:
            del layer.forward


class ForwardPlan:
    """What a stochastic forward needs, resolved once per posterior: the local/flipout layers with
    their slices of the flat vector, and the slices sampled by plain reparameterisation."""

    def __init__(self, posterior: Posterior, estimator: str = "reparam"):
        if estimator not in ESTIMATORS:
            raise BnnkitError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}.")
        self.posterior = posterior
        self.estimator = estimator
        view = posterior.view
        self.layers: list[tuple[nn.Module, str, str | None, Tensor | None]] = []
        covered: set[str] = set()
        if estimator != "reparam":
            for name, layer in posterior.module.named_modules():
                if not isinstance(layer, (nn.Linear, nn.Conv2d)):
                    continue
                pre = f"{name}." if name else ""
                wn, bn = pre + "weight", pre + "bias"
                if wn not in view.names:
                    continue
                covered.add(wn)
                sampled_bias = bn in view.names
                if sampled_bias:
                    covered.add(bn)
                self.layers.append((layer, wn, bn if sampled_bias else None, posterior.fixed.get(bn)))
        self.reparam_names = [n for n in posterior.net_names if n not in covered]
        self.mlp = LocalMLP.build(posterior) if estimator == "local" else None
        self._vmappable: bool | None = None  # learnt on the first batched call

    def fast(self, inputs: Tensor) -> bool:
        """Whether a call on ``inputs`` takes the one-node MLP route."""
        return self.mlp is not None and inputs.ndim == 2 and not inputs.requires_grad

    def batched(self, mu: Tensor, sigma: Tensor, inputs: Tensor, gen: torch.Generator, num: int) -> Tensor:
        """Outputs ``[num, ...]`` of ``num`` reparameterised draws from ``q`` in one batched forward
        (``torch.func.vmap`` over the draws).  Plain reparameterisation only (no local/flipout
        layers); a module that ``vmap`` cannot trace falls back to one forward per draw."""
        post = self.posterior
        eps = torch.randn((num, *mu.shape), generator=gen, dtype=mu.dtype, device=mu.device)
        w = mu + sigma * eps
        if self._vmappable is not False:
            try:
                out = torch.func.vmap(lambda wi: post.forward(post.split(wi)[0], inputs))(w)
                self._vmappable = True
                return out
            except (RuntimeError, ValueError):
                if self._vmappable:
                    raise
                self._vmappable = False
        return torch.stack([post.forward(post.split(wi)[0], inputs) for wi in w])

    def __call__(self, mu: Tensor, sigma: Tensor, inputs: Tensor, gen: torch.Generator) -> Tensor:
        """Network output for one draw from ``q`` (per-example draws for local / flipout layers)."""
        post = self.posterior
        if self.fast(inputs):
            eps = self.mlp.noise(inputs.shape[0], gen, mu)
            return LocalForward.apply(self.mlp, mu, sigma, inputs, eps)
        if not self.layers:
            eps = torch.randn(mu.shape, generator=gen, dtype=mu.dtype, device=mu.device)
            return post.forward(post.split(mu + sigma * eps)[0], inputs)
        # layers handled by local/flipout ignore the tensors swapped in for them: pass mu's views
        params = post.split(mu)[0]
        if self.reparam_names:
            eps = torch.randn(mu.shape, generator=gen, dtype=mu.dtype, device=mu.device)
            drawn = post.split(mu + sigma * eps)[0]
            for n in self.reparam_names:
                params[n] = drawn[n]
        var = sigma * sigma
        var_views = post.split(var)[0]
        patches = []
        for layer, wn, bn, fixed_b in self.layers:
            mb = params[bn] if bn is not None else fixed_b
            vb = var_views[bn] if bn is not None else None
            patches.append(
                (layer, _layer_forward(layer, params[wn], var_views[wn], mb, vb, self.estimator, gen))
            )
        with _patched(patches):
            return post.forward(params, inputs)


def stochastic_forward(
    posterior: Posterior,
    mu: Tensor,
    sigma: Tensor,
    inputs: Tensor,
    gen: torch.Generator,
    estimator: str = "reparam",
) -> Tensor:
    """One-off :class:`ForwardPlan` call (build the plan once when calling repeatedly)."""
    return ForwardPlan(posterior, estimator)(mu, sigma, inputs, gen)
