"""Monte-Carlo dropout (Gal & Ghahramani 2016): dropout training as approximate variational inference.

A network with dropout layers is trained with dropout on, minimising per data point (Adam, one
minibatch ``B`` of ``M`` of the ``N`` rows at a time)::

    L(w) = -(1/M) sum_{i in B} log p(y_i | f(x_i; w, z)) + sum_j (lambda_j / 2) w_j^2

with fresh dropout masks ``z`` per example.  This is ``1/N`` times the negative ELBO of a
Bernoulli-dropout variational family under a Gaussian prior ``w_j ~ N(0, s_j^2)``, whose KL term is
approximately ``sum_j (1 - p) / (2 s_j^2) w_j^2`` up to a constant (Gal & Ghahramani 2016,
appendix), so the weight decay is::

    lambda_j = (1 - p) / (N s_j^2)

(``p`` the dropout rate; with dropout layers of several rates their mean is used).  ``s_j`` comes
from the Posterior's :class:`~bnnkit.GaussianPrior` (per-layer ``scales`` included) or, for a bare
module, from ``prior_scale``; an explicit ``weight_decay`` overrides it with one ``lambda`` for all
trained parameters.  The factor ``1 - p`` is applied to every trained parameter (a common
simplification), although strictly it belongs to the weights that act on dropped units only.  For
a Gaussian likelihood the noise precision ``tau = 1/sigma^2`` enters through ``log p``, so unlike
a plain squared-error loss no ``tau`` appears in ``lambda``.

Prediction keeps dropout on: ``S`` forward passes, each with one mask drawn for the whole batch
(one network draw, so ``f_s`` is a function), give the same mixture predictive as posterior draws
(:class:`~bnnkit.predict.RegressionPredictive` with the likelihood's fixed noise as the aleatoric
part, or :class:`~bnnkit.predict.ClassificationPredictive`).  Other layers are in eval mode then
(batch norm uses its running statistics).  Every mask comes from an explicit ``torch.Generator``:
the dropout layers' ``forward`` is swapped for a generator-driven one for the duration of a call.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field

import torch
from torch import Tensor, nn

from ..core.errors import (
    BnnkitError,
    check_finite_rows,
    check_int_at_least,
    check_positive,
    resolve_batch_size,
)
from ..core.posterior import Posterior
from ..core.random import make_generator
from ..likelihoods import Bernoulli, Categorical, Gaussian, Likelihood
from ..predict.predictive import ClassificationPredictive, RegressionPredictive
from ..priors.base import scale_vector
from ..priors.gaussian import GaussianPrior

SUPPORTED = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d)


@dataclass(frozen=True)
class MCDropout:
    """MC dropout training (see the module doc for the objective and the weight-decay mapping).

    Args:
        p: dropout rate set on every dropout layer of the trained copy; ``None`` keeps the
            network's own rates.  ``MCDropout.wrap`` inserts dropout layers where there are none.
        lr: Adam learning rate.
        num_epochs: passes over the data.
        batch_size: minibatch size (``None``: full batch).
        weight_decay: ``lambda`` for every trained parameter; ``None`` derives it from the prior.
        prior_scale: prior standard deviation ``s`` for a bare module (a Posterior uses its prior).
        lr_decay: ``None`` or ``"cosine"``.
    """

    p: float | None = 0.1
    lr: float = 1e-2
    num_epochs: int = 100
    batch_size: int | None = None
    weight_decay: float | None = None
    prior_scale: float = 1.0
    lr_decay: str | None = None
    name: str = "mc-dropout"

    def __post_init__(self) -> None:
        if self.p is not None:
            _check_rate(self.p)
        check_positive("lr", self.lr)
        check_int_at_least("num_epochs", self.num_epochs, 1)
        if self.batch_size is not None:
            check_int_at_least("batch_size", self.batch_size, 1)
        if self.weight_decay is not None and not (
            math.isfinite(self.weight_decay) and self.weight_decay >= 0
        ):
            raise BnnkitError(f"weight_decay must be a finite number >= 0, got {self.weight_decay!r}.")
        check_positive("prior_scale", self.prior_scale, "Pass the prior standard deviation of the weights.")
        if self.lr_decay not in (None, "cosine"):
            raise BnnkitError(f"lr_decay must be None or 'cosine', got {self.lr_decay!r}.")

    def config(self) -> dict:
        return asdict(self)

    @staticmethod
    def wrap(module: nn.Module, p: float = 0.1) -> nn.Module:
        """A copy of ``module`` with ``nn.Dropout(p)`` before every ``nn.Linear`` but the first.

        Each such layer ``L`` is replaced by ``nn.Sequential(nn.Dropout(p), L)`` (so its parameter
        names gain a ``.1``: ``"fc2.weight"`` becomes ``"fc2.1.weight"``); the first ``nn.Linear``
        in ``module.modules()`` order sees the raw inputs and gets no dropout.
        """
        _check_rate(p)
        out = copy.deepcopy(module)
        linears = [(name, m) for name, m in out.named_modules() if isinstance(m, nn.Linear)]
        if len(linears) < 2:
            raise BnnkitError(
                f"MCDropout.wrap puts dropout before every nn.Linear but the first; {type(module).__name__} "
                f"has {len(linears)} nn.Linear layer(s). Add nn.Dropout layers to the network yourself."
            )
        for name, layer in linears[1:]:
            parent_name, _, attr = name.rpartition(".")
            parent = out.get_submodule(parent_name) if parent_name else out
            setattr(parent, attr, nn.Sequential(nn.Dropout(p), layer))
        return out

    def fit(
        self,
        model: nn.Module | Posterior,
        data: tuple[Tensor, Tensor],
        *,
        likelihood: Likelihood | None = None,
        seed: int = 0,
        progress: bool = True,
    ) -> MCDropoutResult:
        """Train a copy of the network (``model`` itself is not modified) on ``data``.

        ``model`` is a :class:`~bnnkit.Posterior` (its module, likelihood and Gaussian prior; only
        its sampled parameters are trained) or an ``nn.Module`` together with ``likelihood=``.
        """
        module, lik, trained, scales = self._resolve(model, likelihood, data)
        inputs, targets = data
        n = int(inputs.shape[0])
        bs = resolve_batch_size(self.batch_size, n)
        net = copy.deepcopy(module)
        layers = _dropout_layers(net)
        for layer in layers:
            if self.p is not None:
                layer.p = self.p
            elif not 0 < layer.p < 1:
                raise BnnkitError(
                    f"a {type(layer).__name__} layer has rate {layer.p!r}; MC dropout needs rates strictly "
                    "between 0 and 1 (pass p= to set one rate for all dropout layers)."
                )
        rate = sum(layer.p for layer in layers) / len(layers)
        params = dict(net.named_parameters())
        for name, prm in params.items():
            prm.requires_grad_(name in trained)
        train = [params[name] for name in trained]
        if self.weight_decay is not None:
            decay = [torch.full((), float(self.weight_decay), dtype=p.dtype) for p in train]
        else:
            decay = [(1.0 - rate) / (n * s * s) for s in scales]
        gen = make_generator(seed, 0)
        opt = torch.optim.Adam(train, lr=self.lr)
        num_batches = math.ceil(n / bs)
        total = self.num_epochs * num_batches
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, total) if self.lr_decay == "cosine" else None
        history: dict[str, list[float]] = {"loss": [], "nll": []}
        bar = _bar(self.num_epochs, progress)
        net.train()
        with _masks(layers, gen, shared=False):
            for _ in range(self.num_epochs):
                perm = torch.randperm(n, generator=gen) if bs < n else None
                e_loss, e_nll = 0.0, 0.0
                for i in range(num_batches):
                    if perm is None:
                        xb, yb = inputs, targets
                    else:
                        idx = perm[i * bs : (i + 1) * bs]
                        xb, yb = inputs[idx], targets[idx]
                    nll = -lik.log_prob(net(xb), yb, {}) / xb.shape[0]
                    penalty = sum(0.5 * (lam * w * w).sum() for lam, w in zip(decay, train))
                    loss = nll + penalty
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                    if sched is not None:
                        sched.step()
                    e_loss += float(loss.detach()) / num_batches
                    e_nll += float(nll.detach()) / num_batches
                history["loss"].append(e_loss)
                history["nll"].append(e_nll)
                if not math.isfinite(e_loss):
                    raise BnnkitError("the MC-dropout loss became non-finite; lower lr (e.g. by 10x).")
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(loss=f"{e_loss:.4g}", nll=f"{e_nll:.4g}", refresh=False)
        if bar is not None:
            bar.close()
        net.eval()
        for prm in net.parameters():
            prm.requires_grad_(False)
        return MCDropoutResult(net, lik, history, {"mc_dropout": self.config(), "dropout_rate": rate})

    def _resolve(
        self, model: nn.Module | Posterior, likelihood: Likelihood | None, data: tuple[Tensor, Tensor]
    ) -> tuple[nn.Module, Likelihood, list[str], list[Tensor]]:
        """Module, likelihood, names of the trained parameters and their prior scales."""
        if isinstance(model, Posterior):
            if likelihood is not None:
                raise BnnkitError("a Posterior brings its own likelihood; do not pass likelihood= with it.")
            model.check_data(data)
            if model.initial_extras:
                raise BnnkitError(
                    "MC dropout trains the network weights only; this posterior also samples "
                    f"{', '.join(model.initial_extras)}. Use a fixed noise (learn_noise=False) and a fixed prior scale."
                )
            _check_likelihood(model.likelihood)
            prior = model.prior
            names = list(model.net_names)
            if isinstance(prior, GaussianPrior):
                flat = scale_vector(model.net_view, prior.scale, prior.scales)
                scales = [
                    flat[model.net_view.slice(n)].view(model.net_view.shapes[i]) for i, n in enumerate(names)
                ]
            elif self.weight_decay is None:
                raise BnnkitError(
                    f"MC dropout derives its weight decay from a GaussianPrior; this posterior has a "
                    f"{type(prior).__name__}. Pass weight_decay= explicitly or use a GaussianPrior."
                )
            else:
                scales = []
            return model.module, model.likelihood, names, scales
        if not isinstance(model, nn.Module):
            raise BnnkitError(
                f"model must be an nn.Module or a bnnkit.Posterior, got {type(model).__name__}."
            )
        if likelihood is None:
            raise BnnkitError(
                "fitting a bare nn.Module needs likelihood= (e.g. bnnkit.Gaussian(noise) for regression, "
                "bnnkit.Categorical() for classification), or pass a bnnkit.Posterior."
            )
        _check_likelihood(likelihood)
        _check_data(model, likelihood, data)
        named = dict(model.named_parameters())
        if not named:
            raise BnnkitError(f"{type(model).__name__} has no parameters to train.")
        scales = [torch.full((), self.prior_scale, dtype=p.dtype) for p in named.values()]
        return model, likelihood, list(named), scales


@dataclass
class MCDropoutResult:
    """A network trained with dropout; :meth:`predict` keeps dropout on (MC dropout)."""

    module: nn.Module
    likelihood: Likelihood
    history: dict[str, list[float]] = field(default_factory=dict)
    config: dict = field(default_factory=dict)

    def outputs(self, inputs: Tensor, num_samples: int = 100, seed: int = 0) -> Tensor:
        """Network outputs ``[S, N, ...]`` of ``num_samples`` dropout draws (one mask per draw)."""
        check_int_at_least("num_samples", num_samples, 1)
        gen = make_generator(seed, 0)
        self.module.eval()
        with torch.no_grad(), _masks(_dropout_layers(self.module), gen, shared=True):
            return torch.stack([self.module(inputs) for _ in range(num_samples)])

    def predict(
        self, inputs: Tensor, num_samples: int = 100, seed: int = 0
    ) -> RegressionPredictive | ClassificationPredictive:
        """MC-dropout predictive at ``inputs``; the same seed gives the same predictive."""
        return predictive_from_outputs(self.outputs(inputs, num_samples, seed), self.likelihood)


def predictive_from_outputs(
    out: Tensor, likelihood: Likelihood
) -> RegressionPredictive | ClassificationPredictive:
    """Equally weighted mixture predictive from network outputs ``[S, N, ...]`` of ``S`` draws."""
    s = out.shape[0]
    if isinstance(likelihood, Gaussian):
        if likelihood.learn_noise:
            raise BnnkitError("a predictive from outputs needs a Gaussian likelihood with fixed noise.")
        f = out.squeeze(-1) if out.ndim == 3 and out.shape[-1] == 1 else out
        noise_var = torch.full((s, *([1] * (f.ndim - 1))), likelihood.noise**2, dtype=f.dtype)
        return RegressionPredictive(f, noise_var, torch.full((s,), -math.log(s), dtype=torch.float64))
    if isinstance(likelihood, Bernoulli):
        p1 = torch.sigmoid(out.squeeze(-1) if out.shape[-1] == 1 else out)
        return ClassificationPredictive(torch.stack([1 - p1, p1], -1).mean(0))
    if isinstance(likelihood, Categorical):
        return ClassificationPredictive(torch.softmax(out, -1).mean(0))
    raise BnnkitError(f"no predictive for likelihood {type(likelihood).__name__}.")


def _check_rate(p: float) -> None:
    if not (isinstance(p, (int, float)) and 0 < p < 1):
        raise BnnkitError(f"the dropout rate p must lie strictly between 0 and 1, got {p!r}.")


def _check_likelihood(lik: Likelihood) -> None:
    if not isinstance(lik, (Gaussian, Bernoulli, Categorical)):
        raise BnnkitError(
            f"MC dropout supports Gaussian, Bernoulli and Categorical likelihoods, got {type(lik).__name__}."
        )
    if isinstance(lik, Gaussian) and lik.learn_noise:
        raise BnnkitError("MC dropout needs a fixed noise: use Gaussian(noise) with learn_noise=False.")


def _check_data(module: nn.Module, lik: Likelihood, data: tuple[Tensor, Tensor]) -> None:
    if not (isinstance(data, (tuple, list)) and len(data) == 2):
        raise BnnkitError("data must be a tuple (inputs, targets) of tensors.")
    for name, t in zip(("inputs", "targets"), data):
        if not isinstance(t, Tensor) or t.ndim == 0 or t.shape[0] == 0:
            raise BnnkitError(f"{name} must be a non-empty torch.Tensor with one row per example.")
        check_finite_rows(name, t)
    inputs, targets = data
    with torch.no_grad():
        try:
            out = module(inputs[:8])
        except RuntimeError as e:
            raise BnnkitError(f"the model failed on inputs of shape {tuple(inputs.shape)}: {e}.") from e
    lik.check(torch.zeros((inputs.shape[0], *out.shape[1:]), dtype=out.dtype), targets)


def _dropout_layers(module: nn.Module) -> list[nn.Module]:
    layers = [m for m in module.modules() if isinstance(m, nn.modules.dropout._DropoutNd)]
    if not layers:
        raise BnnkitError(
            f"{type(module).__name__} contains no dropout layer (nn.Dropout modules; functional F.dropout "
            "calls are not seen). Add nn.Dropout layers to the network, or use MCDropout.wrap(module, p), "
            "which puts nn.Dropout(p) before every nn.Linear but the first."
        )
    bad = sorted({type(m).__name__ for m in layers if type(m) not in SUPPORTED})
    if bad:
        raise BnnkitError(
            f"MC dropout supports nn.Dropout, nn.Dropout1d/2d/3d; the network has {', '.join(bad)}. "
            "Replace those layers with nn.Dropout."
        )
    return layers


def _mask_forward(layer: nn.Module, gen: torch.Generator, shared: bool) -> Callable[[Tensor], Tensor]:
    """Dropout with masks from ``gen``: per example (training) or one per batch (``shared``)."""

    def forward(x: Tensor) -> Tensor:
        p = float(layer.p)
        if p == 0.0:
            return x
        if isinstance(layer, nn.Dropout):
            shape = tuple(x.shape)
        else:  # feature dropout: whole channels, input [N, C, ...]
            shape = (*x.shape[:2], *([1] * (x.ndim - 2)))
        if shared:
            shape = (1, *shape[1:])
        keep = torch.rand(shape, generator=gen, dtype=x.dtype, device=x.device) >= p
        return x * keep.to(x.dtype) / (1.0 - p)

    return forward


@contextlib.contextmanager
def _masks(layers: list[nn.Module], gen: torch.Generator, shared: bool) -> Iterator[None]:
    for layer in layers:
        layer.forward = _mask_forward(layer, gen, shared)  # instance attribute shadows the method
    try:
        yield
    finally:
        for layer in layers:
            del layer.forward


def _bar(total: int, progress: bool):
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="mc-dropout", unit="epoch", mininterval=0.25, dynamic_ncols=True)
