"""Monte-Carlo dropout (Gal & Ghahramani 2016): dropout training as approximate variational inference.

A network with dropout layers is trained with dropout on, with the weight decay that makes its loss
``1/N`` times the negative ELBO of a Bernoulli-dropout variational family under a Gaussian prior
(:class:`MCDropout` gives the objective).

Prediction keeps dropout on: ``S`` forward passes, each with one mask drawn for the whole batch
(one network draw, so ``f_s`` is a function), give the same mixture predictive as posterior draws
(:class:`~bnnkit.predict.RegressionPredictive` with the likelihood's fixed noise as the aleatoric
part, or :class:`~bnnkit.predict.ClassificationPredictive`).  Other layers are in eval mode then
(batch norm uses its running statistics).  Every mask comes from an explicit ``torch.Generator``:
the dropout layers' ``forward`` is swapped for a generator-driven one for the duration of a call.

The same networks are also weight draws: a mask on the inputs of a linear map scales its weight's
columns, so :meth:`MCDropoutResult.sample` (and ``bnnkit.sample(MCDropout(...), ...)``, whose
kernel trains and then draws, see :meth:`MCDropout.build`) gives :class:`~bnnkit.Samples` that
:func:`bnnkit.predict.predict`, the metrics and the ArviZ export take as they are.  Training runs
through the driver (:func:`bnnkit.sample`) like every VI method: one loop, one progress bar,
``output=`` streaming and resume.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, NamedTuple

import torch
from torch import Tensor, nn

from ..core.errors import (
    BnnkitError,
    DivergenceError,
    check_finite_rows,
    check_int_at_least,
    check_positive,
    resolve_batch_size,
)
from ..core.posterior import Posterior, check_inputs
from ..core.random import make_generator
from ..core.samples import Samples
from ..core.types import Kernel
from ..likelihoods import Bernoulli, Categorical, Gaussian, Likelihood
from ..predict.predictive import ClassificationPredictive, RegressionPredictive
from ..priors.base import scale_vector
from ..priors.gaussian import GaussianPrior
from .kernel import _FALSE, _TRUE, VIInfo  # elbo: -L(w) of the minibatch (~ ELBO / N)
from .optim import check_fit_options, loss_fit_start, loss_fit_step

SUPPORTED = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d)


@dataclass(frozen=True)
class MCDropout:
    """MC dropout training: the objective and its weight decay.

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
        check_fit_options(self.lr, self.num_epochs, self.batch_size, self.lr_decay)
        if self.weight_decay is not None and not (
            math.isfinite(self.weight_decay) and self.weight_decay >= 0
        ):
            raise BnnkitError(f"weight_decay must be a finite number >= 0, got {self.weight_decay!r}.")
        check_positive("prior_scale", self.prior_scale, "Pass the prior standard deviation of the weights.")

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

    # What the driver reads (see bnnkit.core.types.Algorithm).
    needs_model: ClassVar[bool] = True
    default_init: ClassVar[str] = "module"
    vectorizable: ClassVar[bool] = False
    not_vectorizable_because: ClassVar[str] = "the dropout masks are drawn inside one network's forward"

    def build(self, target: Any, model: Posterior | None = None, *, fit_only: bool = False) -> Kernel:
        """The kernel of MC-dropout training on ``model`` (a :class:`~bnnkit.Posterior`), then draws.

        Step ``t < T = num_epochs * ceil(N / batch_size)``: fresh per-example masks ``z`` from the
        generator, the gradient ``g`` of ``L(w)`` (module doc) on the minibatch, and one Adam step
        (:func:`~bnnkit.vi.optim.adam_update`); ``position`` is ``w``.  Step ``T`` and after: one
        weight draw per step, the network with one dropout mask for the whole batch written into
        its weights.  A mask on the inputs of a linear map is a scaling of its weight's columns::

            (x * z / (1 - p)) W^T = x (W diag(z) / (1 - p))^T,   z_j ~ Bernoulli(1 - p)

        (for ``nn.DropoutNd`` before an ``nn.ConvNd``, the input-channel slices of its weight), so
        the draw is a weight vector that :func:`bnnkit.predict.predict` evaluates with the network
        in ``eval()`` mode (dropout off): the same mixture predictive as
        :meth:`MCDropoutResult.predict`.  That needs every dropout layer directly before the
        ``nn.Linear``/``nn.ConvNd`` it feeds (or before ``nn.Flatten``, ``nn.Linear``), in an
        ``nn.Sequential`` (as :meth:`wrap` builds).
        """
        from .run import _require_posterior

        posterior = _require_posterior(model, type(self).__name__)
        module, lik, trained, scales = self._resolve(posterior, None, None)
        net = copy.deepcopy(module)
        layers = self._set_rates(net)
        rate = sum(layer.p for layer in layers) / len(layers)
        view = posterior.view
        n = posterior.num_data
        if n is None:
            raise BnnkitError(
                "MC dropout's weight decay (1 - p) / (N s^2) needs the training-set size: build the Posterior "
                "with num_data=N."
            )
        if self.weight_decay is not None:
            decay = torch.full((view.size,), float(self.weight_decay), dtype=view.dtype, device=view.device)
        else:
            decay = torch.cat(
                [
                    ((1.0 - rate) / (n * s * s)).expand(view.shapes[i]).reshape(-1)
                    for i, s in enumerate(scales)
                ]
            )
        bs = resolve_batch_size(self.batch_size, n)
        per_epoch = math.ceil(n / bs)
        total = self.num_epochs * per_epoch
        folds = None if fit_only else _mask_folds(net, layers, posterior)
        lr, lr_decay = self.lr, self.lr_decay
        names = list(trained)
        net.train()

        def init(position: Tensor, batch: Any) -> DropoutState:
            x = position.detach().clone()
            return DropoutState(position=x, weights=x, **loss_fit_start(x, lr, self.num_epochs, 2))

        def step(state: DropoutState, batch: Any, gen: torch.Generator) -> tuple[DropoutState, VIInfo]:
            t = int(state.iteration)
            if t >= total:
                w = state.weights if folds is None else _fold_masks(state.weights, folds, gen)
                return state._replace(position=w, iteration=state.iteration + 1), VIInfo(
                    -state.history[-1, 0], state.step_size, _TRUE
                )
            xb, yb = batch
            with torch.enable_grad(), _masks(layers, gen, shared=False):
                w = state.weights.detach().requires_grad_(True)
                params = dict(zip(names, view.unravel(w).values()))
                out = torch.func.functional_call(net, params, (xb,))
                nll = -lik.log_prob(out, yb, {}) / xb.shape[0]
                loss = nll + 0.5 * torch.dot(decay, w * w)
                (g,) = torch.autograd.grad(loss, w)
            # history: the epoch's mean loss and NLL per data point
            x, fields = loss_fit_step(state, state.weights, g, loss, nll, t, (lr, lr_decay, total, per_epoch))
            new = DropoutState(position=x, weights=x, **fields)
            return new, VIInfo(-loss.detach(), new.step_size, _FALSE)

        return Kernel(init, step, fit_steps=total)

    def fit(
        self,
        model: nn.Module | Posterior,
        data: tuple[Tensor, Tensor],
        *,
        likelihood: Likelihood | None = None,
        seed: int = 0,
        progress: bool = True,
        output: str | None = None,
    ) -> MCDropoutResult:
        """Train a copy of the network (``model`` itself is not modified) on ``data``.

        ``model`` is a :class:`~bnnkit.Posterior` (its module, likelihood and Gaussian prior; only
        its sampled parameters are trained) or an ``nn.Module`` together with ``likelihood=``
        (then with the prior ``N(0, prior_scale^2)`` on every parameter).  The training runs
        through :func:`bnnkit.sample` with the kernel of :meth:`build` (``output=`` streams,
        checkpoints and resumes it).
        """
        from ..core.driver import sample
        from ..data.minibatch import Minibatches

        data = _as_data(model, data)
        module, lik, trained, scales = self._resolve(model, likelihood, data)
        net = copy.deepcopy(module)  # the trained copy: the caller's module is left alone
        layers = self._set_rates(net)
        rate = sum(layer.p for layer in layers) / len(layers)
        if isinstance(model, Posterior):
            posterior = model
        else:  # every parameter trained, prior N(0, prior_scale^2); eval(): a function of the weights
            posterior = Posterior(copy.deepcopy(module).eval(), lik, GaussianPrior(self.prior_scale))
        inputs, targets = data
        n = int(inputs.shape[0])
        bs = resolve_batch_size(self.batch_size, n)
        history_names = ("loss", "nll")
        try:
            s = sample(
                _FitOnly(self),
                posterior.with_num_data(n),
                Minibatches(inputs, targets, batch_size=bs),
                num_samples=1,
                seed=seed,
                progress=progress,
                output=output,
            )
        except DivergenceError as err:
            raise BnnkitError("the MC-dropout loss became non-finite; lower lr (e.g. by 10x).") from err
        state = s.final_states[0]
        with torch.no_grad():
            named = dict(net.named_parameters())
            for name, value in posterior.view.unravel(state.weights).items():
                named[name].copy_(value)
        net.eval()
        for prm in net.parameters():
            prm.requires_grad_(False)
        done = state.history[torch.isfinite(state.history[:, 0])]
        history = {k: [float(v) for v in done[:, i]] for i, k in enumerate(history_names)}
        return MCDropoutResult(
            net,
            lik,
            history,
            {"mc_dropout": self.config(), "dropout_rate": rate},
            posterior=posterior if isinstance(model, Posterior) else None,
        )

    def _set_rates(self, net: nn.Module) -> list[nn.Module]:
        """The dropout layers of ``net``, with this algorithm's rate ``p`` set on them."""
        layers = _dropout_layers(net)
        for layer in layers:
            if self.p is not None:
                layer.p = self.p
            elif not 0 < layer.p < 1:
                raise BnnkitError(
                    f"a {type(layer).__name__} layer has rate {layer.p!r}; MC dropout needs rates strictly "
                    "between 0 and 1 (pass p= to set one rate for all dropout layers)."
                )
        return layers

    def _resolve(
        self, model: nn.Module | Posterior, likelihood: Likelihood | None, data: tuple[Tensor, Tensor]
    ) -> tuple[nn.Module, Likelihood, list[str], list[Tensor]]:
        """Module, likelihood, names of the trained parameters and their prior scales."""
        if isinstance(model, Posterior):
            if likelihood is not None:
                raise BnnkitError("a Posterior brings its own likelihood; do not pass likelihood= with it.")
            if data is not None:
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


