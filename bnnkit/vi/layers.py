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
:func:`fit_bayesian_layers` trains them through the driver (the kernel :class:`LayersELBO`, run by
:func:`bnnkit.sample`, so with its progress bar, ``output=`` streaming and resume); :func:`predict_bayesian_layers` gives the
same predictive objects as :func:`bnnkit.predict.predict`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..core.errors import (
    BnnkitError,
    DivergenceError,
    check_finite_rows,
    check_int_at_least,
    check_positive,
    resolve_batch_size,
)
from ..core.posterior import check_inputs
from ..core.random import make_generator
from ..core.types import Batch, Kernel
from ..likelihoods import Likelihood
from ..predict.predictive import ClassificationPredictive, RegressionPredictive
from .dropout import predictive_from_outputs
from .kernel import _FALSE, _TRUE, VIInfo  # elbo: -loss (the ELBO per data point)
from .kl import gaussian_kl
from .meanfield import inverse_softplus
from .optim import batches_per_epoch, check_fit_options, loss_fit_start, loss_fit_step


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


class LayersState(NamedTuple):
    position: Tensor  # the module's parameters (means and rho of every Bayesian layer, the rest), flat
    exp_avg: Tensor  # Adam's first moments
    exp_avg_sq: Tensor  # Adam's second moments
    adam_step: Tensor  # float32 0-d: Adam's step count
    iteration: Tensor  # int64 0-d
    step_size: Tensor  # the learning rate of the last step
    sums: Tensor  # [2]: this epoch's running mean loss and NLL
    history: Tensor  # [num_epochs, 3]: per-epoch loss, NLL and the last step's KL, NaN after


class LayersObjective:
    """The model a :class:`LayersELBO` kernel trains: a module of Bayesian layers, its likelihood
    and the data size ``N``; as a log density over the module's parameters it is ``-N`` times
    :func:`elbo_loss` with the layers' noise from their current generators."""

    def __init__(self, module: nn.Module, likelihood: Likelihood, num_data: int, kl_weight: float = 1.0):
        _require_layers(module, "LayersObjective")
        self.module, self.likelihood, self.num_data, self.kl_weight = module, likelihood, num_data, kl_weight
        self.__name__ = f"bayesian-layers({type(module).__name__})"

    def loss(self, params: dict[str, Tensor], batch: Batch, num_mc: int = 1) -> tuple[Tensor, Tensor, Tensor]:
        """``(loss, nll, KL)``: the ``num_mc``-pass :func:`elbo_loss` at ``params`` on ``batch``."""
        xb, yb = batch
        m = int(xb.shape[0])
        nll = (
            sum(
                -self.likelihood.log_prob(torch.func.functional_call(self.module, params, (xb,)), yb, {}) / m
                for _ in range(num_mc)
            )
            / num_mc
        )
        kl = _flat_kl(self.module, params)
        return nll + self.kl_weight * kl / self.num_data, nll, kl

    def __call__(self, params: dict[str, Tensor], batch: Batch) -> Tensor:
        """``-N`` times the loss with the layers at their means (``eval()``: no noise drawn), the
        value the driver checks at the initial position."""
        was = self.module.training
        self.module.eval()
        try:
            return -self.num_data * self.loss(params, batch)[0]
        finally:
            self.module.train(was)


