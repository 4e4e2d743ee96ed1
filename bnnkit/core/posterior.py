"""A Bayesian model over any ``nn.Module``: likelihood x prior, with minibatch scaling.

.. math::

    \\log p(w \\mid D) \\doteq \\frac{N}{M} \\sum_{i \\in B} \\log p(y_i \\mid f(x_i; w)) + \\log p(w)

for a minibatch ``B`` of ``M`` rows out of ``N``.  The module is used functionally through
``torch.func.functional_call``: parameters are a dict of tensors, buffers pass through unchanged,
and the module's own parameters are never modified.  Parameters outside ``bayesian`` stay fixed at
their current values (e.g. a Bayesian last layer on top of a fixed feature extractor).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Iterable, Mapping

import torch
from torch import Tensor, nn

from .arrays import to_tensor
from .errors import BnnkitError, check_finite_rows
from .flat import FlatView
from .likelihood_base import Likelihood
from .mlp import StackedMLP
from .module_call import ModuleCaller
from .prior_base import Prior
from .random import gamma
from .target import Target
from .types import Batch

LIK = "likelihood."
PRIOR = "prior."


class Posterior:
    """Posterior over the parameters of ``module``.

    Args:
        module: any ``nn.Module``; its output for inputs ``X`` is fed to the likelihood.
        likelihood: e.g. :class:`~bnnkit.likelihoods.Gaussian`.
        prior: e.g. :class:`~bnnkit.priors.GaussianPrior`, laid over the sampled parameters.
        num_data: N, the training-set size; a batch of M rows is scaled by N/M. ``None`` means
            every batch is the full data set (no scaling).
        bayesian: which parameters are sampled: ``None`` (all), names or name prefixes
            (``["2."]`` for the last layer of a ``Sequential``), or a predicate on the name.
    """

    def __init__(
        self,
        module: nn.Module,
        likelihood: Likelihood,
        prior: Prior,
        num_data: int | None = None,
        bayesian: Iterable[str] | Callable[[str], bool] | None = None,
    ):
        _check_num_data(num_data)
        _warn_stochastic_layers(module)
        self.module = module
        self.likelihood = likelihood
        self.prior = prior
        self.num_data = num_data
        named = dict(module.named_parameters())
        if not named:
            raise BnnkitError(
                f"{type(module).__name__} has no parameters; a Bayesian model needs at least one parameter."
            )
        select = _selector(bayesian, named)
        net = {n: p.detach().clone() for n, p in named.items() if select(n)}
        if not net:
            raise BnnkitError(
                f"bayesian={bayesian!r} selects none of the module's parameters ({', '.join(named)})."
            )
        for n in net:
            if n.startswith((LIK, PRIOR)):
                raise BnnkitError(
                    f"parameter name {n!r} clashes with bnnkit's reserved prefixes; rename the submodule."
                )
        self.fixed = {n: p.detach() for n, p in named.items() if n not in net}
        self.net_names = tuple(net)
        self.net_view = FlatView(net)
        self.bound_prior = prior.bind(self.net_view)
        dtype = self.net_view.dtype
        device = next(iter(net.values())).device  # the extras live with the network's weights
        extras: dict[str, Tensor] = {}
        for k, v in likelihood.extra_params().items():
            extras[LIK + k] = v.to(dtype=dtype, device=device).reshape(1)
        for k, v in self.bound_prior.extra.items():
            extras[PRIOR + k] = v.to(dtype=dtype, device=device).reshape(1)
        self.initial_extras = extras
        self.view = FlatView({**net, **extras})
        self.d_net = self.net_view.size
        self._call = ModuleCaller(module, self.net_names, self.fixed)
        self._n_net = len(self.net_names)
        self._lik_keys = tuple(n[len(LIK) :] for n in extras if n.startswith(LIK))
        self._prior_keys = tuple(n[len(PRIOR) :] for n in extras if n.startswith(PRIOR))
        self._mlp = StackedMLP.build(self)  # None unless a plain MLP with a closed-form prior

    def with_num_data(self, num_data: int | None) -> Posterior:
        """This posterior for a data set of ``num_data`` rows (the N of the N/M scaling).

        A shallow copy: the module, likelihood, prior and layouts are shared, so it is cheap.  For a
        data set that grows (an online learner), take one per size and build its :meth:`target`,
        rather than changing ``num_data`` on a posterior whose target is in use.
        """
        _check_num_data(num_data)
        other = copy.copy(self)
        other.num_data = num_data
        return other

    # ------------------------------------------------------------------ evaluation
    def split(self, x: Tensor) -> tuple[dict[str, Tensor], dict[str, Tensor], dict[str, Tensor]]:
        """Split a flat vector into (network params, likelihood extras, prior extras)."""
        parts = self._parts(x)
        return dict(zip(self.net_names, parts[0])), parts[1], parts[2]

    def _parts(self, x: Tensor) -> tuple[list[Tensor], dict[str, Tensor], dict[str, Tensor]]:
        """One unravel of ``x``: network tensors (in order) and the extras, as views."""
        views = list(self.view.unravel(x).values())
        net = views[: self._n_net]
        rest = views[self._n_net :]
        lik = {k: v.squeeze(-1) for k, v in zip(self._lik_keys, rest)}
        pri = {k: v.squeeze(-1) for k, v in zip(self._prior_keys, rest[len(self._lik_keys) :])}
        return net, lik, pri

    def forward(self, net_params: Mapping[str, Tensor], inputs: Tensor) -> Tensor:
        """Network output at ``inputs`` for the given (sampled) parameters."""
        return self._call([net_params[n] for n in self.net_names], inputs)

    def scale(self, batch: Batch) -> float:
        m = _rows(batch)
        return 1.0 if self.num_data is None else self.num_data / m

    def _log_lik(self, net: list[Tensor], lik: dict[str, Tensor], batch: Batch) -> Tensor:
        inputs, targets = batch
        return self.likelihood.scaled_log_prob(self._call(net, inputs), targets, lik, self.scale(batch))

    def _log_prior(self, w: Tensor, lik: dict[str, Tensor], pri: dict[str, Tensor]) -> Tensor:
        lp = self.bound_prior.log_prob(w, pri)
        if pri:
            lp = lp + self.bound_prior.extra_log_prior(pri)
        if lik:
            lp = lp + self.likelihood.extra_log_prior(lik)
        return lp

    def log_likelihood_flat(self, x: Tensor, batch: Batch) -> Tensor:
        """Minibatch log-likelihood scaled by N/M."""
        net, lik, _ = self._parts(x)
        return self._log_lik(net, lik, batch)

    def log_prior_flat(self, x: Tensor) -> Tensor:
        _, lik, pri = self._parts(x)
        return self._log_prior(x[..., : self.d_net], lik, pri)

    def log_prob_flat(self, x: Tensor, batch: Batch) -> Tensor:
        net, lik, pri = self._parts(x)
        return self._log_lik(net, lik, batch) + self._log_prior(x[..., : self.d_net], lik, pri)

    def value_and_grad_flat(self, x: Tensor, batch: Batch) -> tuple[Tensor, Tensor]:
        """Log posterior and gradient; a prior with an analytic gradient stays out of autograd, and
        so does a plain MLP (:mod:`bnnkit.core.mlp`) unless its forward is patched."""
        mlp = self._mlp
        if (
            mlp is not None
            and not mlp.extras  # one chain with learnt extras: autograd (the K-chain path has them)
            and x.ndim == 1
            and mlp.applies_to(batch, chains=False)
            and not self._call.patched()
        ):
            return mlp.value_and_grad_one(x, batch, self.scale(batch))
        analytic = self.bound_prior.value_and_grad
        if analytic is None:
            return Target.autograd_value_and_grad(self.log_prob_flat, x, batch)
        ll, g = Target.autograd_value_and_grad(self.log_likelihood_flat_with_extras, x, batch)
        if self.d_net == x.shape[-1]:
            lp, gp = analytic(x)
            g.add_(gp)
        else:
            lp, gp = analytic(x[: self.d_net])
            g[: self.d_net] += gp
        return ll + lp, g

    def log_likelihood_flat_with_extras(self, x: Tensor, batch: Batch) -> Tensor:
        """Scaled log-likelihood plus the extras' log prior (everything but the weight prior)."""
        net, lik, _ = self._parts(x)
        ll = self._log_lik(net, lik, batch)
        return ll + self.likelihood.extra_log_prior(lik) if lik else ll

    def log_prob(self, params: Mapping[str, Tensor], batch: Batch) -> Tensor:
        """Unnormalised log posterior of ``params`` (a dict over :attr:`view` names) on ``batch``."""
        return self.log_prob_flat(self.view.ravel(params), batch)

    def grad_log_prob(self, params: Mapping[str, Tensor], batch: Batch) -> dict[str, Tensor]:
        """Gradient of :meth:`log_prob` as a dict, via ``torch.func.grad``."""
        return torch.func.grad(self.log_prob)(dict(params), batch)

    # ------------------------------------------------------------------ flat target
    def target(self) -> Target:
        """This posterior as a flat :class:`~bnnkit.core.target.Target` for the samplers."""
        conj: dict[str, Callable[[Tensor, Batch, torch.Generator], Tensor]] = {}
        for k, fn in self.bound_prior.conjugate.items():
            conj[PRIOR + k] = lambda x, batch, gen, fn=fn: fn(x[: self.d_net], gen)
        if hasattr(self.likelihood, "precision_prior") and getattr(self.likelihood, "learn_noise", False):
            conj[LIK + "log_precision"] = self._noise_precision_update

        bound = None
        if not self.initial_extras:

            def bound(batch: Batch) -> Tensor:
                b = self.likelihood.log_prob_upper_bound(batch[1])
                if b is None:
                    raise BnnkitError(
                        f"the {self.likelihood.kind} likelihood is unbounded; pass log_bound to rejection sampling."
                    )
                return self.scale(batch) * b

        return Target(
            view=self.view,
            log_prob=self.log_prob_flat,
            grad_fn=self.value_and_grad_flat,
            prior_sample=self.sample_prior,
            prior_log_prob=self.log_prior_flat,
            log_likelihood=self.log_likelihood_flat,
            log_likelihood_bound=bound,
            conjugate_updates=conj,
            num_data=self.num_data,
            stacked_grad=self._stacked_grad(),
        )

    def _stacked_grad(self) -> Callable[[Tensor, Batch, bool], tuple[Tensor, Tensor] | None] | None:
        """The hand-batched K-chain gradient of an MLP posterior (None for other models)."""
        mlp = self._mlp
        if mlp is None:
            return None

        def stacked(x: Tensor, batch: Batch, chain_batched: bool) -> tuple[Tensor, Tensor] | None:
            return (
                mlp.value_and_grad(x, batch, chain_batched, self.num_data) if mlp.applies_to(batch) else None
            )

        return stacked

    def sample_prior(self, gen: torch.Generator) -> Tensor:
        """A draw of the network weights from the prior (extras at their initial values)."""
        w = self.bound_prior.sample(gen)
        if not self.initial_extras:
            return w
        return torch.cat([w, *self.initial_extras.values()])

    def initial_position(self, init: str = "module", gen: torch.Generator | None = None) -> Tensor:
        if init == "module":
            net = {n: p for n, p in self.module.named_parameters() if n in self.net_names}
            return self.view.ravel({**{n: v.detach() for n, v in net.items()}, **self.initial_extras})
        if init == "prior":
            if gen is None:
                raise BnnkitError("init='prior' needs a torch.Generator.")
            return self.sample_prior(gen)
        raise BnnkitError(
            f"init must be 'module', 'prior', a dict of parameters or a callable; got {init!r}."
        )

    def _noise_precision_update(self, x: Tensor, batch: Batch, gen: torch.Generator) -> Tensor:
        """Exact draw of the Gaussian noise precision tau | w, D ~ Gamma(a + s n/2, b + s SSR/2)."""
        inputs, targets = batch
        net, _, _ = self.split(x)
        with torch.no_grad():
            out = self.forward(net, inputs)
            f = out.squeeze(-1) if out.shape != targets.shape else out
            ssr = ((targets - f) ** 2).sum()
        a, b = self.likelihood.precision_prior  # type: ignore[attr-defined]
        s = self.scale(batch)
        tau = gamma(a + 0.5 * s * targets.numel(), b + 0.5 * s * ssr, gen)
        return tau.log().reshape(1).to(x)

    # ------------------------------------------------------------------ validation
    def check_data(self, batch: Batch) -> None:
        """Validate a data batch against the model; raise :class:`BnnkitError` with a clear message."""
        if not (isinstance(batch, (tuple, list)) and len(batch) == 2):
            raise BnnkitError(_data_type_message(batch))
        inputs, targets = batch
        for name, t in (("inputs", inputs), ("targets", targets)):
            if not isinstance(t, Tensor):
                raise BnnkitError(
                    f"{name} must be a torch.Tensor, got {type(t).__name__}"
                    + (" (convert it with torch.as_tensor)." if hasattr(t, "__array__") else ".")
                )
            if t.ndim == 0 or t.shape[0] == 0:
                raise BnnkitError(f"{name} is empty (shape {tuple(t.shape)}); pass at least one row of data.")
            check_finite_rows(name, t)
        if self.num_data is not None and inputs.shape[0] > self.num_data:
            raise BnnkitError(
                f"the batch has {inputs.shape[0]} rows but num_data is {self.num_data}; num_data must be the "
                "full training-set size."
            )
        with torch.no_grad():
            net, _, _ = self.split(self.initial_position("module"))
            try:
                out = self.forward(net, inputs[: min(len(inputs), 8)])
            except RuntimeError as e:
                raise BnnkitError(
                    f"the model failed on inputs of shape {tuple(inputs.shape)}"
                    f"{_expectation(self.module, inputs)}: {e}. Check the input dimension expected by the first layer."
                ) from e
        full_out_shape = (inputs.shape[0], *out.shape[1:])
        self.likelihood.check(torch.zeros(full_out_shape, dtype=out.dtype), targets)

    def as_data(self, data: object, what: str = "data") -> tuple[Tensor, Tensor]:
        """``data`` as a checked ``(inputs, targets)`` pair of tensors, for methods that use the whole
        data set at once: a pair of tensors or NumPy arrays, or a ``torch.utils.data.DataLoader``
        yielding ``(x, y)`` batches (all its rows, in its order).  Inputs of another floating dtype
        or of integers become the model's dtype, and so do floating targets given as arrays (tensor
        targets keep theirs); then :meth:`check_data`."""
        from ..data.coerce import as_pair, is_loader

        if hasattr(data, "next") and hasattr(data, "state_dict") and not is_loader(data):
            raise BnnkitError(
                f"{what} is a minibatch stream ({type(data).__name__}); this method needs the whole data set: "
                "pass (inputs, targets) tensors or a torch DataLoader."
            )
        given_tensor = is_loader(data) or (isinstance(data, (tuple, list)) and isinstance(data[-1], Tensor))
        inputs, targets = as_pair(data, what)
        inputs = _input_dtype(self.module, inputs, self.net_view.dtype, "inputs")
        if not given_tensor and targets.is_floating_point() and targets.dtype != self.net_view.dtype:
            targets = targets.to(self.net_view.dtype)  # NumPy's float64 for a float32 network
        self.check_data((inputs, targets))
        return inputs, targets

    def check_inputs(self, inputs: object, action: str = "predicting") -> Tensor:
        """``inputs`` checked for a prediction: see :func:`check_inputs`; the network's current
        parameters stand in for the draws in the one-row probe run only when the first layer's
        shape suggests a mismatch."""

        def probe(rows: Tensor) -> Tensor:
            net = {n: p.detach() for n, p in self.module.named_parameters() if n in self.net_names}
            return self.forward(net, rows)

        return check_inputs(self.module, inputs, self.net_view.dtype, probe, action)

    def config(self) -> dict:
        return {
            "module": type(self.module).__name__,
            "likelihood": self.likelihood.config(),
            "prior": self.prior.config(),
            "num_data": self.num_data,
            "parameters": self.view.describe(),
        }


