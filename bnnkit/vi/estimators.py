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

ESTIMATORS = ("reparam", "local", "flipout")


def _signs(shape: tuple[int, ...], gen: torch.Generator, like: Tensor) -> Tensor:
    return torch.randint(0, 2, shape, generator=gen, device=like.device).to(like.dtype) * 2 - 1


def _layer_forward(
    layer: nn.Module,
    mw: Tensor,
    sw: Tensor,
    mb: Tensor | None,
    sb: Tensor | None,
    estimator: str,
    gen: torch.Generator,
) -> Callable[[Tensor], Tensor]:
    if isinstance(layer, nn.Linear):

        def op(x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
            return F.linear(x, w, b)
    else:
        conv: nn.Conv2d = layer  # type: ignore[assignment]

        def op(x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
            return F.conv2d(x, w, b, conv.stride, conv.padding, conv.dilation, conv.groups)

    def forward_local(x: Tensor) -> Tensor:
        mean = op(x, mw, mb)
        var = op(x * x, sw * sw, None if sb is None else sb * sb)
        eps = torch.randn(mean.shape, generator=gen, dtype=mean.dtype, device=mean.device)
        return mean + torch.sqrt(var + 1e-16) * eps

    def forward_flipout(x: Tensor) -> Tensor:
        mean = op(x, mw, mb)
        dw = sw * torch.randn(mw.shape, generator=gen, dtype=mw.dtype, device=mw.device)
        s_in = _signs((x.shape[0], x.shape[1]), gen, x)
        s_out = _signs((mean.shape[0], mean.shape[1]), gen, mean)
        extra = (1,) * (x.ndim - 2)
        pert = op(x * s_in.view(*s_in.shape, *extra), dw, None) * s_out.view(*s_out.shape, *extra)
        if sb is not None:
            eb = torch.randn(sb.shape, generator=gen, dtype=sb.dtype, device=sb.device)
            pert = pert + (sb * eb).view(-1, *extra)
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


def stochastic_forward(
    posterior: Posterior,
    mu: Tensor,
    sigma: Tensor,
    inputs: Tensor,
    gen: torch.Generator,
    estimator: str = "reparam",
) -> Tensor:
    """Network output for one draw from ``q`` (per-example draws for local / flipout layers)."""
    if estimator not in ESTIMATORS:
        raise BnnkitError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}.")
    eps = torch.randn(mu.shape, generator=gen, dtype=mu.dtype, device=mu.device)
    w = mu + sigma * eps
    if estimator == "reparam":
        return posterior.forward(posterior.split(w)[0], inputs)
    mu_p, sig_p = posterior.split(mu)[0], posterior.split(sigma)[0]
    params = posterior.split(w)[0]
    layers = []
    for name, layer in posterior.module.named_modules():
        if not isinstance(layer, (nn.Linear, nn.Conv2d)):
            continue
        pre = f"{name}." if name else ""
        wn, bn = pre + "weight", pre + "bias"
        if wn not in mu_p:
            continue
        has_b = bn in mu_p
        fixed_b = posterior.fixed.get(bn) if not has_b else None
        mb = mu_p[bn] if has_b else fixed_b
        sb = sig_p[bn] if has_b else None
        layers.append((layer, _layer_forward(layer, mu_p[wn], sig_p[wn], mb, sb, estimator, gen)))
    with _patched(layers):
        return posterior.forward(params, inputs)