class DropoutState(NamedTuple):
    position: Tensor  # the trained weights while training; a weight draw (masks folded in) after
    weights: Tensor  # the trained weights w (flat over the posterior's sampled parameters)
    exp_avg: Tensor  # Adam's first moments
    exp_avg_sq: Tensor  # Adam's second moments
    adam_step: Tensor  # float32 0-d: Adam's step count
    iteration: Tensor  # int64 0-d
    step_size: Tensor  # the learning rate of the last step
    sums: Tensor  # [2]: this epoch's running mean loss and NLL
    history: Tensor  # [num_epochs, 2]: per-epoch loss and NLL, NaN after


class _FitOnly:
    """MCDropout whose kernel, once trained, repeats the trained weights (``fit`` needs only the
    state), so ``fit`` also trains networks whose masks cannot be written into weights."""

    needs_model = True
    default_init = "module"

    def __init__(self, algorithm: MCDropout):
        self.algorithm, self.name = algorithm, algorithm.name

    def config(self) -> dict:
        return self.algorithm.config()

    def build(self, target: Any, model: Any = None) -> Kernel:
        return self.algorithm.build(target, model, fit_only=True)


class _Fold(NamedTuple):
    rate: float
    block: slice  # the weight's entries in the flat vector
    shape: tuple[int, ...]  # the weight's shape
    units: int  # the masked inputs: the weight's dimension 1 (columns, input channels)