def check_inputs(
    module: nn.Module,
    inputs: object,
    dtype: torch.dtype,
    forward: Callable[[Tensor], Tensor] | None = None,
    action: str = "predicting",
) -> Tensor:
    """``inputs`` for a prediction by ``module``, checked and as a tensor of the model's ``dtype``.

    A NumPy array (or pandas / nested list) becomes a tensor; floating inputs of another precision
    and integer inputs become ``dtype`` (integers stay for a first ``Embedding`` layer); boolean
    and complex inputs are refused, as are empty inputs and rows with NaN / inf (named).  The
    trailing shape is compared with the first layer's (``Linear``: ``[*, in_features]``,
    ``ConvNd``: ``[*, in_channels, ...]``); on a mismatch, ``forward`` (or ``module``) runs on
    two rows to confirm before refusing, so a module whose first registered layer is not the
    first applied is not refused wrongly.
    """
    inputs = to_tensor(inputs, "inputs")
    x = _input_dtype(module, inputs, dtype, "inputs")
    if x.ndim == 0 or x.shape[0] == 0:
        raise BnnkitError(f"inputs are empty (shape {tuple(x.shape)}); pass at least one row.")
    if x.is_floating_point():
        bad = ~torch.isfinite(x)
        if bad.any():
            rows = bad.reshape(bad.shape[0], -1).any(dim=1)
            idx = torch.nonzero(rows).flatten().tolist()
            shown = ", ".join(str(i) for i in idx[:5]) + (", ..." if len(idx) > 5 else "")
            raise BnnkitError(
                f"inputs contain NaN or inf in {len(idx)} of {rows.numel()} rows (rows {shown}); the predictive "
                f"there would be NaN. Remove or impute those rows before {action}."
            )
    spec = _first_layer(module)
    if spec is not None and not _shape_fits(spec, x):
        run = forward if forward is not None else module
        try:
            with torch.no_grad():
                run(x[:2])
        except (RuntimeError, ValueError, IndexError) as err:
            raise BnnkitError(f"{_describe(spec)}; got shape {tuple(x.shape)}.{_row_hint(spec, x)}") from err
    return x


