"""Bayes by Backprop (Blundell et al. 2015): mean-field Gaussian VI by stochastic gradients.

Maximises the ELBO over ``(mu, rho)``, ``sigma = softplus(rho)``::

    L = E_q[log p(D | w)] - T * KL(q(w) || p(w))

one minibatch at a time.  Minibatch ``i`` of the ``B`` in an epoch contributes
``E_q[log p(D_i | w)] - T * pi_i * KL`` with ``sum_i pi_i = 1``, so one epoch sums to the full
ELBO:

- ``kl_weighting="uniform"``: ``pi_i = 1/B`` (the usual choice);
- ``kl_weighting="blundell"``: ``pi_i = 2^(B-i) / (2^B - 1)``, most of the KL early in the epoch.

The expectation uses ``num_mc`` draws per step with the chosen estimator (``reparam``, ``local``
or ``flipout``, see :mod:`bnnkit.vi.estimators`); the KL is in closed form for a Gaussian prior
(``kl="closed"``) or a Monte-Carlo estimate (``kl="mc"``, any prior).  ``T`` is the temperature
(``T < 1``: a "cold" posterior).  Optimiser: Adam, optionally with cosine learning-rate decay.

Running.  :meth:`BayesByBackprop.build` is a kernel on the samplers' contract (fit, then draws
from ``q``; :mod:`bnnkit.vi.kernel`), so ``bnnkit.sample(BayesByBackprop(...), posterior, data,
num_samples=S)`` fits ``q`` and returns ``S`` draws from it with the driver's progress bar,
``output=`` streaming, checkpoints and bit-identical resume; :meth:`BayesByBackprop.fit` is that
run, returning the fitted ``q`` as a :class:`VIResult`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least, check_positive
from ..core.posterior import Posterior
from ..core.random import make_generator
from ..core.samples import Samples
from ..core.types import Kernel
from ..priors.base import scale_vector
from ..priors.gaussian import GaussianPrior
from .estimators import ESTIMATORS, ForwardPlan
from .kernel import VIState, draws_from_state, elbo_kernel
from .kl import mean_field_kl, monte_carlo_kl
from .local_mlp import LocalELBO, LocalForward
from .meanfield import MeanFieldGaussian
from .optim import FlatAdam, batches_per_epoch, check_fit_options
from .run import HISTORY_BBB, _check_weights_only, _require_posterior, run_fit

LOG_2PI = math.log(2 * math.pi)


@dataclass
class VIResult:
    """A fitted variational posterior; draws from it plug into the same predictive as samples."""

    posterior: Posterior
    q: MeanFieldGaussian
    history: dict[str, list[float]] = field(default_factory=dict)
    config: dict = field(default_factory=dict)

    def sample(self, num_samples: int = 100, seed: int = 0) -> Samples:
        """``num_samples`` draws from q as a one-chain :class:`~bnnkit.Samples`."""
        check_int_at_least("num_samples", num_samples, 1)
        draws = self.q.sample(num_samples, make_generator(seed, 0))
        stats = {"log_density": torch.full((1, num_samples), math.nan)}
        return Samples(draws.unsqueeze(0), stats, self.posterior.view, {"vi": self.config})

    @classmethod
    def from_state(cls, posterior: Posterior, state: VIState, history: dict, config: dict) -> VIResult:
        """The result of a fit whose final kernel state is ``state`` (``q`` a fresh copy of its
        parameters, trainable)."""
        q = MeanFieldGaussian.from_params(
            state.params[0].detach().clone().requires_grad_(True),
            state.params[1].detach().clone().requires_grad_(True),
        )
        return cls(posterior, q, history, config)

    @property
    def mean(self) -> Tensor:
        return self.q.mu.detach()

    @property
    def stddev(self) -> Tensor:
        return self.q.sigma.detach()


@dataclass(frozen=True)
class BayesByBackprop:
    """The hyperparameters of Bayes by Backprop (the module doc gives the objective and the options).

    Speed.  With ``estimator="local"`` on a plain MLP (a ``Sequential`` of sampled ``Linear`` layers
    and elementwise activations) the forward, the closed-form KL and their gradients are one autograd
    node with a hand-written backward (:mod:`bnnkit.vi.local_mlp`); ``num_mc`` draws are one forward
    over the minibatch tiled ``num_mc`` times.  ``compile=True`` (same models) compiles the loss and
    its gradient with ``torch.compile`` instead: the fastest step once compiled, at the price of a
    compilation of some seconds on the first step (and once more for a differently sized last
    minibatch).  Both draw the same noise from the generator, so they agree to rounding; see
    ``benchmarks/bench_vi.py`` for the cost of a step against a plain SGD step.
    """

    lr: float = 1e-2
    num_epochs: int = 100
    batch_size: int | None = None
    num_mc: int = 1
    estimator: str = "reparam"
    kl: str = "auto"
    kl_weighting: str = "uniform"
    temperature: float = 1.0
    init_sigma: float = 1e-3
    lr_decay: str | None = None
    patience: int | None = None
    compile: bool = False
    name: str = "bbb"

    def __post_init__(self) -> None:
        check_fit_options(self.lr, self.num_epochs, self.batch_size, self.lr_decay)
        check_int_at_least("num_mc (Monte-Carlo samples per step)", self.num_mc, 1)
        check_positive("temperature", self.temperature)
        if self.estimator not in ESTIMATORS:
            raise BnnkitError(f"estimator must be one of {ESTIMATORS}, got {self.estimator!r}.")
        if self.kl not in ("auto", "closed", "mc"):
            raise BnnkitError(f"kl must be 'auto', 'closed' or 'mc', got {self.kl!r}.")
        if self.kl_weighting not in ("uniform", "blundell"):
            raise BnnkitError(f"kl_weighting must be 'uniform' or 'blundell', got {self.kl_weighting!r}.")
        if self.compile and self.estimator != "local":
            raise BnnkitError(f"compile=True needs estimator='local', got estimator={self.estimator!r}.")

    def config(self) -> dict:
        return asdict(self)

    def plan(self, posterior: Posterior) -> ForwardPlan:
        """Per-posterior precomputation (layers, slices, prior scales), made once per fit."""
        plan = ForwardPlan(posterior, self.estimator)
        prior = posterior.prior
        plan.closed_kl = self.kl == "closed" or (self.kl == "auto" and isinstance(prior, GaussianPrior))
        if plan.closed_kl:
            if not isinstance(prior, GaussianPrior) or prior.learn_precision:
                raise BnnkitError(
                    "kl='closed' needs a GaussianPrior with a fixed scale; use kl='mc' for other priors."
                )
            plan.prior_scale = scale_vector(posterior.view, prior.scale, prior.scales)
            # KL = sum[(sigma^2 + mu^2) / (2 s^2) - log sigma] + sum(log s) - D/2
            plan.inv_var = 1.0 / (plan.prior_scale * plan.prior_scale)
            plan.half_inv_var = 0.5 * plan.inv_var
            plan.kl_const = plan.prior_scale.log().sum() - 0.5 * plan.prior_scale.numel()
        view = posterior.net_view
        plan.kl_weights = {}  # 0-d tensors, one per distinct KL weight
        plan.minus_one = torch.tensor(-1.0, dtype=view.dtype, device=view.device)
        plan.compiled = None
        if self.compile:
            if plan.mlp is None:
                raise BnnkitError(
                    "compile=True needs a plain MLP: a Sequential of Linear layers, all sampled, and "
                    "elementwise activations (Tanh, ReLU, GELU, ...); use compile=False for this model."
                )
            plan.compiled = self._compile(plan)
        return plan

    def optimizer(self, q: MeanFieldGaussian) -> FlatAdam:
        """The optimiser :meth:`fit` uses: Adam on ``(mu, rho)``, the updates of
        ``torch.optim.Adam(fused=True)`` with less overhead per step."""
        return FlatAdam(q.parameters(), lr=self.lr)

    def kl_term(self, plan: ForwardPlan, q: MeanFieldGaussian, sigma: Tensor, gen: torch.Generator) -> Tensor:
        if plan.closed_kl:
            return mean_field_kl(q.mu, q.rho, plan.prior_scale)
        eps = torch.randn((self.num_mc, q.mu.numel()), generator=gen, dtype=q.mu.dtype)
        return _mc_kl(plan, q.mu, sigma, eps)

    def terms(
        self, plan: ForwardPlan, q: MeanFieldGaussian, batch: tuple[Tensor, Tensor], gen: torch.Generator
    ) -> tuple[Tensor, Tensor]:
        """Minibatch expected log-likelihood (``num_mc`` draws) and the KL term, both differentiable."""
        xb, yb = batch
        lik = plan.posterior.likelihood
        if plan.fast(xb):
            x, y = _tile(xb, yb, self.num_mc)
            eps = plan.mlp.noise(x.shape[0], gen, q.mu)
            if plan.closed_kl:
                out, kl = LocalELBO.apply(
                    plan.mlp, q.mu, q.rho, x, eps, plan.inv_var, plan.half_inv_var, plan.kl_const
                )
            else:
                sigma = q.sigma
                out = LocalForward.apply(plan.mlp, q.mu, sigma, x, eps)
                kl = self.kl_term(plan, q, sigma, gen)
            ll = lik.log_prob(out, y, {})
            return (ll if self.num_mc == 1 else ll / self.num_mc), kl
        sigma = q.sigma
        if self.num_mc > 1 and not plan.layers:  # plain reparameterisation: S draws in one forward
            out = plan.batched(q.mu, sigma, xb, gen, self.num_mc)
            ll = torch.func.vmap(lambda o: lik.log_prob(o, yb, {}))(out).sum()
            return ll / self.num_mc, self.kl_term(plan, q, sigma, gen)
        ll = lik.log_prob(plan(q.mu, sigma, xb, gen), yb, {})
        for _ in range(self.num_mc - 1):
            ll = ll + lik.log_prob(plan(q.mu, sigma, xb, gen), yb, {})
        return ll / self.num_mc, self.kl_term(plan, q, sigma, gen)

    def loss_and_grad(
        self,
        plan: ForwardPlan,
        q: MeanFieldGaussian,
        batch: tuple[Tensor, Tensor],
        gen: torch.Generator,
        kl_weight: float,
    ) -> tuple[Tensor, Tensor]:
        """One stochastic-gradient evaluation of the loss ``kl_weight * KL - E_q[log p(D_i | w)]``.

        Writes the gradient into ``q.mu.grad`` and ``q.rho.grad`` (replacing what was there) and
        returns the detached ``(expected log-likelihood, KL)``; an optimiser step on
        ``q.parameters()`` follows.  Compiled when the plan was made with ``compile=True``.
        """
        ll, kl, g_mu, g_rho = self.grads(plan, q.mu, q.rho, batch, gen, kl_weight)
        q.mu.grad, q.rho.grad = g_mu, g_rho
        return ll, kl

    def grads(
        self,
        plan: ForwardPlan,
        mu: Tensor,
        rho: Tensor,
        batch: tuple[Tensor, Tensor],
        gen: torch.Generator,
        kl_weight: float,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``(ll, KL, d loss / d mu, d loss / d rho)`` of the minibatch loss
        ``kl_weight * KL - ll`` (``ll`` the ``num_mc``-draw estimate of ``E_q[log p(D_i | w)]``),
        the gradient by the reparameterisation trick (``w = mu + softplus(rho) * eps``)::

            d loss / d mu  = E_eps[-d log p(D_i | w) / d w] + kl_weight * d KL / d mu
            d loss / d rho = E_eps[-d log p(D_i | w) / d w * eps] * sigmoid(rho) + kl_weight * d KL / d rho
        """
        w = plan.kl_weights.get(kl_weight)
        if w is None:
            if len(plan.kl_weights) >= 256:  # a weight annealed step by step: don't grow without bound
                plan.kl_weights.clear()
            w = plan.kl_weights[kl_weight] = torch.tensor(kl_weight, dtype=mu.dtype, device=mu.device)
        if plan.compiled is None:
            with torch.enable_grad():
                mu_, rho_ = _leaf(mu), _leaf(rho)
                ll, kl = self.terms(plan, MeanFieldGaussian.from_params(mu_, rho_), batch, gen)
                # d loss / d(ll, kl) = (-1, kl_weight), without building the loss in the graph
                g_mu, g_rho = torch.autograd.grad((ll, kl), (mu_, rho_), (plan.minus_one, w))
            return ll.detach(), kl.detach(), g_mu, g_rho
        xb, yb = batch
        if not plan.fast(xb):
            raise BnnkitError(f"compile=True needs inputs of shape [rows, features]; got {tuple(xb.shape)}.")
        x, y = _tile(xb, yb, self.num_mc)
        eps = plan.mlp.noise(x.shape[0], gen, mu)
        eps_kl = None
        if not plan.closed_kl:
            eps_kl = torch.randn((self.num_mc, mu.numel()), generator=gen, dtype=mu.dtype)
        (g_mu, g_rho), (_, (ll, kl)) = plan.compiled(mu.detach(), rho.detach(), x, y, eps, eps_kl, w)
        return ll, kl, g_mu, g_rho

    def _compile(self, plan: ForwardPlan):
        """``torch.compile`` of the loss and its gradient in ``(mu, rho)``, noise passed in."""
        mlp, lik, num_mc = plan.mlp, plan.posterior.likelihood, self.num_mc

        def loss(mu, rho, x, y, eps, eps_kl, kl_weight):
            sigma = F.softplus(rho)
            var = sigma * sigma
            ll = lik.log_prob(mlp.functional(mu, var, x, eps), y, {})
            if num_mc > 1:
                ll = ll / num_mc
            if plan.closed_kl:
                kl = (
                    torch.dot(torch.addcmul(var, mu, mu), plan.half_inv_var)
                    - sigma.log().sum()
                    + plan.kl_const
                )
            else:
                kl = _mc_kl(plan, mu, sigma, eps_kl)
            return kl_weight * kl - ll, (ll, kl)

        fn = torch.func.grad_and_value(loss, argnums=(0, 1), has_aux=True)
        return torch.compile(fn, dynamic=False)

    # What the driver reads (see bnnkit.core.types.Algorithm): BBB builds from the posterior
    # itself, and its mean starts at the module's own initialisation (see bnnkit.vi.meanfield).
    needs_model: ClassVar[bool] = True
    default_init: ClassVar[str] = "module"
    vectorizable: ClassVar[bool] = False
    not_vectorizable_because: ClassVar[str] = (
        "a VI fit is one chain of optimisation (run fits one after another)"
    )

    def build(self, target: Any, model: Posterior | None = None, *, validation: Any = None) -> Kernel:
        """The fit-then-draw kernel (:mod:`bnnkit.vi.kernel`) of this ELBO on ``model``.

        Step ``t`` of a fit takes the gradient of the minibatch loss
        ``-E_q[log p(D_i | w)] + T * pi_i * KL(q || p)`` (:meth:`grads`), ``i = t mod B`` the
        minibatch's place in its epoch of ``B = ceil(N / batch_size)`` minibatches, and one Adam
        step; after ``num_epochs * B`` steps every step is a draw from ``q``.  ``N`` is the
        posterior's ``num_data`` (needed with a ``batch_size``); the data is a
        :class:`bnnkit.data.Minibatches` stream of ``batch_size`` rows, or the full batch.
        ``validation=(inputs, targets)`` adds the per-epoch validation NLL (and ``patience``'s
        early stopping).
        """
        posterior = _require_posterior(model, type(self).__name__)
        _check_weights_only(posterior, "Bayes by Backprop's ELBO")
        num_data = posterior.num_data
        if self.batch_size is not None and num_data is None:
            raise BnnkitError(
                "minibatched Bayes by Backprop needs the training-set size: build the Posterior with "
                "num_data=N (the epoch of N / batch_size minibatches sums to the full ELBO)."
            )
        num_batches = batches_per_epoch(self.batch_size, num_data)
        kl_weights = self._kl_weights(num_batches)  # pi_i: one epoch's KL sums to one KL
        weights = [self.temperature * w for w in kl_weights]  # T * pi_i, the KL's weight in the loss
        plan = self.plan(posterior)

        uniform = self.kl_weighting == "uniform"

        def objective(mu: Tensor, rho: Tensor, batch: Any, gen: torch.Generator, t: int):
            i = t % num_batches
            ll, kl, g_mu, g_rho = self.grads(plan, mu, rho, batch, gen, weights[i])
            # record (ll, KL or pi_i KL, rows): few small ops, as they run on every step
            kl_pi = kl * kl_weights[i]
            rows = torch.full_like(ll, float(batch[0].shape[0]))
            record = torch.stack([ll, kl if uniform else kl_pi, rows])  # uniform: pi applied per epoch
            return g_mu, g_rho, record, ll - kl_pi

        def summarise(sums: Tensor) -> Tensor:  # elbo, nll per row, kl of the epoch
            ll, rows = sums[0], sums[2]
            kl = sums[1] / num_batches if uniform else sums[1]  # sum_i pi_i KL_i
            return torch.stack([ll - kl, -ll / rows, kl])

        val = None
        if validation is not None:
            validation = posterior.as_data(validation, "validation")

            def val(mu: Tensor, rho: Tensor, gen: torch.Generator) -> Tensor:
                return torch.tensor(
                    self._val_nll(posterior, MeanFieldGaussian.from_params(mu, rho), validation, gen),
                    dtype=mu.dtype,
                    device=mu.device,
                )

        patience = self.patience if validation is not None else None
        return elbo_kernel(
            self, objective, summarise, num_batches, num_data, validation=val, patience=patience
        )

    @staticmethod
    def draws(state: VIState, num: int, generator: torch.Generator) -> Tensor:
        """``num`` draws ``[num, D]`` from the ``q`` of a kernel state (e.g. Thompson sampling
        from an online fit): ``mu + softplus(rho) * eps``, ``eps`` from ``generator``."""
        return draws_from_state(state, num, generator)

    def fit(
        self,
        posterior: Posterior,
        data: tuple[Tensor, Tensor],
        *,
        seed: int = 0,
        validation: tuple[Tensor, Tensor] | None = None,
        progress: bool = True,
        output: str | None = None,
    ) -> VIResult:
        """Fit q to ``posterior`` on ``data = (inputs, targets)``; returns a :class:`VIResult`.

        Runs the kernel of :meth:`build` through :func:`bnnkit.sample` (one chain, seed ``seed``,
        ``N`` = the rows of ``data``); ``output=`` streams and checkpoints the fit there, and an
        interrupted fit resumes where it stopped.
        """
        data = posterior.as_data(data)
        if validation is not None:
            validation = posterior.as_data(validation, "validation")
        what = "Bayes by Backprop's ELBO"
        state, history = run_fit(self, posterior, data, seed, progress, output, validation, HISTORY_BBB, what)
        history.setdefault("val_nll", [])
        return VIResult.from_state(posterior, state, history, self.config())

    def _kl_weights(self, num_batches: int) -> list[float]:
        if self.kl_weighting == "uniform":
            return [1.0 / num_batches] * num_batches
        if num_batches > 60:  # 2^B overflows double precision; the weights are ~2^-i then
            return [2.0 ** -(i + 1) for i in range(num_batches)]
        denom = 2.0**num_batches - 1
        return [2.0 ** (num_batches - i) / denom for i in range(1, num_batches + 1)]

    def _val_nll(
        self,
        posterior: Posterior,
        q: MeanFieldGaussian,
        val: tuple[Tensor, Tensor],
        gen: torch.Generator,
        num: int = 20,
    ) -> float:
        with torch.no_grad():
            xs, ys = val
            lls = torch.stack(
                [
                    posterior.likelihood.log_prob(
                        posterior.forward(posterior.split(w)[0], xs[i : i + 1]), ys[i : i + 1], {}
                    )
                    for w in q.sample(num, gen)
                    for i in range(len(xs))
                ]
            ).reshape(num, len(xs))
            return float(-(torch.logsumexp(lls, 0) - math.log(num)).mean())


