"""The Laplace approximation of a :class:`~bnnkit.Posterior`.

Around a MAP ``theta*`` the log posterior is approximated to second order,

.. math::

    p(\\theta \\mid D) \\approx N\\bigl(\\theta^*, \\Lambda^{-1}\\bigr), \\qquad
    \\Lambda = -\\nabla^2 \\log p(D \\mid \\theta)\\big|_{\\theta^*} + \\operatorname{diag}(\\delta)
    \\approx s\\,H + m\\,D,

over a *subset* of the weights (all of the posterior's Bayesian weights, the last layer, or a
user-chosen set); the other weights stay at the MAP.  ``H`` is the GGN or empirical Fisher in a
full, diagonal, Kronecker-factored (KFAC) or low-rank structure (computed with curvlinops),
``m D`` the GaussianPrior's precision (``D = diag(1/scale^2)``, ``m`` a multiplier tuned by the
marginal likelihood) and ``s`` the likelihood scale (the Gaussian noise precision).

Draws are a :class:`~bnnkit.Samples` over the posterior's own layout, so
``bnnkit.predict(la.posterior, la.sample(100), X)``, the metrics, ArviZ export and a warm start
``bnnkit.sample(SGHMC(...), la.posterior, data, init=la.init())`` work unchanged.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Mapping

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least, check_positive
from ..core.flat import FlatView
from ..core.posterior import LIK, PRIOR, Posterior, name_prefixes
from ..core.samples import Samples
from ..likelihoods import Gaussian
from ..priors import GaussianPrior
from ..priors.base import scale_vector
from . import marglik
from .backend import loss_and_unit
from .curvature import check_names, compute
from .predictive import glm_predict

Subset = str | Iterable[str] | Callable[[str], bool] | None


class Laplace:
    """Laplace approximation ``N(theta*, Lambda^{-1})`` of ``posterior`` over a weight subset.

    Args:
        posterior: a :class:`~bnnkit.Posterior` with a :class:`~bnnkit.GaussianPrior` and a
            Gaussian, Categorical or Bernoulli likelihood.
        subset: the weights the approximation covers: ``None`` / ``"all"`` (all the posterior's
            Bayesian weights), ``"last_layer"`` (the parameters of the last submodule that has
            any), or names / name prefixes / a predicate on the name, as ``bayesian=`` takes.
            The posterior's other weights are held at the MAP.
        structure: ``"full"``, ``"diag"``, ``"kron"`` (KFAC; Linear and Conv2d layers) or
            ``"lowrank"`` (the top ``rank`` eigenpairs).
        curvature: ``"ggn"`` (generalised Gauss-Newton) or ``"ef"`` (empirical Fisher).
        rank: eigenpairs kept by ``"lowrank"``.
        prior_precision: override the prior's precision ``1/scale^2`` with this scalar.
        batch_size: rows per pass when computing curvature and Jacobians.
    """

    def __init__(
        self,
        posterior: Posterior,
        subset: Subset = None,
        structure: str = "kron",
        curvature: str = "ggn",
        rank: int = 20,
        prior_precision: float | None = None,
        batch_size: int = 1024,
    ):
        if not isinstance(posterior, Posterior):
            raise BnnkitError(f"Laplace needs a bnnkit.Posterior, got {type(posterior).__name__}.")
        check_names(structure, curvature)
        loss_and_unit(posterior.likelihood, curvature)  # raises on an unsupported likelihood
        if not isinstance(posterior.prior, GaussianPrior):
            raise BnnkitError(
                f"the Laplace approximation needs a GaussianPrior (its precision enters the posterior "
                f"precision and the marginal likelihood); got {type(posterior.prior).__name__}. Build the "
                "Posterior with bnnkit.GaussianPrior(scale)."
            )
        check_int_at_least("rank", rank, 1)
        check_int_at_least("batch_size", batch_size, 1)
        self._base = posterior
        self.structure_name, self.curvature = structure, curvature
        self.rank, self.batch_size = rank, batch_size
        self.subset = _resolve_subset(posterior, subset)
        view = posterior.net_view
        self._sub_idx = torch.cat(
            [torch.arange(view.slice(n).start, view.slice(n).stop) for n in self.subset]
        )
        prior = posterior.prior
        if prior_precision is not None:
            check_positive("prior_precision", prior_precision)
            self._b = torch.ones(len(self._sub_idx), dtype=view.dtype)
            self._log_m = torch.tensor(math.log(prior_precision), dtype=view.dtype)
        else:
            s = scale_vector(view, prior.scale, prior.scales)[self._sub_idx]
            self._b = 1.0 / (s * s)
            self._log_m = torch.zeros((), dtype=view.dtype)  # lambda = 1 when learn_precision
        lik = posterior.likelihood
        self._log_tau = (
            torch.tensor(-2 * math.log(lik.noise), dtype=view.dtype) if isinstance(lik, Gaussian) else None
        )
        self.map_params: dict[str, Tensor] | None = None
        self._structure = None

    # ------------------------------------------------------------------ fitting
    def fit(
        self,
        data: tuple[Tensor, Tensor],
        map: str | Mapping[str, Tensor] | Tensor | None = None,  # noqa: A002 - the natural name
        *,
        steps: int = 1000,
        lr: float = 1e-2,
        batch_size: int | None = None,
        init: str = "module",
        seed: int = 0,
        progress: bool = False,
    ) -> Laplace:
        """Find (or take) the MAP and compute the curvature of ``data`` = ``(inputs, targets)``.

        Args:
            data: the whole training set: ``(inputs, targets)`` tensors or NumPy arrays, or a
                ``torch.utils.data.DataLoader`` yielding ``(x, y)`` batches (all its rows are used).
            map: ``None`` runs ``steps`` of Adam on the negative log posterior; ``"module"``
                takes the module's current weights as the MAP (a network the user trained); a
                dict of parameters or a flat vector over the posterior's layout is taken as is.
            steps, lr, batch_size: the optimiser loop (``batch_size=None``: full batch).
            init: the loop's start, ``"module"`` (the module's weights) or ``"prior"`` (a draw).
            seed: seeds the loop's generator (prior draw, minibatches) and any low-rank sketch.
            progress: a progress bar over the optimiser steps.
        """
        data = self._base.as_data(data)
        self._data = data
        self._gen = torch.Generator().manual_seed(seed)
        self._map_kwargs = dict(steps=steps, lr=lr, batch_size=batch_size)
        self._progress = progress
        if map is None:
            start = self._base.initial_position(init, self._gen)[: self._base.d_net]
            net = self._optimise_map(start, **self._map_kwargs)
        else:
            net = self._given_map(map)
        self._refit(net)
        return self

    def _given_map(self, map) -> dict[str, Tensor]:
        post = self._base
        if isinstance(map, str):
            if map != "module":
                raise BnnkitError(f"map must be None, 'module', a dict or a flat tensor; got {map!r}.")
            named = dict(post.module.named_parameters())
            return {n: named[n].detach().clone() for n in post.net_names}
        if isinstance(map, Tensor):
            if map.shape[-1] not in (post.d_net, post.view.size) or map.ndim != 1:
                raise BnnkitError(
                    f"a flat MAP must be a vector of {post.d_net} network weights (or {post.view.size} "
                    f"with the extras); got shape {tuple(map.shape)}."
                )
            return {k: v.clone() for k, v in post.net_view.unravel(map[: post.d_net].detach()).items()}
        if isinstance(map, Mapping):
            # the likelihood's / prior's own entries (a dict over the whole layout) are not the MAP's
            net = {k: v for k, v in map.items() if not str(k).startswith((LIK, PRIOR))}
            flat = post.net_view.ravel(net, what="the MAP dict", batch_dims=False)
            return {
                k: v.detach().clone() for k, v in post.net_view.unravel(flat.to(post.net_view.dtype)).items()
            }
        raise BnnkitError(f"map must be None, 'module', a dict or a flat tensor; got {type(map).__name__}.")

    def _optimise_map(
        self, start: Tensor, steps: int, lr: float, batch_size: int | None
    ) -> dict[str, Tensor]:
        """Adam on ``-log p(theta | D)`` of :attr:`posterior` (current hyperparameters), extras fixed."""
        check_int_at_least("steps", steps, 1)
        check_positive("lr", lr)
        post = self.posterior
        inputs, targets = self._data
        n = int(inputs.shape[0])
        extras = post.view.ravel({**post.net_view.unravel(start), **post.initial_extras})[post.d_net :]
        from tqdm.auto import tqdm

        x = start.detach().clone().requires_grad_(True)
        opt = torch.optim.Adam([x], lr=lr)
        for _ in tqdm(
            range(steps), desc="Laplace: MAP", disable=not getattr(self, "_progress", False), leave=False
        ):
            if batch_size is None or batch_size >= n:
                batch = (inputs, targets)
            else:
                idx = torch.randint(n, (batch_size,), generator=self._gen)
                batch = (inputs[idx], targets[idx])
            opt.zero_grad(set_to_none=True)
            loss = -post.log_prob_flat(torch.cat([x, extras]) if extras.numel() else x, batch)
            loss.backward()
            opt.step()
        if not torch.isfinite(x).all():
            raise BnnkitError("the MAP optimisation diverged; lower lr (e.g. by 10x).")
        return {k: v.clone() for k, v in post.net_view.unravel(x.detach()).items()}

    def _refit(self, net: dict[str, Tensor]) -> None:
        post = self._base
        self.map_params = net
        sub = {n: net[n] for n in self.subset}
        self._theta = FlatView(sub).ravel(sub)
        inputs, targets = self._data
        scale = post.scale(self._data)
        self._structure = compute(
            post,
            net,
            self.subset,
            self._b,
            (inputs, targets),
            self.structure_name,
            self.curvature,
            self.batch_size,
            self.rank,
            self._gen,
        )
        # rows standing for num_data rows: the curvature scales with the log-likelihood (N/M)
        self._scale_data = scale
        with torch.no_grad():
            out = post.forward(net, inputs)
            if isinstance(post.likelihood, Gaussian):
                r = targets - out.reshape(targets.shape)
                self._stats = {"n": targets.numel(), "ssr": (r * r).sum(), "scale": scale}
            else:
                self._stats = {"ll": scale * post.likelihood.log_prob(out, targets, {})}

    def _lik_scale(self, log_tau: Tensor | None) -> Tensor:
        """``s``: the factor of the stored unit-precision curvature (see :mod:`.structures`)."""
        one = torch.tensor(self._scale_data if self._structure is not None else 1.0, dtype=self._b.dtype)
        if log_tau is None:
            return one
        return one * (log_tau.exp() if self.curvature == "ggn" else (2 * log_tau).exp())

    def _check_fitted(self) -> None:
        if self._structure is None:
            raise BnnkitError("call .fit(data) first: the Laplace approximation has no MAP or curvature yet.")

    # ------------------------------------------------------------------ hyperparameters
    def log_marginal_likelihood(
        self, prior_precision: float | Tensor | None = None, noise: float | Tensor | None = None
    ) -> Tensor:
        """Laplace evidence ``log p(D | h)`` (see :mod:`.marglik`); defaults: the current values.

        ``prior_precision`` is the multiplier ``m`` of the prior's base precision (the precision
        itself for the default isotropic prior); ``noise`` the Gaussian noise standard deviation.
        """
        self._check_fitted()
        log_m = self._log_m if prior_precision is None else torch.log(torch.as_tensor(prior_precision))
        log_tau = self._log_tau
        if noise is not None:
            if log_tau is None:
                raise BnnkitError("noise applies to a Gaussian likelihood only.")
            log_tau = -2 * torch.log(torch.as_tensor(noise, dtype=self._b.dtype))
        return marglik.log_marginal_likelihood(self, log_m.to(self._b.dtype), log_tau)

    def optimize_marglik(self, prior: bool = True, noise: bool | None = None, rounds: int = 1) -> Laplace:
        """Tune the prior precision (and Gaussian noise) by maximising the Laplace evidence.

        Args:
            prior: tune the prior-precision multiplier ``m``.
            noise: tune the Gaussian noise (default: for a Gaussian likelihood, yes).
            rounds: with ``rounds > 1``, refit the MAP (from the current one, with :meth:`fit`'s
                optimiser settings) and the curvature under the new hyperparameters between rounds
                (MacKay's iteration: its fixed point is a stationary point of the evidence).
        """
        self._check_fitted()
        check_int_at_least("rounds", rounds, 1)
        if noise is None:
            noise = self._log_tau is not None
        if noise and self._log_tau is None:
            raise BnnkitError(
                "noise=True tunes a Gaussian noise; this posterior's likelihood is not Gaussian."
            )
        for r in range(rounds):
            if r > 0:
                start = self._base.net_view.ravel(self.map_params)
                self._refit(self._optimise_map(start, **self._map_kwargs))
            self._log_m, log_tau = marglik.optimize(self, prior, noise)
            if log_tau is not None:
                self._log_tau = log_tau
        return self

    @property
    def prior_precision(self) -> Tensor:
        """The prior precision over the subset: a scalar when it is the same for every weight."""
        d = self._log_m.exp() * self._b
        return d[0] if bool((d == d[0]).all()) else d

    @property
    def noise(self) -> float | None:
        """The Gaussian noise standard deviation (``None`` for classification)."""
        return None if self._log_tau is None else float((-0.5 * self._log_tau).exp())

    @property
    def posterior(self) -> Posterior:
        """The posterior with the current (tuned) noise and prior precision, on the same layout.

        Use it with the draws: ``bnnkit.predict(la.posterior, la.sample(100), X)``; and to sample
        from a warm start, ``bnnkit.sample(alg, la.posterior, data, init=la.init())``.
        """
        base = self._base
        post = copy.copy(base)
        lik = base.likelihood
        if isinstance(lik, Gaussian) and self._log_tau is not None:
            post.likelihood = Gaussian(self.noise, lik.learn_noise, lik.precision_prior)
        pr = base.prior
        m = float(self._log_m.exp())
        if pr.learn_precision:  # the multiplier is the prior's own lambda = exp(prior.log_precision)
            new_prior = pr
        else:
            svec = (self._log_m.exp() * self._b).rsqrt()
            scales = dict(pr.scales)
            view = base.net_view
            for n in self.subset:
                i = int((self._sub_idx == view.slice(n).start).nonzero()[0])
                scales[n] = float(svec[i])
            new_prior = GaussianPrior(pr.scale, scales, False, pr.precision_prior)
        post.prior = new_prior
        post.bound_prior = new_prior.bind(base.net_view)
        extras = dict(base.initial_extras)
        if LIK + "log_precision" in extras:
            extras[LIK + "log_precision"] = self._log_tau.reshape(1).to(base.view.dtype)
        if PRIOR + "log_precision" in extras:
            extras[PRIOR + "log_precision"] = torch.tensor([math.log(m)], dtype=base.view.dtype)
        post.initial_extras = extras
        return post

    # ------------------------------------------------------------------ the Gaussian
    @property
    def num_params(self) -> int:
        return int(self._b.numel())

    @property
    def mean(self) -> Tensor:
        """The MAP over the subset, flat ``[P]``."""
        self._check_fitted()
        return self._theta

    def covariance(self) -> Tensor:
        """The dense posterior covariance over the subset ``[P, P]`` (small subsets only)."""
        self._check_fitted()
        return self._structure.covariance(self._lik_scale(self._log_tau), self._log_m.exp())

    def _map_position(self) -> Tensor:
        post = self.posterior
        return post.view.ravel({**self.map_params, **post.initial_extras})

    def _draws(self, n: int, gen: torch.Generator) -> tuple[Tensor, Tensor]:
        """``n`` flat positions over the posterior's layout and their log density under the Laplace."""
        s, m = self._lik_scale(self._log_tau), self._log_m.exp()
        P = self.num_params
        eps = torch.randn(n, P, generator=gen, dtype=self._b.dtype)
        with torch.no_grad():
            dev = self._structure.sample(eps, s, m)
            logq = (
                -0.5 * (eps * eps).sum(1)
                + 0.5 * self._structure.logdet(s, m)
                - 0.5 * P * math.log(2 * math.pi)
            )
        pos = self._map_position().expand(n, -1).clone()
        pos[:, self._sub_idx] += dev
        return pos, logq

    def sample(self, num_samples: int = 100, seed: int = 0, num_chains: int = 1) -> Samples:
        """Draws ``theta ~ N(theta*, Lambda^{-1})`` as :class:`~bnnkit.Samples` ``[chains, draws, D]``.

        Positions are over the posterior's whole layout: weights outside the subset sit at the
        MAP, a learnt noise / prior precision at its tuned value.  ``stats["laplace_log_q"]`` holds
        each draw's log density under the approximation.
        """
        self._check_fitted()
        check_int_at_least("num_samples", num_samples, 1)
        check_int_at_least("num_chains", num_chains, 1)
        gen = torch.Generator().manual_seed(seed)
        pos, logq = self._draws(num_samples * num_chains, gen)
        D = pos.shape[-1]
        return Samples(
            pos.reshape(num_chains, num_samples, D),
            {"laplace_log_q": logq.reshape(num_chains, num_samples)},
            self._base.view,
            self.config(),
        )

    def init(self, draw: bool = True) -> Callable[[int, torch.Generator], dict[str, Tensor]]:
        """An ``init`` for :func:`bnnkit.sample`: each chain starts at its own Laplace draw (from the
        chain's generator) or, with ``draw=False``, at the MAP."""
        self._check_fitted()
        view = self._base.view

        def init(chain: int, gen: torch.Generator) -> dict[str, Tensor]:
            pos = self._draws(1, gen)[0][0] if draw else self._map_position()
            return view.unravel(pos)

        init.__name__ = f"laplace_init(draw={draw})"
        return init

    # ------------------------------------------------------------------ predictive
    def predict(
        self, inputs: Tensor, method: str = "glm", link: str = "probit", num_samples: int = 100, seed: int = 0
    ):
        """Predictive at ``inputs``.

        ``method="glm"``: the linearised predictive (closed form for regression; ``link``
        ``"probit"`` or ``"mc"`` with ``num_samples`` output draws for classification).
        ``method="sample"``: :func:`bnnkit.predict` over ``num_samples`` weight draws (the
        network itself, not linearised).
        """
        self._check_fitted()
        if method not in ("glm", "sample"):
            raise BnnkitError(f"method must be 'glm' or 'sample', got {method!r}.")
        check_int_at_least("num_samples", num_samples, 1)
        inputs = self._base.check_inputs(inputs)
        if method == "glm":
            return glm_predict(self, inputs, link, num_samples, torch.Generator().manual_seed(seed))
        if method == "sample":
            from ..predict.predictive import predict

            return predict(self.posterior, self.sample(num_samples, seed), inputs)
        raise BnnkitError(f"method must be 'glm' or 'sample', got {method!r}.")

    # ------------------------------------------------------------------ saving
    def state_dict(self) -> dict:
        """The fitted approximation as tensors, numbers and strings: what :meth:`from_state_dict`
        needs to predict and draw exactly as this one does (``bnnkit.fit(..., method="laplace")``'s
        ``save``).  The training data are not kept (the marginal likelihood needs them again)."""
        from .structures import structure_state

        self._check_fitted()
        return {
            "structure_name": self.structure_name,
            "curvature": self.curvature,
            "rank": self.rank,
            "batch_size": self.batch_size,
            "subset": list(self.subset),
            "b": self._b,
            "log_m": self._log_m,
            "log_tau": self._log_tau,
            "map_params": dict(self.map_params),
            "theta": self._theta,
            "scale_data": float(self._scale_data),
            "structure": structure_state(self._structure),
        }

    @classmethod
    def from_state_dict(cls, posterior: Posterior, state: dict) -> Laplace:
        """A fitted :class:`Laplace` of ``posterior`` (the same layout as the one saved) from
        :meth:`state_dict`."""
        from .structures import structure_from_state

        la = cls(
            posterior,
            subset=list(state["subset"]),
            structure=state["structure_name"],
            curvature=state["curvature"],
            rank=state["rank"],
            batch_size=state["batch_size"],
        )
        la._b, la._log_m, la._log_tau = state["b"], state["log_m"], state["log_tau"]
        la.map_params = dict(state["map_params"])
        la._theta, la._scale_data = state["theta"], state["scale_data"]
        la._structure = structure_from_state(state["structure"])
        return la

    def config(self) -> dict:
        return {
            "algorithm": "Laplace",
            "structure": self.structure_name,
            "curvature": self.curvature,
            "subset": list(self.subset),
            "rank": self.rank if self.structure_name == "lowrank" else None,
            "prior_precision": self.prior_precision.tolist(),
            "noise": self.noise,
            "posterior": self._base.config(),
        }

    def __repr__(self) -> str:
        return (
            f"Laplace(structure={self.structure_name!r}, curvature={self.curvature!r}, "
            f"params={self.num_params}, fitted={self._structure is not None})"
        )


def _resolve_subset(posterior: Posterior, subset: Subset) -> tuple[str, ...]:
    names = posterior.net_names
    if subset is None or subset == "all":
        return names
    if subset == "last_layer":
        last = None
        for mod_name, mod in posterior.module.named_modules():
            own = [f"{mod_name}.{p}" if mod_name else p for p, _ in mod.named_parameters(recurse=False)]
            own = [n for n in own if n in names]
            if own:
                last = own
        if last is None:  # pragma: no cover - a posterior always has a parameter
            raise BnnkitError("subset='last_layer' found no submodule with Bayesian parameters.")
        return tuple(n for n in names if n in last)
    if callable(subset):
        chosen = tuple(n for n in names if subset(n))
        if not chosen:
            raise BnnkitError(
                f"the subset predicate selects none of the Bayesian parameters ({', '.join(names)})."
            )
        return chosen
    chosen = name_prefixes(
        subset,
        names,
        lambda k: (
            f"subset entry {k!r} matches no Bayesian parameter of the posterior; they are: {', '.join(names)} "
            "(a subset must lie inside the posterior's bayesian= selection)."
        ),
    )
    return tuple(n for n in names if chosen(n))