def _input_dtype(module: nn.Module, x: Tensor, dtype: torch.dtype, name: str) -> Tensor:
    """Floating ``x`` in the model's dtype; integers too unless the first layer takes indices."""
    if x.dtype == torch.bool:
        raise BnnkitError(
            f"{name} are booleans; the model takes real numbers. Convert them with .to({dtype}) if 0/1 "
            "features are meant."
        )
    if x.is_complex():
        raise BnnkitError(f"{name} are complex ({x.dtype}); the model takes real numbers ({dtype}).")
    if x.is_floating_point():
        return x if x.dtype == dtype else x.to(dtype)
    spec = _first_layer(module)
    if spec is not None and spec[0] == "index":
        return x
    return x.to(dtype)


def _first_layer(module: nn.Module) -> tuple[str, int, int] | None:
    """What the first layer with parameters takes: ``("features", n, 0)`` for a Linear,
    ``("channels", c, k)`` for a k-d convolution, ``("index", n, 0)`` for an embedding; ``None``
    when it is another kind (nothing is then inferred)."""
    for m in module.modules():
        if isinstance(m, nn.Linear) and not isinstance(m.weight, nn.parameter.UninitializedParameter):
            return ("features", m.in_features, 0)
        if isinstance(m, nn.modules.conv._ConvNd) and not isinstance(
            m.weight, nn.parameter.UninitializedParameter
        ):
            return ("channels", m.in_channels, len(m.kernel_size))
        if isinstance(m, (nn.Embedding, nn.EmbeddingBag)):
            return ("index", m.num_embeddings, 0)
        if any(True for _ in m.parameters(recurse=False)):
            # layers shaped like Linear / Conv (bnnkit.vi.BayesianLinear, say) name their input size
            n_in, n_ch = getattr(m, "in_features", None), getattr(m, "in_channels", None)
            ks = getattr(m, "kernel_size", None)
            if isinstance(n_in, int) and n_in > 0:
                return ("features", n_in, 0)
            if isinstance(n_ch, int) and n_ch > 0 and isinstance(ks, tuple):
                return ("channels", n_ch, len(ks))
            return None
    return None