def _mask_folds(net: nn.Module, layers: list[nn.Module], posterior: Posterior) -> list[_Fold]:
    """Where each dropout layer's mask lands in the flat weights: the columns (input channels) of
    the ``nn.Linear`` (``nn.ConvNd``) right after it in its ``nn.Sequential`` (an ``nn.Linear``
    after an ``nn.Flatten`` too: an elementwise mask on ``[N, C, ...]`` is then one per column)."""
    view = posterior.view
    folds: dict[int, _Fold] = {}
    for prefix, mod in net.named_modules():
        if not isinstance(mod, nn.Sequential):
            continue
        kids = list(mod.named_children())
        for j, ((_, a), (name_b, b)) in enumerate(zip(kids, kids[1:])):
            if type(a) is nn.Dropout and isinstance(b, nn.Flatten) and b.start_dim == 1 and j + 2 < len(kids):
                # elementwise masks on [N, C, ...] flatten to one mask per column of the next Linear
                name_b, b = kids[j + 2]
            ok = (type(a) is nn.Dropout and isinstance(b, nn.Linear)) or (
                type(a) in (nn.Dropout1d, nn.Dropout2d, nn.Dropout3d)
                and isinstance(b, (nn.Conv1d, nn.Conv2d, nn.Conv3d))
                and b.groups == 1
            )
            weight = f"{prefix}.{name_b}.weight" if prefix else f"{name_b}.weight"
            if ok and weight in view.names:
                i = view.names.index(weight)
                folds[id(a)] = _Fold(
                    float(a.p), view.slice(weight), tuple(view.shapes[i]), int(view.shapes[i][1])
                )
    missing = [type(layer).__name__ for layer in layers if id(layer) not in folds]
    if missing:
        raise BnnkitError(
            f"MC-dropout draws are weight vectors only when every dropout layer sits right before the "
            f"(sampled) nn.Linear / nn.ConvNd it feeds, in an nn.Sequential; {len(missing)} of this network's "
            f"{len(layers)} dropout layers do not ({', '.join(missing)}). Build the network with "
            "MCDropout.wrap(module, p), or use MCDropout(...).fit(...) and its result's predict()."
        )
    return [folds[id(layer)] for layer in layers]