@dataclass(frozen=True)
class LayersELBO:
    """Adam on :func:`elbo_loss` of a module of Bayesian layers, as a kernel for :func:`bnnkit.sample`.

    Step ``t < T = num_epochs * ceil(N / batch_size)``: the layers draw their noise from the
    step's generator, ``g = d loss / d theta`` over the module's parameters ``theta`` (means,
    ``rho`` and any deterministic parameters), and one Adam step
    (:func:`~bnnkit.vi.optim.adam_update`).  After ``T`` steps the position stays at the fitted
    ``theta`` (the draws are that vector: predict with :func:`predict_bayesian_layers` on the module
    carrying it).  Run as ``bnnkit.sample(LayersELBO(...), LayersObjective(module, likelihood, N),
    data, init=dict(module.named_parameters()))``; :func:`fit_bayesian_layers` does that.
    """

    lr: float = 1e-2
    num_epochs: int = 100
    batch_size: int | None = None
    num_mc: int = 1
    lr_decay: str | None = None
    name: str = "bayesian-layers"

    needs_model: ClassVar[bool] = True

    def __post_init__(self) -> None:
        check_fit_options(self.lr, self.num_epochs, self.batch_size, self.lr_decay)
        check_int_at_least("num_mc (Monte-Carlo samples per step)", self.num_mc, 1)

    def config(self) -> dict:
        return asdict(self)

    def build(self, target: Any, model: Any = None) -> Kernel:
        if not isinstance(model, LayersObjective):
            raise BnnkitError(
                "LayersELBO trains a module of Bayesian layers: pass bnnkit.vi.layers.LayersObjective(module, "
                "likelihood, num_data) as the posterior (with init=dict(module.named_parameters()))."
            )
        view, n = target.view, model.num_data
        per_epoch = batches_per_epoch(self.batch_size, n)
        total = self.num_epochs * per_epoch
        lr, lr_decay, num_mc, layers = (
            self.lr,
            self.lr_decay,
            self.num_mc,
            list(bayesian_layers(model.module)),
        )

        def init(position: Tensor, batch: Batch) -> LayersState:
            x = position.detach().clone()
            return LayersState(position=x, **loss_fit_start(x, lr, self.num_epochs, 3))

        def step(state: LayersState, batch: Batch, gen: torch.Generator) -> tuple[LayersState, VIInfo]:
            t = int(state.iteration)
            if t >= total:
                info = VIInfo(-state.history[-1, 0], state.step_size, _TRUE)
                return state._replace(iteration=state.iteration + 1), info
            saved = [(layer.generator, layer.training) for layer in layers]
            try:
                for layer in layers:  # training-mode forwards: local reparameterisation, noise from gen
                    layer.generator = gen
                    layer.train()
                with torch.enable_grad():
                    w = state.position.detach().requires_grad_(True)
                    loss, nll, kl = model.loss(dict(view.unravel(w)), batch, num_mc)
                    (g,) = torch.autograd.grad(loss, w)
            finally:
                for layer, (gen_, mode) in zip(layers, saved):
                    layer.generator = gen_
                    layer.train(mode)
            # history: the epoch's mean loss and NLL, and its last KL
            schedule = (lr, lr_decay, total, per_epoch)
            x, fields = loss_fit_step(
                state, state.position, g, loss, nll, t, schedule, kl.detach().reshape(1)
            )
            new = LayersState(position=x, **fields)
            return new, VIInfo(-loss.detach(), new.step_size, _FALSE)

        return Kernel(init, step, fit_steps=total)


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
    output: str | None = None,
) -> dict[str, list[float]]:
    """Train ``module`` in place on :func:`elbo_loss` (Adam; ``num_mc`` forward passes per step).

    Runs :class:`LayersELBO` through :func:`bnnkit.sample` (one chain, seed ``seed``: the layers'
    noise and the shuffling come from its generator; ``output=`` streams, checkpoints and resumes
    the fit); the module is left in ``eval()`` mode with the fitted parameters.  Returns the
    per-epoch history ``loss`` (``-ELBO / N``), ``nll`` and ``kl``.
    """
    from ..core.driver import sample
    from ..data.coerce import as_pair
    from ..data.minibatch import Minibatches

    algorithm = LayersELBO(
        lr=lr, num_epochs=num_epochs, batch_size=batch_size, num_mc=num_mc, lr_decay=lr_decay
    )
    inputs, targets = as_pair(data)  # tensors, NumPy arrays or a DataLoader (all its rows)
    p0 = next(module.parameters(), None)
    if p0 is not None and p0.is_floating_point() and inputs.is_floating_point():
        inputs = inputs.to(p0.dtype)
    for name, t in (("inputs", inputs), ("targets", targets)):
        if t.ndim == 0 or t.shape[0] == 0:
            raise BnnkitError(f"{name} is empty (shape {tuple(t.shape)}); pass at least one row of data.")
        check_finite_rows(name, t)
    n = int(inputs.shape[0])
    if targets.shape[0] != n:
        raise BnnkitError(f"inputs have {n} rows but targets have {targets.shape[0]}; they must match.")
    bs = resolve_batch_size(batch_size, n)
    if not (math.isfinite(kl_weight) and kl_weight >= 0):
        raise BnnkitError(f"kl_weight must be a finite number >= 0, got {kl_weight!r}.")
    if likelihood.extra_params():
        raise BnnkitError(
            "the likelihood must have fixed parameters (e.g. Gaussian(noise), learn_noise=False)."
        )
    objective = LayersObjective(module, likelihood, n, kl_weight)
    params = {name: p.detach() for name, p in module.named_parameters()}
    try:
        s = sample(
            algorithm,
            objective,
            Minibatches(inputs, targets, batch_size=bs),
            init=params,
            num_samples=1,
            seed=seed,
            progress=progress,
            output=output,
            validate=False,
        )
    except DivergenceError as err:
        raise BnnkitError(
            "the ELBO became non-finite; lower lr (e.g. by 10x) or check the data scale."
        ) from err
    state = s.final_states[0]
    fitted = s.view.unravel(state.position)
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(fitted[name])
    module.eval()
    done = state.history[torch.isfinite(state.history[:, 0])]
    return {k: [float(v) for v in done[:, i]] for i, k in enumerate(("loss", "nll", "kl"))}


def _flat_kl(module: nn.Module, params: dict[str, Tensor]) -> Tensor:
    """``KL(q || p)`` of every Bayesian layer, from the parameter tensors ``params`` (by name)."""
    total = None
    for prefix, layer in module.named_modules():
        if not isinstance(layer, BayesianLayer):
            continue
        pre = f"{prefix}." if prefix else ""
        s = torch.tensor(layer.prior_scale, dtype=layer.weight_mu.dtype, device=layer.weight_mu.device)
        kl = gaussian_kl(params[pre + "weight_mu"], F.softplus(params[pre + "weight_rho"]), s)
        if layer.bias_mu is not None:
            kl = kl + gaussian_kl(params[pre + "bias_mu"], F.softplus(params[pre + "bias_rho"]), s)
        total = kl if total is None else total + kl
    assert total is not None  # LayersObjective checked the module has Bayesian layers
    return total


def predict_bayesian_layers(
    module: nn.Module, inputs: Tensor, likelihood: Likelihood, num_samples: int = 100, seed: int = 0
) -> RegressionPredictive | ClassificationPredictive:
    """Mixture predictive over ``num_samples`` weight draws (one per forward, shared by the batch).

    The layers' ``sample`` flags, generators and the module's training mode are restored after.
    """
    check_int_at_least("num_samples", num_samples, 1)
    layers = _require_layers(module, "predict_bayesian_layers")
    inputs = check_inputs(module, inputs, layers[0].weight_mu.dtype)
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