def _shape_fits(spec: tuple[str, int, int], x: Tensor) -> bool:
    kind, n, k = spec
    if kind == "features":
        return x.ndim >= 2 and x.shape[-1] == n
    if kind == "channels":
        return x.ndim >= k + 1 and x.shape[-(k + 1)] == n
    return True


def _describe(spec: tuple[str, int, int]) -> str:
    kind, n, k = spec
    if kind == "features":
        return f"the model expects inputs with {n} features (shape [*, {n}])"
    dims = ", ".join(("H", "W") if k == 2 else ("L",) if k == 1 else ("D", "H", "W")[:k])
    return f"the model expects inputs with {n} channels (shape [*, {n}, {dims}])"


def _row_hint(spec: tuple[str, int, int], x: Tensor) -> str:
    kind, n, _ = spec
    if kind == "features" and x.ndim == 1:
        if n == 1:
            return " Make the inputs a column: x.reshape(-1, 1)."
        if x.shape[0] == n:
            return f" A single row must be shaped [1, {n}]: x.reshape(1, -1)."
    return ""


def _expectation(module: nn.Module, inputs: Tensor) -> str:
    spec = _first_layer(module)
    return f" ({_describe(spec)})" if spec is not None and spec[0] != "index" else ""


def _data_type_message(data: object) -> str:
    if isinstance(data, torch.utils.data.DataLoader):
        return (
            "data must be a tuple (inputs, targets) of tensors here; got a DataLoader. bnnkit.sample takes a "
            "DataLoader as a minibatch stream (bnnkit.data.LoaderStream), and Posterior.as_data, "
            "bnnkit.Laplace.fit, bnnkit.core.warm_start.map_init and the VI fits read all of its rows."
        )
    return (
        "data must be a tuple (inputs, targets) of tensors or NumPy arrays, or a torch DataLoader yielding (x, y) "
        f"batches (bnnkit.sample also takes a minibatch stream: bnnkit.data.Minibatches / LoaderStream); got "
        f"{type(data).__name__}."
    )