def _tile(x: Tensor, y: Tensor, num_mc: int) -> tuple[Tensor, Tensor]:
    """``num_mc`` copies of the minibatch stacked: with local reparameterisation every row gets its
    own draw, so one forward over them is ``num_mc`` independent forwards of the minibatch."""
    if num_mc == 1:
        return x, y
    return x.repeat(num_mc, *([1] * (x.ndim - 1))), y.repeat(num_mc, *([1] * (y.ndim - 1)))


def _mc_kl(plan: ForwardPlan, mu: Tensor, sigma: Tensor, eps: Tensor) -> Tensor:
    """Monte-Carlo KL from the draws ``w = mu + sigma * eps`` (rows of ``eps``), differentiable."""
    w = mu + sigma * eps
    z = (w - mu) / sigma
    log_q = (-0.5 * z * z - torch.log(sigma) - 0.5 * LOG_2PI).sum(-1)
    log_p = torch.stack([plan.posterior.bound_prior.log_prob(wi, {}) for wi in w])
    return monte_carlo_kl(log_q, log_p)


def _leaf(t: Tensor) -> Tensor:
    """``t`` as a leaf of a fresh graph (as it is when it already is one, e.g. ``q.mu``)."""
    return t if t.is_leaf and t.requires_grad else t.detach().requires_grad_(True)
