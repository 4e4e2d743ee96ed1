"""A posterior whose prior is a Gaussian process on the network's outputs (functional prior).

With measurement points ``X_M`` (fresh each step, see :mod:`bnnkit.functional.measurement`) and
``f_M(w) = f(X_M; w)``, the target of functional SG-MCMC is (``docs/fsgmcmc_design.md``, E1)::

    log pi(w) = (N/n) sum_{i in B} log p(y_i | f(x_i; w)) + log N(f_M(w); m(X_M), K) [+ log p_wd(w)]

and its gradient estimate (E4, E5), with ``alpha = K^-1 (f_M - m)`` from one Cholesky solve::

    g(w) = (N/n) sum_{i in B} grad log p(y_i | f(x_i; w)) - J_M(w)^T alpha

``J_M^T alpha`` is one vector-Jacobian product: the backward pass of the surrogate
``-(alpha.detach() * f_M).sum()`` (K does not depend on ``w``), taken together with the
likelihood's in a single forward/backward over the minibatch and ``X_M`` stacked.  The prior term
is scaled by neither N nor the number of measurement points.  There is no weight-space prior
unless ``weight_scale`` adds ``-|w|^2 / (2 weight_scale^2)`` to make the target proper.

``prior_form=Vecchia(k, q)`` (``docs/fsgmcmc_design.md`` section 12) replaces the GP term by the
Vecchia density of the GP marginal at a fixed pool (the reference measurement set), estimated each
step from ``q`` of its ``P`` conditional factors scaled by ``P/q``::

    log p_V(f_P) ~= -(P/q) sum_{i in S} r_i^2 / (2 d_i) + const,   r_i = f_i - m - b_i^T (f_N(i) - m)

so a step runs the network on ``q (k + 1)`` pool rows and factorises nothing.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor, nn

from ..core.errors import BnnkitError, check_positive
from ..core.flat import FlatView
from ..core.posterior import Posterior
from ..core.target import Target
from ..core.types import Batch
from ..likelihoods.base import Likelihood
from ..priors.base import BoundPrior, Prior
from .vecchia import Vecchia, VecchiaFactors

LOG_2PI = math.log(2 * math.pi)


class WeightTerm(Prior):
    """The weight-space part of a functional posterior: nothing, or a weak Gaussian decay.

    ``sample`` is used only to start chains: each tensor of ``ndim >= 2`` gets
    ``N(0, 1 / fan_in)`` entries (fan_in = product of all but the first dimension), a 1-D tensor
    the scale of the tensor before it (biases after their weights), like common initialisations.
    """

    kind = "functional"

    def __init__(self, weight_scale: float | None = None):
        if weight_scale is not None:
            check_positive("weight_scale", weight_scale, "Use None for a purely functional prior.")
        self.weight_scale = weight_scale

    def bind(self, view: FlatView) -> BoundPrior:
        scales = torch.empty(view.size, dtype=view.dtype, device=view.device)
        last = 1.0
        for name, shape in zip(view.names, view.shapes):
            if len(shape) >= 2:
                last = 1.0 / math.sqrt(max(math.prod(shape[1:]), 1))
            scales[view.slice(name)] = last
        d = view.size

        def sample(gen: torch.Generator) -> Tensor:
            return torch.randn(d, generator=gen, dtype=view.dtype, device=view.device) * scales

        if self.weight_scale is None:

            def value_and_grad(w: Tensor) -> tuple[Tensor, Tensor]:
                return w.new_zeros(()), torch.zeros_like(w)

            return BoundPrior(lambda w, extra: w.new_zeros(()), sample, value_and_grad=value_and_grad)
        inv_var = 1.0 / self.weight_scale**2

        def log_prob(w: Tensor, extra: dict[str, Tensor]) -> Tensor:
            return torch.dot(w, w) * (-0.5 * inv_var)

        def value_and_grad_wd(w: Tensor) -> tuple[Tensor, Tensor]:
            return torch.dot(w, w) * (-0.5 * inv_var), w * (-inv_var)

        return BoundPrior(log_prob, sample, value_and_grad=value_and_grad_wd)

    def config(self) -> dict:
        return {"kind": self.kind, "weight_scale": self.weight_scale}


class FunctionalPosterior(Posterior):
    """Likelihood on the data and a GP prior on the network's outputs at measurement points.

    Args:
        module: any ``nn.Module`` mapping inputs ``[n, D]`` to outputs ``[n]``, ``[n, 1]`` or
            ``[n, C]`` (then one GP per output, sharing the kernel).
        likelihood: e.g. :class:`~bnnkit.Gaussian` or :class:`~bnnkit.Categorical`.
        gp: a :class:`~bnnkit.functional.GPPrior` (fit it first: :meth:`GPPrior.fit`).
        measurement: a :class:`~bnnkit.functional.MeasurementPoints` (fresh points each step)
            or a tensor ``[M, D]`` of fixed points.
        train_inputs: the training inputs (the measurement box and data draws come from them).
        num_data: N for the ``N/n`` minibatch scaling (defaults to ``len(train_inputs)``).
        weight_scale: optional ``sigma_w`` of a weak Gaussian weight term (None: none).
        bayesian: which parameters are sampled, as for :class:`~bnnkit.Posterior`.
        reference_seed: seed of the fixed measurement set used where a deterministic log density
            is needed (:meth:`log_prob`, HMC); SG-MCMC steps draw fresh points instead.
        prior_form: ``"exact"`` (default): ``log N(f_M; m, K)`` at the step's measurement points
            (fresh ones each step, or the fixed set), the paper's form.  ``"vecchia"`` or a
            :class:`~bnnkit.functional.Vecchia`: the pool is the reference measurement set, fixed,
            and the prior is the Vecchia approximation of its GP marginal, estimated each step
            from a few of its conditional factors (:mod:`bnnkit.functional.vecchia`): the step
            costs ``q (k + 1)`` network rows and no factorisation, whatever ``N`` and the pool size.
    """

    def __init__(
        self,
        module: nn.Module,
        likelihood: Likelihood,
        gp: Any,
        measurement: Any,
        train_inputs: Tensor,
        num_data: int | None = None,
        weight_scale: float | None = None,
        bayesian: Iterable[str] | Callable[[str], bool] | None = None,
        reference_seed: int = 0,
        prior_form: str | Vecchia = "exact",
    ):
        if not isinstance(train_inputs, Tensor) or train_inputs.ndim == 0 or train_inputs.shape[0] == 0:
            raise BnnkitError("train_inputs must be a non-empty tensor of training inputs [N, D].")
        super().__init__(
            module, likelihood, WeightTerm(weight_scale), num_data or train_inputs.shape[0], bayesian
        )
        from .measurement import FixedMeasurementPoints, MeasurementPoints

        # The GP and the measurement sampler see inputs as flat rows [M, D]; the network gets them
        # back in its own shape (e.g. images [M, 1, 28, 28]).
        self.input_shape = tuple(train_inputs.shape[1:])
        flat_train = train_inputs.reshape(train_inputs.shape[0], -1)
        if isinstance(measurement, Tensor):
            measurement = MeasurementPoints.fixed(measurement.reshape(measurement.shape[0], -1))
        self.gp = gp
        self.measurement = measurement.bind(flat_train) if hasattr(measurement, "bind") else measurement
        self.train_inputs = train_inputs
        ref_gen = torch.Generator().manual_seed(reference_seed)
        self.reference_points = self.measurement.sample(flat_train, ref_gen)
        self._chol_cache: tuple[Tensor, Tensor, Tensor] | None = None
        if prior_form == "vecchia":
            prior_form = Vecchia()
        if not (prior_form == "exact" or isinstance(prior_form, Vecchia)):
            raise BnnkitError(f"prior_form must be 'exact', 'vecchia' or a Vecchia(...), got {prior_form!r}.")
        self.prior_form = prior_form
        # Built once: the GP hyperparameters are frozen during sampling (fit the GP before this).
        self.vecchia = None
        if isinstance(prior_form, Vecchia):
            pools = [self.reference_points]
            if not isinstance(self.measurement, FixedMeasurementPoints):  # a fixed set is one pool
                for r in range(1, prior_form.pools):
                    gen_r = torch.Generator().manual_seed(reference_seed + r)
                    pools.append(self.measurement.sample(flat_train, gen_r))
            self.vecchia = VecchiaFactors(gp, pools, prior_form)
        self._vecchia_net_rows: Tensor | None = None

    # ------------------------------------------------------------------ functional prior
    def _factor(self, xm: Tensor) -> tuple[Tensor, Tensor]:
        """Cholesky factor (float64) and prior mean at ``xm``; cached for a fixed point set."""
        c = self._chol_cache
        if c is not None and c[0] is xm:
            return c[1], c[2]
        L, _ = self.gp.cholesky(xm)
        mean = self.gp.mean(xm).to(torch.float64)
        if mean.ndim == 1:
            mean = mean[:, None]  # [M, 1]: broadcasts over the output columns
        self._chol_cache = (xm, L, mean)
        return L, mean

    def _prior_plan(self, xm_or_sel: Tensor, dtype: torch.dtype) -> tuple[Tensor, Callable]:
        """The network rows of the prior term and ``f2 -> (log prior, alpha)`` on their outputs.

        Exact form: ``xm_or_sel`` is ``X_M`` and ``alpha = K^-1 (f_M - m)``.  Vecchia form: it
        is the step's factor indices ``S`` (:mod:`bnnkit.functional.vecchia`).  Either way the
        prior's weight gradient is the backward pass of ``-(alpha * f2).sum()``.
        """
        vf = self.vecchia
        if vf is None:
            xm = xm_or_sel
            L, mean = self._factor(xm)
            rows = xm.to(dtype).reshape(xm.shape[0], *self.input_shape)
            return rows, lambda f2: _gp_log_prob(f2, L, mean)
        sel = xm_or_sel
        net_rows = self._vecchia_net_rows
        if net_rows is None or net_rows.dtype != dtype:
            # The pool in the network's dtype and input shape, converted once, not per step.
            net_rows = vf.points.to(dtype).reshape(vf.num_points, *self.input_shape)
            self._vecchia_net_rows = net_rows
        return net_rows[vf.rows(sel)], lambda f2: vf.log_prob_and_alpha(f2, sel)

    def _draw_prior(self, rows: Tensor, gen: torch.Generator) -> Tensor:
        """This step's measurement points (exact form) or Vecchia factor indices, from ``gen``."""
        if self.vecchia is not None:
            return self.vecchia.draw(gen)
        return self.measurement.sample(rows.reshape(rows.shape[0], -1), gen)

    def _reference(self) -> Tensor:
        """The deterministic target's prior argument: reference points, or every Vecchia factor."""
        return self.reference_points if self.vecchia is None else self.vecchia.draw(None)

    def _functional_value_and_grad(
        self, x: Tensor, batch: Batch, xm: Tensor, need_grad: bool = True
    ) -> tuple[Tensor, Tensor | None]:
        inputs, targets = batch
        n = inputs.shape[0]
        if tuple(inputs.shape[1:]) != self.input_shape:
            raise BnnkitError(
                f"the batch inputs have shape {tuple(inputs.shape)} but the training inputs have "
                f"{self.input_shape} per row; the functional prior needs inputs of that shape."
            )
        prior_rows, prior = self._prior_plan(xm, inputs.dtype)
        with torch.set_grad_enabled(need_grad):
            xg = x.detach().requires_grad_(need_grad)
            net, lik, pri = self._parts(xg)
            out = self._call(net, torch.cat([inputs, prior_rows]))
            out_b, f_m = out[:n], out[n:]
            ll = self.likelihood.log_prob(out_b, targets, lik)
            s = self.scale(batch)
            ll = ll if s == 1.0 else s * ll
            if lik:
                ll = ll + self.likelihood.extra_log_prior(lik)
            lw = self.bound_prior.log_prob(xg[: self.d_net], pri)
            f2 = f_m.reshape(f_m.shape[0], -1)
            gp_lp, alpha = prior(f2)
            value = ll.detach() + lw.detach() + gp_lp.to(ll.dtype)
            if not need_grad:
                return value, None
            surrogate = ll + lw - (alpha.to(f2.dtype) * f2).sum()
            (g,) = torch.autograd.grad(surrogate, xg)
        return value, g

    def stochastic_grad(self, x: Tensor, batch: Batch, gen: torch.Generator) -> tuple[Tensor, Tensor]:
        """Log-density estimate and gradient (E5) at fresh measurement points drawn from ``gen``
        (exact form), or at the step's Vecchia factors drawn from ``gen`` (Vecchia form)."""
        value, g = self._functional_value_and_grad(x, batch, self._draw_prior(batch[0], gen))
        assert g is not None
        return value, g

    def vectorized_stochastic_grad(
        self, x: Tensor, batch: Batch, gen: torch.Generator, chain_batched: bool
    ) -> tuple[Tensor, Tensor]:
        """:meth:`stochastic_grad` for K stacked chains ``x [K, D]`` in one batched computation.

        All chains share the step's measurement points or Vecchia factors (drawn once from
        ``gen``; data draws come from the first chain's minibatch), so the GP factor is computed
        once; the network runs once on every chain's minibatch plus the prior rows under
        ``torch.func.vmap``.
        """
        inputs, targets = batch
        rows = inputs[0] if chain_batched else inputs
        if tuple(rows.shape[1:]) != self.input_shape:
            raise BnnkitError(
                f"the batch inputs have shape {tuple(rows.shape)} but the training inputs have "
                f"{self.input_shape} per row; the functional prior needs inputs of that shape."
            )
        prior_rows, prior = self._prior_plan(self._draw_prior(rows, gen), inputs.dtype)
        n, num_rows = rows.shape[0], prior_rows.shape[0]
        mlp = self._mlp
        if mlp is not None and mlp.applies_to(batch):
            # a plain MLP: the hand-batched pass, the prior rows' cotangent -alpha (the surrogate's)
            def term(f: Tensor) -> tuple[Tensor, Tensor]:
                gp_lp, alpha = prior(f)
                return gp_lp, -alpha

            return mlp.value_and_grad(x, batch, chain_batched, self.num_data, (prior_rows, term))

        def one_chain(xk: Tensor, inp: Tensor, tgt: Tensor) -> tuple[Tensor, Tensor]:
            net, lik, pri = self._parts(xk)
            out = self._call(net, torch.cat([inp, prior_rows]))
            ll = self.likelihood.log_prob(out[:n], tgt, lik)
            s = self.scale((inp, tgt))
            ll = ll if s == 1.0 else s * ll
            if lik:
                ll = ll + self.likelihood.extra_log_prior(lik)
            lw = self.bound_prior.log_prob(xk[: self.d_net], pri)
            return ll + lw, out[n:].reshape(num_rows, -1)

        bd = 0 if chain_batched else None
        with torch.enable_grad():
            xg = x.detach().requires_grad_(True)
            llw, f2 = torch.func.vmap(one_chain, in_dims=(0, bd, bd))(xg, inputs, targets)
            gp_lp, alpha = prior(f2)
            surrogate = llw.sum() - (alpha.to(f2.dtype) * f2).sum()
            (g,) = torch.autograd.grad(surrogate, xg)
        return llw.detach() + gp_lp.to(llw.dtype), g

    # ------------------------------------------------------------------ deterministic target
    def log_prob_flat(self, x: Tensor, batch: Batch) -> Tensor:
        """Log density (E1) at the fixed reference measurement set (exact form), or with the
        Vecchia density at the pool, every factor (Vecchia form)."""
        value, _ = self._functional_value_and_grad(x, batch, self._reference(), need_grad=False)
        return value

    def value_and_grad_flat(self, x: Tensor, batch: Batch) -> tuple[Tensor, Tensor]:
        value, g = self._functional_value_and_grad(x, batch, self._reference())
        assert g is not None
        return value, g

    def target(self) -> Target:
        base = super().target()
        return dataclasses.replace(
            base,
            log_prob=self.log_prob_flat,
            grad_fn=self.value_and_grad_flat,
            stochastic_grad=self.stochastic_grad,
            vectorized_stochastic_grad=self.vectorized_stochastic_grad,
            stacked_grad=None,  # the weight-space MLP route knows nothing of the functional prior
            log_likelihood_bound=None,
        )

    def config(self) -> dict:
        cfg = super().config()
        cfg["functional_prior"] = self.gp.config() if hasattr(self.gp, "config") else repr(self.gp)
        m = self.measurement
        cfg["measurement"] = m.config() if hasattr(m, "config") else repr(m)
        if self.vecchia is not None:  # only then: exact-form configs (and resumable runs) are unchanged
            cfg["prior_form"] = self.vecchia.config()
        return cfg


def _gp_log_prob(f2: Tensor, L: Tensor, mean: Tensor) -> tuple[Tensor, Tensor]:
    """``log N(f_M; m, K)`` summed over output columns, and ``alpha = K^-1 (f_M - m)`` (float64).

    ``f2`` is ``[M, out]`` or stacked chains ``[K, M, out]`` (one value per chain).
    """
    resid = f2.detach().to(torch.float64) - mean
    alpha = torch.cholesky_solve(resid, L)
    m, num_out = resid.shape[-2:]
    quad = (resid * alpha).sum(dim=(-2, -1))
    return quad * -0.5 - num_out * L.diagonal().log().sum() - 0.5 * m * num_out * LOG_2PI, alpha