def _check_num_data(num_data: object) -> None:
    if num_data is not None and (not isinstance(num_data, int) or num_data < 1):
        raise BnnkitError(f"num_data must be a positive integer (the training-set size N), got {num_data!r}.")


def _warn_stochastic_layers(module: nn.Module) -> None:
    """Dropout / BatchNorm in training mode make the log density random or batch-dependent."""
    kinds = (nn.modules.dropout._DropoutNd, nn.modules.batchnorm._BatchNorm)
    bad = sorted({type(m).__name__ for m in module.modules() if isinstance(m, kinds) and m.training})
    if bad:
        warnings.warn(
            f"the module is in training mode and contains {', '.join(bad)}: its output is random (dropout) or "
            "depends on the batch (batch norm), so the posterior is not a fixed function of the weights. Call "
            "module.eval() before building the Posterior (batch-norm statistics are then used as fixed buffers).",
            stacklevel=3,
        )


def _selector(bayesian, named: Mapping[str, Tensor]) -> Callable[[str], bool]:
    if bayesian is None:
        return lambda n: True
    if callable(bayesian):
        return bayesian
    return name_prefixes(
        bayesian,
        named,
        lambda k: f"bayesian entry {k!r} matches no parameter; parameters are: {', '.join(named)}.",
    )


def name_prefixes(
    prefixes: str | Iterable[str], names: Iterable[str], unmatched: Callable[[str], str]
) -> Callable[[str], bool]:
    """Whether a parameter name is, or starts with, one of ``prefixes`` (one string or several);
    a prefix that none of ``names`` starts with is refused with the message ``unmatched(prefix)``."""
    keys = [prefixes] if isinstance(prefixes, str) else list(prefixes)
    names = list(names)
    for k in keys:
        if not any(n == k or n.startswith(k) for n in names):
            raise BnnkitError(unmatched(k))
    return lambda n: any(n == k or n.startswith(k) for k in keys)


def _rows(batch: Batch) -> int:
    return int(batch[0].shape[0])
