"""Every method :func:`bnnkit.fit` runs by name, each from its defaults: the same settings as the
UCI bench's rows for that method, so a bench row is what a user gets from the call.

Each runner takes the prepared problem and returns ``(posterior, draws_or_laplace)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least
from ..core.posterior import Posterior
from ..likelihoods import Gaussian
from ..priors import GaussianPrior
from .gp_fit import fitted_gp, gp_noise
from .recipe import DEFAULT_RECIPE, SamplerRecipe, run_recipe

# optimiser budgets of the fitted baselines: epochs over the training rows, capped in steps
EPOCHS, MAX_STEPS, LR = 300, 100_000, 1e-2
# fit options of fsgld / fsghmc's GP prior
GP_OPTIONS = frozenset(
    {"kernel", "box_points", "box_margin", "gp_points", "prior_factors", "measure_at", "edge_points", "widen"}
)
# rows of the GP prior's fit: 500 rather than 1,000 cut wine's fit 5x (O(n^3) a step) and moved
# the median held-out NLL by at most 0.003 nats (chosen on concrete's gap / tail splits, confirmed
# on wine's: docs/results/gap_tail.md, "A cheaper prior fit")
GP_POINTS = 500


@dataclass
class Problem:
    """What every method needs: the module, the likelihood's kind, the standardised data, the
    rows the convergence check watches, and the run's settings."""

    module: torch.nn.Module
    kind: str  # "regression", "categorical" or "bernoulli"
    x: Tensor
    y: Tensor
    batch_size: int
    seed: int
    progress: bool
    output: str | None
    options: dict[str, Any]
    recipe: SamplerRecipe = DEFAULT_RECIPE

    @property
    def n(self) -> int:
        return int(self.x.shape[0])

    def likelihood(self, noise: float | None = None) -> Any:
        return likelihood_for(self.kind, noise, self.recipe)

    def prior(self) -> GaussianPrior:
        """The N(0, prior_scale^2) weight prior (``options["prior_scale"]``, else the recipe's)."""
        return GaussianPrior(self.options.get("prior_scale", self.recipe.prior_scale))

    def sampler_prior(self) -> GaussianPrior:
        """The weight-space samplers' prior: :meth:`prior`, or with the recipe's ``weight_prior``
        ``"fan_in"`` each layer's weights scaled by its fan-in (:meth:`GaussianPrior.fan_in`)."""
        if self.recipe.weight_prior == "fan_in":
            return GaussianPrior.fan_in(self.module, self.options.get("prior_scale", self.recipe.prior_scale))
        return self.prior()

    def posterior(
        self, module: torch.nn.Module | None = None, noise: float | None = None, prior: Any = None
    ) -> Posterior:
        """The posterior over ``module`` (default: the user's) with ``prior`` (default :meth:`prior`)."""
        return Posterior(
            module or self.module, self.likelihood(noise), prior or self.prior(), num_data=self.n
        )

    def epochs(self) -> int:
        per_epoch = math.ceil(self.n / self.batch_size)
        return max(1, min(EPOCHS, MAX_STEPS // per_epoch))


def likelihood_for(kind: str, noise: float | None = None, recipe: SamplerRecipe = DEFAULT_RECIPE) -> Any:
    """The likelihood of ``kind``: categorical, Bernoulli, or Gaussian with the noise sd held at
    ``noise`` (``None``: its precision sampled with the weights, from the recipe's start and prior)."""
    from ..likelihoods import Bernoulli, Categorical

    if kind == "categorical":
        return Categorical()
    if kind == "bernoulli":
        return Bernoulli()
    if noise is None:
        return Gaussian(recipe.noise_init, learn_noise=True, precision_prior=recipe.noise_prior)
    return Gaussian(noise)


def fixed_noise(p: Problem) -> float | None:
    """The fitted baselines' noise sd (standardised units): ``options["noise"]`` if given, else a GP's
    marginal-likelihood fit to at most 1,000 training rows (RBF kernel, 300 steps), floored at
    ``NOISE_FLOOR``; ``None`` for classification.  The samplers sample the noise instead."""
    if p.kind != "regression":
        return None
    if p.options.get("noise") is not None:
        return float(p.options["noise"])
    return gp_noise(fitted_gp(p.x, p.y, p.seed, progress=p.progress)[1])


def _weight_space(sampler: str) -> Callable[[Problem], tuple[Posterior, Any]]:
    """The recipe's chains on the posterior with its weight prior (:meth:`Problem.sampler_prior`):
    pSGLD (``default``) or scale-adapted SGHMC (``sghmc``)."""

    def run(p: Problem) -> tuple[Posterior, Any]:
        return _chains(p, p.posterior(prior=p.sampler_prior()), sampler)

    return run


def _chains(p: Problem, post: Posterior, sampler: str) -> tuple[Posterior, Any]:
    """``p.recipe``'s warm starts and chains on ``post``."""
    return run_recipe(
        p.recipe,
        post,
        p.x,
        p.y,
        seed=p.seed,
        progress=p.progress,
        output=p.output,
        batch_size=p.batch_size,
        sampler=sampler,
    )


def _functional(sampler: str) -> Callable[[Problem], tuple[Posterior, Any]]:
    """fSGLD / fSGHMC: the default recipe's warm starts and chains on the functional posterior, a GP
    prior on the network's outputs (``options["kernel"]``, default RBF, fitted by marginal
    likelihood to at most ``options["gp_points"]`` (default :data:`GP_POINTS`) training rows, in its
    Vecchia form) at the training inputs (at most 1,000), and with ``options["box_points"]`` that
    many points uniform in the inputs' box widened by ``options["box_margin"]`` (default 0.25) of
    its range on each side; ``options["edge_points"]`` that many points a step just past one
    input's training range (``MeasurementPoints.num_edge``, into the same margin);
    ``options["prior_factors"]``: the Vecchia factors a step's prior term
    is estimated from (default 8, each of 9 network rows); ``options["measure_at"]``: inputs
    (standardised, as ``p.x``) added to the training inputs as measurement points, where the user
    will predict (at most 1,000 training rows, no box points); ``options["widen"]`` (default
    True): the predictive adds the fitted prior's latent posterior variance given the training
    inputs to every draw's noise (:class:`bnnkit.functional.widening.PriorWidening`): beyond the
    data the networks' draws do not carry the prior's spread (docs/results/gap_tail.md)."""

    def run(p: Problem) -> tuple[Posterior, Any]:
        from ..functional import FunctionalPosterior, MeasurementPoints, Vecchia
        from ..functional.widening import PriorWidening

        if p.kind != "regression":
            raise BnnkitError(
                f"method {sampler!r} through bnnkit.fit is for regression; for classification "
                "build a FunctionalPosterior with a Categorical likelihood yourself."
            )
        points = p.options.get("gp_points", GP_POINTS)
        check_int_at_least("gp_points", points, 2)
        box, edge = p.options.get("box_points", 0), p.options.get("edge_points", 0)
        check_int_at_least("box_points", box, 0)
        check_int_at_least("edge_points", edge, 0)
        extra = p.options.get("measure_at")
        if extra is not None and (box or edge or p.n > 1000):  # refused before the GP's fit
            raise BnnkitError(
                f"measure_at is added to the training inputs as they are: it needs at most 1,000 "
                f"training rows (got {p.n}) and no box_points or edge_points."
            )
        meas: Any
        if box or edge:  # and points in the box around the inputs / past one input's range
            margin = float(p.options.get("box_margin", 0.25))
            meas = MeasurementPoints(
                num_from_data=min(p.n, 1000), num_uniform=box, num_edge=edge, margin=margin
            )
        elif extra is not None:
            meas = torch.cat([p.x, extra])  # duplicates dropped by the measurement set
        else:
            meas = p.x if p.n <= 1000 else MeasurementPoints(num_from_data=1000, num_uniform=0)
        # the Vecchia factors a step's prior term is estimated from (default: Vecchia's, 8)
        form = Vecchia(factors_per_step=p.options.get("prior_factors", Vecchia.factors_per_step))
        kernel = p.options.get("kernel", "rbf")
        gp, _ = fitted_gp(p.x, p.y, p.seed, kernel=kernel, max_points=points, progress=p.progress)
        post = FunctionalPosterior(p.module, p.likelihood(), gp, meas, p.x, num_data=p.n, prior_form=form)
        if p.options.get("widen", True):
            post.predictive_widening = PriorWidening(gp, p.x, seed=p.seed)
        return _chains(p, post, sampler)

    return run


def _full_batch(kind: str) -> Callable[[Problem], tuple[Posterior, Any]]:
    def run(p: Problem) -> tuple[Posterior, Any]:
        from ..core.driver import sample
        from ..samplers import HMC, NUTS

        post = Posterior(p.module, p.likelihood(), p.prior())
        algorithm = NUTS(max_tree_depth=7) if kind == "nuts" else HMC(num_steps=20)
        s = sample(
            algorithm,
            post,
            (p.x, p.y),
            num_samples=p.options.get("draws", 25),
            num_warmup=p.options.get("warmup", 300),
            num_chains=4,
            seed=p.seed,
            progress=p.progress,
            output=p.output,
        )
        return post, s

    return run


def _laplace(p: Problem) -> tuple[Posterior, Any]:
    from ..laplace import Laplace

    post = p.posterior(noise=fixed_noise(p))  # a start: the evidence tunes the noise
    la = Laplace(post, subset="all", structure="kron").fit(
        (p.x, p.y),
        steps=p.epochs() * math.ceil(p.n / p.batch_size),
        lr=LR,
        batch_size=min(p.batch_size, p.n),
        seed=p.seed,
        progress=p.progress,
    )
    la.optimize_marglik()
    return la.posterior, la


def _mcdropout(p: Problem) -> tuple[Posterior, Any]:
    from ..vi import MCDropout

    rate = p.options.get("p", 0.05)
    net = MCDropout.wrap(p.module, rate).eval()  # eval: MCDropout draws its own masks
    post = p.posterior(net, fixed_noise(p))
    fit = MCDropout(p=rate, lr=LR, num_epochs=p.epochs(), batch_size=p.batch_size, lr_decay="cosine")
    res = fit.fit(post, (p.x, p.y), seed=p.seed, progress=p.progress)
    return post, res.sample(p.options.get("draws", 100), seed=p.seed)


def _ensemble(p: Problem) -> tuple[Posterior, Any]:
    from ..vi import DeepEnsemble

    if p.kind != "regression":
        return _early_stopped_ensemble(p)
    post = p.posterior(noise=fixed_noise(p))
    fit = DeepEnsemble(
        num_members=p.options.get("members", 5),
        lr=LR,
        num_epochs=p.epochs(),
        batch_size=p.batch_size,
        anchored=True,
        init="module",
        lr_decay="cosine",
    )
    return post, fit.fit(post, (p.x, p.y), seed=p.seed, progress=p.progress)


def _early_stopped_ensemble(p: Problem) -> tuple[Posterior, Any]:
    """A classifier's deep ensemble: each member a MAP fit from PyTorch's initialisation, stopped
    at its best score on its own held-out tenth of the rows (the default recipe's MAP phase, one
    member per chain).  Why not the regression members: anchoring makes a member a posterior draw
    only under a Gaussian likelihood, and 300 epochs without a held-out score overfit a small
    noisy classification set (docs/results/default_recipe.md, "A 10,000-step classifier cap")."""
    from ..core.random import make_generator
    from ..core.samples import Samples
    from .recipe import map_fits

    post = p.posterior()
    members = p.options.get("members", 5)
    check_int_at_least("members", members, 1)
    gens = [make_generator(p.seed, k) for k in range(members)]
    best, steps, _ = map_fits(p.recipe, post, p.x, p.y, p.batch_size, gens, p.progress)
    config = {"ensemble": {"members": members, "early_stopping": "held-out tenth"}, "map_steps": steps}
    return post, Samples(best.unsqueeze(0), {}, post.view, config)


def _bbb(p: Problem) -> tuple[Posterior, Any]:
    from ..vi import BayesByBackprop

    post = p.posterior(noise=fixed_noise(p))
    fit = BayesByBackprop(lr=LR, num_epochs=p.epochs(), batch_size=p.batch_size, estimator="local")
    res = fit.fit(post, (p.x, p.y), seed=p.seed, progress=p.progress)
    return post, res.sample(p.options.get("draws", 100), seed=p.seed)


# name -> (runner, draws come from Markov chains, one line for the method table)
METHODS: dict[str, tuple[Callable[[Problem], tuple[Posterior, Any]], bool, str]] = {
    "default": (_weight_space("psgld"), True, "4 MAP-warm-started pSGLD chains, vectorised, noise sampled"),
    "sghmc": (_weight_space("sghmc"), True, "the same warm starts, scale-adapted SGHMC (step 3e-3)"),
    "fsgld": (
        _functional("psgld"),
        True,
        "the default recipe under a GP prior on the outputs (functional SG-MCMC)",
    ),
    "fsghmc": (
        _functional("sghmc"),
        True,
        "the sghmc recipe under a GP prior on the outputs (functional SG-MCMC)",
    ),
    "nuts": (_full_batch("nuts"), True, "NUTS, full batch, 4 chains x 25 draws after 300 warm-up"),
    "hmc": (_full_batch("hmc"), True, "HMC (20 leapfrog steps), full batch, same lengths as nuts"),
    "laplace": (_laplace, False, "KFAC Laplace around a MAP, evidence-tuned prior and noise, GLM predictive"),
    "mcdropout": (_mcdropout, False, "MC dropout, p = 0.05, 100 masks"),
    "ensemble": (_ensemble, False, "5 MAP members (anchored for regression, early-stopped for a classifier)"),
    "bbb": (_bbb, False, "Bayes by Backprop, mean field, local reparameterisation, 100 draws"),
}


def runner(method: str) -> tuple[Callable[[Problem], tuple[Posterior, Any]], bool]:
    if method not in METHODS:
        raise BnnkitError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}.")
    run, chains, _ = METHODS[method]
    return run, chains
