"""Bayesian layers: build a mean-field Gaussian BNN from modules, train it on the ELBO.

Each weight (and bias) has ``q(w) = N(mu, sigma^2)`` with ``sigma = softplus(rho)`` and the prior
``N(0, prior_scale^2)``.  The layers own ``mu`` and ``rho`` as ordinary parameters, so any PyTorch
optimiser trains them on the negative ELBO per data point (:func:`elbo_loss`)::

    loss = -(1/M) sum_{i in B} log p(y_i | f(x_i)) + kl_weight * KL(q || p) / N

Forward modes:

- training (``module.train()``): local reparameterisation (Kingma, Salimans & Welling 2015).  The
  pre-activations of a linear map of Gaussian weights are Gaussian given the input, so they are
  drawn directly, independently per example::

      b = x mu_W^T + mu_b + sqrt(x^2 (sigma_W^2)^T + sigma_b^2) * eps,   eps ~ N(0, I)

  (for a convolution the same with ``conv2d``: each output element has the exact marginal mean and
  variance; the correlation between output positions that share a weight draw is dropped).
- ``eval()``: the mean weights (deterministic), unless the layer's ``sample`` attribute is
  ``True``: then one weight draw per call, shared by the whole batch (a function draw).

Randomness: every draw comes from the layer's ``generator`` attribute (a ``torch.Generator``; set
it for all layers at once with :func:`set_generator`).  A layer that must draw without one raises
:class:`~bnnkit.core.errors.BnnkitError`.  The generator given to the constructor also draws the
initial means (Kaiming-uniform bound ``1/sqrt(fan_in)``, as ``nn.Linear`` / ``nn.Conv2d``);
without one the initialisation uses PyTorch's global RNG like every ``torch.nn`` layer.
:func:`fit_bayesian_layers` is a minimal training loop; :func:`predict_bayesian_layers` gives the
same predictive objects as :func:`bnnkit.predict.predict`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..core.errors import BnnkitError, check_int_at_least, check_positive, resolve_batch_size
from ..core.random import make_generator
from ..likelihoods import Likelihood
from ..predict.predictive import ClassificationPredictive, RegressionPredictive
from .dropout import predictive_from_outputs
from .kl import gaussian_kl
from .meanfield import inverse_softplus


class BayesianLayer(nn.Module):
    """Base of the Bayesian layers: mean-field parameters, the three forward modes and the KL."""

    weight_mu: nn.Parameter
    weight_rho: nn.Parameter
    bias_mu: nn.Parameter | None
    bias_rho: nn.Parameter | None

    def _setup(
        self,
        weight_shape: tuple[int, ...],
        bias: bool,
        fan_in: int,
        prior_scale: float,
        init_sigma: float,
        generator: torch.Generator | None,
        factory: dict,
    ) -> None:
        check_positive("prior_scale", prior_scale, "Pass the prior standard deviation of the weights.")
        check_positive("init_sigma", init_sigma, "Use a small value such as 1e-3.")
        self.prior_scale = float(prior_scale)
        self.init_sigma = float(init_sigma)
        self.generator = generator
        self.sample = False
        out = weight_shape[0]
        self.weight_mu = nn.Parameter(torch.empty(weight_shape, **factory))
        self.weight_rho = nn.Parameter(torch.empty(weight_shape, **factory))
        if bias:
            self.bias_mu = nn.Parameter(torch.empty(out, **factory))
            self.bias_rho = nn.Parameter(torch.empty(out, **factory))
        else:
            self.register_parameter("bias_mu", None)
            self.register_parameter("bias_rho", None)
        self._fan_in = fan_in
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Means Kaiming-uniform in ``+-1/sqrt(fan_in)``, ``sigma = init_sigma``."""
        bound = 1.0 / math.sqrt(self._fan_in)
        rho = inverse_softplus(self.init_sigma)
        with torch.no_grad():
            nn.init.uniform_(self.weight_mu, -bound, bound, generator=self.generator)
            self.weight_rho.fill_(rho)
            if self.bias_mu is not None:
                nn.init.uniform_(self.bias_mu, -bound, bound, generator=self.generator)
                self.bias_rho.fill_(rho)

    @property
    def weight_sigma(self) -> Tensor:
        return F.softplus(self.weight_rho)

    @property
    def bias_sigma(self) -> Tensor | None:
        return None if self.bias_rho is None else F.softplus(self.bias_rho)

    def _op(self, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        raise NotImplementedError

    def _gen(self) -> torch.Generator:
        if self.generator is None:
            raise BnnkitError(
                f"{type(self).__name__} draws random numbers here (training mode, or sample=True) but has no "
                "generator: set layer.generator = torch.Generator().manual_seed(0), or "
                "bnnkit.vi.layers.set_generator(model, generator) for every Bayesian layer of a model."
            )
        return self.generator

    def forward(self, x: Tensor) -> Tensor:
        if self.training:
            gen = self._gen()
            mean = self._op(x, self.weight_mu, self.bias_mu)
            bias_var = None if self.bias_rho is None else self.bias_sigma**2
            var = self._op(x * x, self.weight_sigma**2, bias_var)
            eps = torch.randn(mean.shape, generator=gen, dtype=mean.dtype, device=mean.device)
            return torch.addcmul(mean, torch.sqrt(var + 1e-16), eps)
        if self.sample:
            weight, bias = self.sample_weights(self._gen())
            return self._op(x, weight, bias)
        return self._op(x, self.weight_mu, self.bias_mu)

    def sample_weights(self, gen: torch.Generator) -> tuple[Tensor, Tensor | None]:
        """One draw ``(weight, bias)`` from q (differentiable in mu and rho)."""
        mu = self.weight_mu
        weight = mu + self.weight_sigma * torch.randn(
            mu.shape, generator=gen, dtype=mu.dtype, device=mu.device
        )
        if self.bias_mu is None:
            return weight, None
        bm = self.bias_mu
        bias = bm + self.bias_sigma * torch.randn(bm.shape, generator=gen, dtype=bm.dtype, device=bm.device)
        return weight, bias

    def kl(self) -> Tensor:
        """Closed-form ``KL(q || N(0, prior_scale^2))`` summed over the layer's weights and bias."""
        s = torch.tensor(self.prior_scale, dtype=self.weight_mu.dtype, device=self.weight_mu.device)
        kl = gaussian_kl(self.weight_mu, self.weight_sigma, s)
        if self.bias_mu is not None:
            kl = kl + gaussian_kl(self.bias_mu, self.bias_sigma, s)
        return kl


class BayesianLinear(BayesianLayer):
    """Mean-field Gaussian ``nn.Linear``: ``y = x W^T + b``, ``W ~ q``, prior ``N(0, prior_scale^2)``."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        prior_scale: float = 1.0,
        init_sigma: float = 1e-3,
        generator: torch.Generator | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ):
        super().__init__()
        check_int_at_least("in_features", in_features, 1)
        check_int_at_least("out_features", out_features, 1)
        self.in_features, self.out_features = in_features, out_features
        factory = {"device": device, "dtype": dtype}
        self._setup(
            (out_features, in_features), bias, in_features, prior_scale, init_sigma, generator, factory
        )

    def _op(self, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        return F.linear(x, weight, bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias_mu is not None}, prior_scale={self.prior_scale}"
        )


class BayesianConv2d(BayesianLayer):
    """Mean-field Gaussian ``nn.Conv2d`` (same geometry arguments), prior ``N(0, prior_scale^2)``."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, int],
        stride: int | tuple[int, int] = 1,
        padding: int | tuple[int, int] | str = 0,
        dilation: int | tuple[int, int] = 1,
        groups: int = 1,
        bias: bool = True,
        prior_scale: float = 1.0,
        init_sigma: float = 1e-3,
        generator: torch.Generator | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ):
        super().__init__()
        check_int_at_least("in_channels", in_channels, 1)
        check_int_at_least("out_channels", out_channels, 1)
        check_int_at_least("groups", groups, 1)
        if in_channels % groups or out_channels % groups:
            raise BnnkitError(
                f"in_channels ({in_channels}) and out_channels ({out_channels}) must both be divisible by "
                f"groups ({groups})."
            )
        kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
        check_int_at_least("kernel_size", min(kh, kw), 1)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = (kh, kw)
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        factory = {"device": device, "dtype": dtype}
        shape = (out_channels, in_channels // groups, kh, kw)
        fan_in = (in_channels // groups) * kh * kw
        self._setup(shape, bias, fan_in, prior_scale, init_sigma, generator, factory)

    def _op(self, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        return F.conv2d(x, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
            f"padding={self.padding}, bias={self.bias_mu is not None}, prior_scale={self.prior_scale}"
        )


def bayesian_layers(module: nn.Module) -> Iterator[BayesianLayer]:
    return (m for m in module.modules() if isinstance(m, BayesianLayer))


def _require_layers(module: nn.Module, what: str) -> list[BayesianLayer]:
    layers = list(bayesian_layers(module))
    if not layers:
        raise BnnkitError(
            f"{what}: {type(module).__name__} contains no BayesianLinear / BayesianConv2d layer; build the "
            "model from bnnkit.vi layers (or use BayesByBackprop on a Posterior for a plain network)."
        )
    return layers


def set_generator(module: nn.Module, generator: torch.Generator | None) -> int:
    """Give every Bayesian layer in ``module`` the same generator; returns how many layers."""
    layers = _require_layers(module, "set_generator")
    for layer in layers:
        layer.generator = generator
    return len(layers)


def kl_divergence(module: nn.Module) -> Tensor:
    """``KL(q || p)`` summed over all Bayesian layers of ``module`` (closed form, differentiable)."""
    return torch.stack([layer.kl() for layer in _require_layers(module, "kl_divergence")]).sum()


def elbo_loss(
    module: nn.Module,
    output: Tensor,
    target: Tensor,
    likelihood: Likelihood,
    num_data: int,
    kl_weight: float = 1.0,
) -> Tensor:
    """Negative ELBO per data point from a minibatch of ``M`` rows out of ``num_data = N``::

    -(1/M) log p(y_B | output) + kl_weight * KL(q || p) / N

    (an unbiased estimate of ``-ELBO / N`` when ``output`` came from a training-mode forward).
    """
    check_int_at_least("num_data", num_data, 1)
    if not (math.isfinite(kl_weight) and kl_weight >= 0):
        raise BnnkitError(f"kl_weight must be a finite number >= 0, got {kl_weight!r}.")
    m = int(target.shape[0])
    if m > num_data:
        raise BnnkitError(
            f"the batch has {m} rows but num_data is {num_data}; num_data is the full training-set size."
        )
    if likelihood.extra_params():
        raise BnnkitError(
            "elbo_loss needs a likelihood with fixed parameters (e.g. Gaussian(noise), learn_noise=False)."
        )
    nll = -likelihood.log_prob(output, target, {}) / m
    return nll + kl_weight * kl_divergence(module) / num_data


def fit_bayesian_layers(
    module: nn.Module,
    data: tuple[Tensor, Tensor],
    likelihood: Likelihood,
    *,
    lr: float = 1e-2,
    num_epochs: int = 100,
    batch_size: int | None = None,
    num_mc: int = 1,
    kl_weight: float = 1.0,
    lr_decay: str | None = None,
    seed: int = 0,
    progress: bool = True,
) -> dict[str, list[float]]:
    """Train ``module`` in place on :func:`elbo_loss` (Adam; ``num_mc`` forward passes per step).

    Every Bayesian layer gets the generator ``make_generator(seed)`` (also used for shuffling);
    the module is left in ``eval()`` mode.  Returns the per-epoch history ``loss`` (``-ELBO / N``),
    ``nll`` and ``kl``.
    """
    check_positive("lr", lr)
    check_int_at_least("num_epochs", num_epochs, 1)
    check_int_at_least("num_mc (Monte-Carlo samples per step)", num_mc, 1)
    if lr_decay not in (None, "cosine"):
        raise BnnkitError(f"lr_decay must be None or 'cosine', got {lr_decay!r}.")
    if not (isinstance(data, (tuple, list)) and len(data) == 2):
        raise BnnkitError("data must be a tuple (inputs, targets) of tensors.")
    inputs, targets = data
    n = int(inputs.shape[0])
    if targets.shape[0] != n:
        raise BnnkitError(f"inputs have {n} rows but targets have {targets.shape[0]}; they must match.")
    bs = resolve_batch_size(batch_size, n)
    check_int_at_least("batch_size", bs, 1)
    if not (math.isfinite(kl_weight) and kl_weight >= 0):
        raise BnnkitError(f"kl_weight must be a finite number >= 0, got {kl_weight!r}.")
    if likelihood.extra_params():
        raise BnnkitError(
            "the likelihood must have fixed parameters (e.g. Gaussian(noise), learn_noise=False)."
        )
    gen = make_generator(seed, 0)
    set_generator(module, gen)
    opt = torch.optim.Adam(module.parameters(), lr=lr)
    num_batches = math.ceil(n / bs)
    total = num_epochs * num_batches
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, total) if lr_decay == "cosine" else None
    history: dict[str, list[float]] = {"loss": [], "nll": [], "kl": []}
    bar = _bar(num_epochs, progress)
    module.train()
    for _ in range(num_epochs):
        perm = torch.randperm(n, generator=gen) if bs < n else None
        e_loss = e_nll = 0.0
        for i in range(num_batches):
            idx = None if perm is None else perm[i * bs : (i + 1) * bs]
            xb, yb = (inputs, targets) if idx is None else (inputs[idx], targets[idx])
            m = int(xb.shape[0])
            loss = sum(-likelihood.log_prob(module(xb), yb, {}) / m for _ in range(num_mc)) / num_mc
            kl = kl_divergence(module)
            full = loss + kl_weight * kl / n
            opt.zero_grad(set_to_none=True)
            full.backward()
            opt.step()
            if sched is not None:
                sched.step()
            e_loss += float(full.detach()) / num_batches
            e_nll += float(loss.detach()) / num_batches
        history["loss"].append(e_loss)
        history["nll"].append(e_nll)
        history["kl"].append(float(kl.detach()))
        if not math.isfinite(e_loss):
            raise BnnkitError("the ELBO became non-finite; lower lr (e.g. by 10x) or check the data scale.")
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{e_loss:.4g}", kl=f"{history['kl'][-1]:.4g}", refresh=False)
    if bar is not None:
        bar.close()
    module.eval()
    return history


def predict_bayesian_layers(
    module: nn.Module, inputs: Tensor, likelihood: Likelihood, num_samples: int = 100, seed: int = 0
) -> RegressionPredictive | ClassificationPredictive:
    """Mixture predictive over ``num_samples`` weight draws (one per forward, shared by the batch).

    The layers' ``sample`` flags, generators and the module's training mode are restored after.
    """
    check_int_at_least("num_samples", num_samples, 1)
    layers = _require_layers(module, "predict_bayesian_layers")
    saved = [(layer.sample, layer.generator) for layer in layers]
    was_training = module.training
    gen = make_generator(seed, 0)
    module.eval()
    try:
        for layer in layers:
            layer.sample, layer.generator = True, gen
        with torch.no_grad():
            out = torch.stack([module(inputs) for _ in range(num_samples)])
    finally:
        for layer, (flag, g) in zip(layers, saved):
            layer.sample, layer.generator = flag, g
        module.train(was_training)
    return predictive_from_outputs(out, likelihood)


def _bar(total: int, progress: bool):
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="bayesian-layers", unit="epoch", mininterval=0.25, dynamic_ncols=True)