def _fold_masks(weights: Tensor, folds: list[_Fold], gen: torch.Generator) -> Tensor:
    """One network draw: each dropout mask (one per input unit, shared by the whole batch) written
    into the weight it feeds, ``W[:, j] * z_j / (1 - p)``."""
    w = weights.clone()
    for f in folds:
        keep = torch.rand(f.units, generator=gen, dtype=w.dtype, device=w.device) >= f.rate
        scale = keep.to(w.dtype) / (1.0 - f.rate)
        block = w[f.block].view(f.shape)
        block.mul_(scale.view(1, -1, *([1] * (len(f.shape) - 2))))
    return w


@dataclass
class MCDropoutResult:
    """A network trained with dropout; :meth:`predict` keeps dropout on (MC dropout), and
    :meth:`sample` gives the same networks as weight draws for :func:`bnnkit.predict.predict`."""

    module: nn.Module
    likelihood: Likelihood
    history: dict[str, list[float]] = field(default_factory=dict)
    config: dict = field(default_factory=dict)
    posterior: Posterior | None = None

    def sample(self, num_samples: int = 100, seed: int = 0, posterior: Posterior | None = None) -> Samples:
        """``num_samples`` MC-dropout networks as weight draws, a one-chain :class:`~bnnkit.Samples`.

        Each draw is the trained weights with one dropout mask per layer written into the weight
        it feeds (see :meth:`MCDropout.build`); :func:`bnnkit.predict.predict` with ``posterior``
        (the fitted one by default; its network is evaluated with dropout off) gives the same
        mixture predictive as :meth:`predict`.  The same seed gives the same draws.
        """
        check_int_at_least("num_samples", num_samples, 1)
        post = posterior if posterior is not None else self.posterior
        if post is None:
            raise BnnkitError(
                "weight draws need the Posterior of the network: fit a bnnkit.Posterior, or pass posterior=."
            )
        layers = _dropout_layers(self.module)
        folds = _mask_folds(self.module, layers, post)
        named = dict(self.module.named_parameters())
        w = post.view.ravel({n: named[n].detach() for n in post.view.names}).to(post.view.dtype)
        gen = make_generator(seed, 0)
        draws = torch.stack([_fold_masks(w, folds, gen) for _ in range(num_samples)])
        stats = {"log_density": torch.full((1, num_samples), math.nan, dtype=torch.float64)}
        return Samples(draws.unsqueeze(0), stats, post.view, {"mc_dropout": self.config})

    def outputs(self, inputs: Tensor, num_samples: int = 100, seed: int = 0) -> Tensor:
        """Network outputs ``[S, N, ...]`` of ``num_samples`` dropout draws (one mask per draw)."""
        check_int_at_least("num_samples", num_samples, 1)
        inputs = check_inputs(self.module, inputs, _module_dtype(self.module))
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


def _module_dtype(module: nn.Module) -> torch.dtype:
    p = next(module.parameters(), None)
    return p.dtype if p is not None and p.is_floating_point() else torch.get_default_dtype()


def _as_data(model: Any, data: Any) -> Any:
    """``data`` (tensors, NumPy arrays or a ``DataLoader``) as a pair of tensors, inputs in the
    network's dtype; anything else is left for the checks to refuse with their message."""
    from ..data.coerce import as_pair, is_loader

    if isinstance(model, Posterior):
        return model.as_data(data)
    if not (is_loader(data) or (isinstance(data, (tuple, list)) and len(data) == 2)):
        return data
    inputs, targets = as_pair(data)
    if isinstance(model, nn.Module) and inputs.is_floating_point():
        inputs = inputs.to(_module_dtype(model))
    return inputs, targets


def _check_data(module: nn.Module, lik: Likelihood, data: tuple[Tensor, Tensor]) -> None:
    if not (isinstance(data, (tuple, list)) and len(data) == 2):
        raise BnnkitError(
            "data must be a tuple (inputs, targets) of tensors or NumPy arrays, or a torch DataLoader yielding "
            f"(x, y) batches; got {type(data).__name__}."
        )
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
