"""The default sampler recipe: what :func:`bnnkit.fit` runs when no method is named, and what the
UCI bench's ``default`` row runs.

K chains, each warm started by an early-stopped MAP phase, then preconditioned SGLD (Li et al.
2016) run as one vectorised computation until the chains agree in function space or the draw
budget is spent:

1. MAP: Adam (``map_lr``) from PyTorch's default initialisation, on ``1 - map_holdout`` of the
   rows, scored on the rest once per epoch (at least every 100 steps); each chain keeps its best
   iterate after ``map_patience`` scores without improvement (a classifier: or after
   ``map_patience_steps_classifier`` steps, where set), or when ``map_max_steps`` steps (a
   classifier: ``map_max_steps_classifier``) or ``map_max_epochs`` epochs are spent
   (:func:`map_steps_cap`).  The K chains' MAP phases run as one
   vectorised computation (:func:`bnnkit.core.map_phase.map_phase`), chain ``c`` drawing its
   start, held-out rows and minibatches from its own generator (seeded from ``(seed, c)``, apart
   from the sampler's).
2. pSGLD with the noise precision sampled with the weights::

       V_t = alpha V_{t-1} + (1 - alpha) g_t^2,        G_t = 1 / (sqrt(V_t) + delta)
       theta_{t+1} = theta_t + (eps / 2) G_t g_t + sqrt(eps G_t) xi_t,   eps = step_size / N

   where ``g_t`` is the minibatch gradient of the log posterior (scaled by N/M) and ``step_size``
   is ``noiseless_step_size`` instead where that is set and the target is nearly noiseless (as in
   step 4; :func:`sampler_step_size`).
3. ``burn_in`` steps, then draws thinned by ``thin`` (a classifier: ``thin_classifier`` where
   set; both scaled down alike where ``sampler_max_epochs`` caps the phase,
   :func:`sampler_schedule`; off by default); every ``check_every`` draws per chain the
   function-space R-hat and ESS at ``check_inputs`` training inputs are computed
   (:class:`bnnkit.diagnostics.FunctionSpaceConvergence`), and the run ends early when both pass.
4. With ``chain_weights="auto"`` (not the default), on a nearly noiseless regression target (the
   MAP phase's pooled held-out RMSE below ``noiseless_below`` of the targets' sd), the predictive
   weights the chains by stacking
   (:mod:`bnnkit.diagnostics.stacking`): each chain's PSIS-LOO fit to (at most 2,000 of) the
   training rows, ``w = argmax_simplex sum_n log sum_k w_k exp(elpd_loo_kn)``, stored as the
   draws' ``log_weight``; elsewhere the chains keep equal weights (``chain_weights``).
5. The noise (protocol 15): on such a target the noise sd is held at an RBF GP's
   marginal-likelihood noise ``s`` (fitted to at most ``noise_gp_points`` rows) where ``s`` is
   below ``noise_gp_below`` of the MAP phase's held-out RMSE, and every draw's predictive variance
   gets that GP's latent posterior variance ``k(x,x) - K_xX (K_XX + s^2 I)^-1 K_Xx`` added
   (``noise_widen``; :func:`held_noise`); elsewhere (and in fsgld / fsghmc) the noise precision is
   sampled with the weights as in step 2, and no GP is fitted where the target is not nearly
   noiseless.
6. Where the noise was so sampled on a nearly noiseless target (protocol 16), the sampling phase
   runs again, from the same warm starts and seed, with the noise held at that GP's noise and the
   predictive widened as in step 5 if the draws' median sampled noise sd is above
   ``noise_drift_above`` times the MAP phase's held-out RMSE (:func:`noise_drifted`; the first
   run's draws are dropped, its record kept in ``config["convergence"]["noise_drift"]``).  That
   second phase takes the step ``drift_step_size / N`` where it is set, and with
   ``drift_same_time`` its burn-in and thinning grow by the ratio of the two steps, so that the
   chain covers the same Langevin time ``eps * steps`` (:func:`drift_phase`).

The recipe is one frozen config with no per-data-set field: it may depend on the training rows
(their number N), never on which data set they are.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import Tensor


@dataclass(frozen=True)
class SamplerRecipe:
    """Every constant of the default recipe (see the module docstring)."""

    chains: int = 4
    batch_size: int = 32
    # Regression keeps improving on held-out rows for long: protein's chains until 40,000-60,000
    # steps, 0.056 nats of test NLL better at 60,000 than at 20,000; diamonds (never used to
    # choose) no worse (docs/results/default_recipe.md, "The MAP cap").
    map_max_steps: int = 60_000
    # A classifier's cap (at most map_max_steps): MNIST's chains peak at 3,000-5,000 steps, and
    # 60,000 cost it 2.1x the seconds for 0.05 percentage points of error (same page).
    map_max_steps_classifier: int = 20_000
    # and at most this many epochs of the fitted rows (None: no cap): on a few hundred nearly
    # noiseless rows the held-out score creeps down for 10,000 steps; 300 epochs cost yacht 0.08
    # nats and 10% of RMSE against 600 (docs/results/default_recipe.md)
    map_max_epochs: int | None = 600
    map_lr: float = 1e-2
    map_holdout: float = 0.1
    map_patience: int = 20
    # a classifier's chain also stops after this many MAP steps without improvement, and leaves
    # the vectorised computation (None: after map_patience scores only, every chain to the end).
    # On MNIST a score comes once an epoch (1,688 steps), so 20 scores (33,760 steps) outlast the
    # 20,000-step cap and early stopping never fired
    map_patience_steps_classifier: int | None = None
    vectorized_map: bool = True  # the K MAP phases as one computation (False: one chain at a time)
    step_size: float = 1e-3  # per datum: eps = step_size / N
    # the step on a nearly noiseless regression target (noiseless_below; None: step_size there
    # too).  Why smaller there: pSGLD's preconditioned step, relative to the posterior's width,
    # grows as the noise sd shrinks, and the draws drift away from the fit
    noiseless_step_size: float | None = None
    alpha: float = 0.99
    burn_in: int = 1000
    draws: int = 100
    thin: int = 50
    # a classifier's thinning (None: thin): the sampling phase's length with the same draws
    thin_classifier: int | None = None
    check_every: int = 25
    # the sampling phase's ``burn_in + draws * thin`` steps shrunk (burn-in and thinning alike) to
    # at most this many epochs of the rows (None: no epoch cap)
    sampler_max_epochs: int | None = None
    # and never below this many steps (None: no floor): an epoch cap cuts the smallest sets
    # hardest (100 rows at 350 epochs keep 1,400 of 6,000 steps; experiments/sampler_cap.py)
    sampler_min_steps: int | None = None
    rhat: float = 1.1
    ess: float = 100.0
    check_inputs: int = 100
    # the regression likelihood: starting noise sd (standardised units), Gamma(shape, rate) prior
    # of the noise precision; the N(0, prior_scale^2) weight prior
    # "sampled": the noise precision is sampled with the weights; "heldout": the noise sd is held
    # at the root mean squared error of the MAP phase on its held-out rows (pooled over chains);
    # "auto": held so only where that error is below noiseless_below times the sd of the fitted
    # targets (a nearly noiseless target), sampled elsewhere; "gp": held, only on such a target,
    # at the noise of an RBF GP fitted by marginal likelihood to the training rows (the fitted
    # baselines' noise, bnnkit.api.methods.fixed_noise), sampled elsewhere and in fsgld / fsghmc.
    # Why a GP's: a smooth interpolator's residual estimates the noise of a nearly noiseless
    # target far below one network's held-out error, which is what a sampled noise settles at.
    # The default since protocol 15, with noise_gp_below=0.5 and noise_widen=True: chosen on yacht
    # and energy, confirmed on Cigar (docs/results/default_recipe.md, "The noise held at a GP's
    # estimate"); on a target that is not nearly noiseless it runs as "sampled", bit for bit
    noise: str = "gp"
    # noise="gp": the GP is fitted to at most this many training rows (the fitted baselines' 1,000
    # cost 14-26 s on 700-1,000 rows of a slow machine; 300 cost 2-4 s)
    noise_gp_points: int = 300
    # noise="gp" holds the GP's noise only where it is below this fraction of the MAP phase's
    # held-out RMSE (None: wherever the target is nearly noiseless).  Why: where a smooth
    # interpolator's residual is about one network's held-out error (energy: 0.78-1.17 of it),
    # holding it gained nothing (+0.023 +- 0.013 nats); where it is far below (yacht: 0.25-0.42)
    # the sampled noise was inflated by the draws' own roughness (-0.66 nats)
    noise_gp_below: float | None = 0.5
    # noise="gp": where the noise is held, the predictive also adds that GP's latent posterior
    # variance given the training inputs (bnnkit.functional.widening.PriorWidening, as fsgld's):
    # small at the data, the GP's prior variance far from it.  Why: a held noise far below the
    # sampled one made yacht's tail splits over-confident (NLL 108 -> 11,289 on one)
    noise_widen: bool = True
    # noise="gp", where the noise was sampled on a nearly noiseless target (the GP fitted, its noise
    # not held): if the draws' median sampled noise sd came out above this multiple of the MAP
    # phase's held-out RMSE, the sampling phase runs again from the same warm starts with the noise
    # held at the GP's estimate and the predictive widened by it (None: never).  Why: there the
    # draws' own roughness, not the data, set the noise (economics, DM: 1.3-2.1x the MAP error,
    # intervals covering every test row; energy, Garch: 0.7-1.05x).  The default since protocol
    # 16: chosen on economics and DM, confirmed on co2, Pound and Yen (docs/results/
    # default_recipe.md, "Sampled again where the noise drifted"); no UCI cell changes
    noise_drift_above: float | None = 1.15
    # the pSGLD step per datum of that second sampling phase (None: the first phase's step), and
    # whether its burn-in and thinning grow by the first step over this one so that it covers the
    # same Langevin time (False: the first phase's burn-in and thinning)
    drift_step_size: float | None = None
    drift_same_time: bool = False
    noise_init: float = 0.5
    # rate 1e-3, not 0.1: the prior's -rate * tau term pulled a nearly noiseless target's sampled
    # noise sd up to ~0.05 (yacht, energy); on noisy sets the residuals swamp either rate
    noise_prior: tuple[float, float] = (1.0, 1e-3)
    noiseless_below: float = 0.1
    # how the predictive weights the chains: "equal"; "stacked", by their leave-one-out fit to the
    # training rows (bnnkit.diagnostics.stacking; regression in weight space only); "auto",
    # stacked only where the target is nearly noiseless (noiseless_below, as noise="auto").
    # Not the default: stacking moves the weight to one or two chains, whose disagreement is most
    # of the predictive beyond the data, so the intervals there narrow (docs/results/
    # default_recipe.md, "The chains stacked on nearly noiseless targets")
    chain_weights: str = "equal"
    prior_scale: float = 1.0
    # "isotropic": N(0, prior_scale^2) on every weight; "fan_in": a layer's weights
    # N(0, prior_scale^2 / fan_in) (GaussianPrior.fan_in), biases N(0, prior_scale^2)
    weight_prior: str = "isotropic"

    def __post_init__(self) -> None:
        for name, allowed in (
            ("noise", ("sampled", "heldout", "auto", "gp")),
            ("weight_prior", ("isotropic", "fan_in")),
            ("chain_weights", ("equal", "stacked", "auto")),
        ):
            if getattr(self, name) not in allowed:
                from ..core.errors import BnnkitError

                choices = ", ".join(repr(a) for a in allowed[:-1]) + f" or {allowed[-1]!r}"
                raise BnnkitError(f"SamplerRecipe.{name} must be {choices}, got {getattr(self, name)!r}.")
        if self.noise_gp_below is not None and not self.noise_gp_below > 0:
            from ..core.errors import BnnkitError

            raise BnnkitError(
                f"SamplerRecipe.noise_gp_below must be a positive fraction or None, got {self.noise_gp_below!r}."
            )
        if self.noise_drift_above is not None and not self.noise_drift_above > 0:
            from ..core.errors import BnnkitError

            raise BnnkitError(
                f"SamplerRecipe.noise_drift_above must be a positive multiple or None, got {self.noise_drift_above!r}."
            )
        for name in ("noiseless_step_size", "drift_step_size"):
            if getattr(self, name) is not None and not getattr(self, name) > 0:
                from ..core.errors import BnnkitError

                raise BnnkitError(
                    f"SamplerRecipe.{name} must be a positive step per datum or None, got {getattr(self, name)!r}."
                )

        for name, may_be_none in (
            ("map_patience_steps_classifier", True),
            ("thin_classifier", True),
            ("noise_gp_points", False),
            ("sampler_min_steps", True),
        ):
            v = getattr(self, name)
            if (v is not None or not may_be_none) and (
                isinstance(v, bool) or not isinstance(v, int) or v < 1
            ):
                from ..core.errors import BnnkitError

                or_none = " or None" if may_be_none else ""
                raise BnnkitError(f"SamplerRecipe.{name} must be a whole number >= 1{or_none}, got {v!r}.")
        for name in ("noise_widen", "drift_same_time"):
            if not isinstance(getattr(self, name), bool):
                from ..core.errors import BnnkitError

                raise BnnkitError(f"SamplerRecipe.{name} must be True or False, got {getattr(self, name)!r}.")

    def config(self) -> dict[str, Any]:
        return asdict(self)


DEFAULT_RECIPE = SamplerRecipe()


def run_recipe(
    recipe: SamplerRecipe,
    posterior: Any,
    x: Tensor,
    y: Tensor,
    *,
    seed: int,
    progress: bool,
    output: str | None = None,
    batch_size: int | None = None,
    sampler: str = "psgld",
) -> tuple[Any, Any]:
    """The posterior sampled and its draws on ``(x, y)`` by ``recipe`` (a :class:`~bnnkit.Samples`
    whose ``config["convergence"]`` holds the last R-hat / ESS, what stopped the run, each
    chain's MAP phase and the seconds of the two phases; with ``vectorized_map=False`` the MAP
    phases run inside the sampling call and count there).  The posterior is ``posterior`` itself, or
    where :func:`held_noise` (or ``noise_drift_above``, after a first sampling phase) says so a copy
    whose Gaussian noise is held (at the MAP phase's held-out error or a GP's noise;
    ``config["convergence"]["noise_held"]``: that sd, or None).
    ``sampler="sghmc"`` runs scale-adapted SGHMC at step 3e-3 in place of pSGLD (the bench's
    protocol-4 sghmc, offered by :func:`bnnkit.fit` as ``method="sghmc"``)."""
    n = int(x.shape[0])
    m = min(batch_size or recipe.batch_size, n)
    t_map = time.perf_counter()
    init, map_steps, held_mse = _warm_starts(recipe, posterior, x, y, m, seed, progress)
    t_noise = time.perf_counter()
    held_rmse = None if held_mse is None else float(held_mse.mean().sqrt())
    sampled, init_sampled = posterior, init
    posterior, init, noise_held, noise_report, gp = _noise(recipe, posterior, init, held_rmse, x, y, seed)
    t_sample = time.perf_counter()
    step = sampler_step_size(recipe, held_rmse, y)
    phase = (recipe, x, y, m, step, sampler, seed, progress)
    s, rule = _sampling_phase(*phase, posterior, init, output)
    sd = None if held_rmse is None else sampled_noise(posterior, s)  # the first run's, recorded either way
    drift = None
    if noise_drifted(
        recipe, held_rmse, noise_held, "noise_gp" in noise_report, sd
    ):  # again, the GP's noise held
        first_run = {**rule.last, "stopped": s.config.get("stopped")}
        drift = {"noise_sampled": sd, "ratio": sd / held_rmse, "first_run": first_run}
        noise_held = noise_report["noise_gp"]
        posterior, init = _held_noise_posterior(recipe, sampled, init_sampled, noise_held, gp, x, seed)
        if sampler == "psgld":
            second, step = drift_phase(recipe, step)
            phase = (second, x, y, m, step, sampler, seed, progress)
        s, rule = _sampling_phase(*phase, posterior, init, None if output is None else f"{output}/noise_held")
    # where the seconds went (on a GPU the MAP phase's held-out scores synchronise at every score)
    seconds = {"map_phase": t_noise - t_map, "sampling": time.perf_counter() - t_sample}
    if noise_report:  # a GP was fitted for the noise (noise="gp")
        seconds["noise_fit"] = t_sample - t_noise
    s.config["convergence"] = {
        **rule.last,
        "stopped": s.config.get("stopped"),
        "map_steps": map_steps,
        "seconds": seconds,
    }
    if sampler == "psgld" and step != recipe.step_size:
        s.config["convergence"]["step_size"] = step
    if held_rmse is not None:
        s.config["convergence"]["map_heldout_rmse"] = held_rmse
        s.config["convergence"]["noise_held"] = noise_held
        noise_report["noise_sampled"] = sd
        s.config["convergence"].update(noise_report, noise_drift=drift)
    stacked = _stack_chains(recipe, posterior, s, x, y, held_rmse, seed)
    if stacked is not None:
        s.config["convergence"]["stacking"] = stacked
    return posterior, s


def _sampling_phase(
    recipe: SamplerRecipe,
    x: Tensor,
    y: Tensor,
    m: int,
    step: float,
    sampler: str,
    seed: int,
    progress: bool,
    posterior: Any,
    init: Any,
    output: str | None,
) -> tuple[Any, Any]:
    """The recipe's sampling phase (steps 2-3 of the module docstring) of ``posterior`` from the
    warm starts ``init``: its draws and the convergence rule that watched them."""
    from ..core.driver import sample
    from ..data.minibatch import Minibatches
    from ..diagnostics import FunctionSpaceConvergence
    from ..sgmcmc import AdaptiveSGHMC, PreconditionedSGLD

    n = int(x.shape[0])
    if sampler == "psgld":
        algorithm: Any = PreconditionedSGLD(step / n, alpha=recipe.alpha)
    else:
        algorithm = AdaptiveSGHMC(3e-3, mdecay=0.05)
    burn_in, thin = sampler_schedule(recipe, n, m, _is_classifier(posterior))
    # the rule watches the outputs at training inputs (inputs only): spread over the rows
    idx = torch.linspace(0, n - 1, min(recipe.check_inputs, n)).round().long()
    rule = FunctionSpaceConvergence(
        posterior, x[idx.to(x.device)], rhat=recipe.rhat, ess=recipe.ess, min_draws=recipe.check_every
    )
    s = sample(
        algorithm,
        posterior,
        Minibatches(x, y, batch_size=m),
        num_samples=recipe.draws,
        num_warmup=burn_in,
        thin=thin,
        num_chains=recipe.chains,
        chain_method="vectorized",
        chunk_size=recipe.check_every,
        init=init,
        stop_when=rule,
        seed=seed,
        progress=progress,
        output=output,
    )
    return s, rule


def drift_phase(recipe: SamplerRecipe, step: float) -> tuple[SamplerRecipe, float]:
    """The recipe and pSGLD step per datum of the sampling phase run again with the noise held
    (``drift_step_size``, where set): with ``drift_same_time`` its burn-in and thinning are those
    of the first phase (step ``step``) times ``step / drift_step_size``, rounded, so that the chain
    covers the same Langevin time ``eps * steps`` at the smaller step."""
    if recipe.drift_step_size is None:
        return recipe, step
    if not recipe.drift_same_time:
        return recipe, recipe.drift_step_size
    k = step / recipe.drift_step_size
    longer = dataclasses.replace(
        recipe, burn_in=max(1, round(recipe.burn_in * k)), thin=max(1, round(recipe.thin * k))
    )
    return longer, recipe.drift_step_size


def noise_drifted(
    recipe: SamplerRecipe,
    held_rmse: float | None,
    noise_held: float | None,
    gp_fitted: bool,
    sampled_sd: float | None,
) -> bool:
    """Whether ``noise_drift_above`` sends the chains back to be sampled again with the noise held:
    a GP was fitted for the noise (a nearly noiseless target), its noise was not held, and the
    draws' median sampled noise sd ``sampled_sd`` is above ``noise_drift_above`` times the MAP
    phase's held-out RMSE ``held_rmse``.  The UCI bench reads a cell's record by the same rule
    (:func:`bnnkit.bench.uci.protocol.drift_cannot_apply`)."""
    return (
        recipe.noise_drift_above is not None
        and gp_fitted
        and noise_held is None
        and sampled_sd is not None
        and held_rmse is not None
        and sampled_sd > recipe.noise_drift_above * held_rmse
    )


def sampled_noise(posterior: Any, s: Any) -> float | None:
    """The median over the draws of the sampled noise sd (standardised units), or ``None`` where
    the noise is not sampled: set beside ``map_heldout_rmse`` and ``noise_gp``, it shows how far
    the draws' own residuals sit from the MAP fit's (a diagnostic; no draw depends on it)."""
    name = "likelihood.log_precision"
    if name not in posterior.view.names or s.positions.numel() == 0:
        return None
    return float(torch.exp(-0.5 * s.positions[..., posterior.view.slice(name)].double()).median())


STACK_ROWS = 2000  # the chains' leave-one-out fit is scored on at most this many training rows
STACK_SEED = 1 << 25  # and those rows are drawn from generator (seed, STACK_SEED)


def _stack_chains(
    recipe: SamplerRecipe,
    posterior: Any,
    samples: Any,
    x: Tensor,
    y: Tensor,
    held_rmse: float | None,
    seed: int,
) -> dict | None:
    """Where the recipe stacks the chains (:attr:`SamplerRecipe.chain_weights`), their per-draw
    weights put into ``samples.stats["log_weight"]`` (which every predictive reads) and the
    stacking report; None where the chains keep equal weights."""
    from ..core.random import make_generator
    from ..diagnostics.stacking import stacked_log_weights
    from ..predict import predict

    lik = posterior.likelihood
    if (
        recipe.chain_weights == "equal"
        or _is_functional(posterior)
        or getattr(lik, "kind", None) != "gaussian"
    ):
        return None
    if recipe.chain_weights == "auto" and not _nearly_noiseless(recipe, held_rmse, y):
        return None
    n = int(x.shape[0])
    rows = torch.arange(n, device=x.device)
    if n > STACK_ROWS:
        gen = make_generator(seed, STACK_SEED, torch.device("cpu"))
        rows = torch.randperm(n, generator=gen)[:STACK_ROWS].sort().values.to(x.device)
    k, d = samples.positions.shape[0], samples.positions.shape[1]
    with torch.no_grad():
        ll = predict(posterior, samples, x[rows]).log_prob_draws(y[rows])
    lw, report = stacked_log_weights(ll.reshape(k, d, -1))
    samples.stats["log_weight"] = lw.to(samples.positions.device)
    return report


def held_noise(
    recipe: SamplerRecipe,
    posterior: Any,
    held_rmse: float | None,
    y: Tensor,
    *,
    x: Tensor | None = None,
    seed: int = 0,
    report: dict | None = None,
) -> float | None:
    """The sd at which the recipe holds a learnt Gaussian noise (None: sampled with the weights):
    the MAP phase's pooled held-out RMSE ``held_rmse`` with ``noise="heldout"``, and with
    ``noise="auto"`` only where ``held_rmse < noiseless_below * sd(y)`` (a nearly noiseless
    target); with ``noise="gp"``, only on such a target of a weight-space posterior, the noise of
    a GP fitted to at most ``noise_gp_points`` of the rows ``(x, y)``
    (:func:`~bnnkit.api.gp_fit.fitted_gp`, seeded by ``seed``; floored at
    ``NOISE_FLOOR`` in the targets' units), and with ``noise_gp_below`` only where that noise is
    below ``noise_gp_below * held_rmse`` (the GP's noise goes into ``report["noise_gp"]``, the
    fitted GP into ``report["gp"]``).  The held-out error is about what the sampled noise
    settles at (docs/results/default_recipe.md, "The noise held at the MAP phase's held-out
    error"); a GP's noise is below it on a nearly noiseless target."""
    lik = posterior.likelihood
    if (
        held_rmse is None
        or getattr(lik, "kind", None) != "gaussian"
        or not getattr(lik, "learn_noise", False)
    ):
        return None
    if recipe.noise == "heldout":
        return held_rmse
    if recipe.noise == "auto" and _nearly_noiseless(recipe, held_rmse, y):
        return held_rmse
    if recipe.noise == "gp" and _nearly_noiseless(recipe, held_rmse, y) and not _is_functional(posterior):
        if x is None:
            from ..core.errors import BnnkitError

            raise BnnkitError("held_noise with noise='gp' needs the training inputs x.")
        from .gp_fit import fitted_gp, gp_noise

        gp, fitted = fitted_gp(x, y, seed, max_points=recipe.noise_gp_points)
        sd = gp_noise(fitted)
        if report is not None:
            report["noise_gp"], report["gp"] = sd, gp
        below = recipe.noise_gp_below
        return sd if below is None or sd < below * held_rmse else None
    return None


def sampler_step_size(recipe: SamplerRecipe, held_rmse: float | None, y: Tensor) -> float:
    """pSGLD's step per datum: ``noiseless_step_size`` where it is set and the target is nearly
    noiseless (the MAP phase's pooled held-out RMSE ``held_rmse`` below ``noiseless_below`` of the
    targets' sd), else ``step_size``."""
    if recipe.noiseless_step_size is not None and _nearly_noiseless(recipe, held_rmse, y):
        return recipe.noiseless_step_size
    return recipe.step_size


def noiseless_advice(recipe: SamplerRecipe, convergence: dict | None, y: Tensor) -> str | None:
    """What the measurements say to a user whose regression target is nearly noiseless (the MAP
    phase's held-out RMSE in ``convergence`` below ``noiseless_below`` of the targets' sd), else
    None: what the noise rule did, and how it fared on the public sets of
    docs/results/default_recipe.md ("The noise held at a GP's estimate")."""
    conv = convergence or {}
    held = conv.get("map_heldout_rmse")
    if not _nearly_noiseless(recipe, held, y):
        return None
    head = f"nearly noiseless target (the MAP phase's held-out RMSE is {held / float(y.double().std()):.3f} of the targets' sd): "
    drift = conv.get("noise_drift")
    if drift:
        return head + (
            f"the draws' sampled noise came out {drift['ratio']:.2f}x the MAP phase's held-out error, so the chains "
            f"were sampled again with the noise held at a GP's estimate ({conv['noise_held']:.3g} standardised) and "
            "the predictive widened by that GP beyond the data. On the public sets where this applied (economics, DM, "
            "co2, Pound, Yen) it lowered the test NLL by 0.04-0.61 nats, and a deep ensemble (method='ensemble') was "
            "still lower on economics, DM and co2; compare the two on held-out rows of your own "
            "(docs/results/default_recipe.md)."
        )
    if recipe.noise == "gp" and conv.get("noise_held") is not None:
        return head + (
            f"the noise was held at a GP's estimate ({conv['noise_held']:.3g} standardised) and the predictive "
            "widened by that GP beyond the data. On the public sets where this applied (yacht, Cigar, Produc, "
            "seals) it lowered the test NLL by 0.34-0.59 nats, and a deep ensemble (method='ensemble') was still "
            "lower on seals; compare the two on held-out rows of your own (docs/results/default_recipe.md)."
        )
    return (
        head
        + (
            "the noise stays sampled, and the 95 % intervals tend to be too wide: on such public sets (energy, "
            "Garch) they covered 98-100 % of the test rows and a deep ensemble (method='ensemble') had the lower "
            "test NLL on Garch; compare the two on held-out rows of your own (docs/results/default_recipe.md)."
        )
        + (
            ""
            if recipe.noise == "gp"
            else " SamplerRecipe(noise='gp') (the default) holds the noise at a GP's estimate where it is below "
            "half of the network's held-out error and widens the predictive beyond the data."
        )
    )


def capped_map_advice(recipe: SamplerRecipe, convergence: dict | None) -> str | None:
    """What the measurements say to a user whose classifier's MAP phase ran every chain to the same
    budget although at least half of them had their best held-out score in its first half (the
    patience, ``map_patience`` scores of an epoch each, outlasting the cap on many rows), else
    None.  The numbers are docs/results/default_recipe.md's ("A classifier's MAP patience in
    steps")."""
    steps = list(((convergence or {}).get("map_steps") or {}).values())
    if recipe.map_patience_steps_classifier is not None or not steps:
        return None
    ran = {int(r) for _, r in steps}
    bests = sorted(int(b) for b, _ in steps)
    if len(ran) != 1 or 2 * sum(b <= min(ran) / 2 for b in bests) < len(bests):
        return None
    return (
        f"every chain's MAP phase ran its {min(ran):,} steps, although the best held-out scores came at steps "
        f"{bests[0]:,}-{bests[-1]:,}: with a score an epoch, the patience outlasts the budget. "
        "SamplerRecipe(map_patience_steps_classifier=4000, thin_classifier=25) stops each chain near its best: "
        "on MNIST it took 0.81x a deep ensemble's seconds (error 0.87 %, ECE 0.007), but on a set whose held-out "
        "score kept creeping up it cost 0.018 nats of NLL; compare on held-out rows of your own "
        "(docs/results/default_recipe.md)."
    )


def _nearly_noiseless(recipe: SamplerRecipe, held_rmse: float | None, y: Tensor) -> bool:
    """Whether the MAP phase's held-out RMSE is below ``noiseless_below`` of the targets' sd."""
    return held_rmse is not None and held_rmse < recipe.noiseless_below * float(y.double().std())


MAP_CHAINS = 1 << 24  # the MAP phase of chain c draws from generator (seed, MAP_CHAINS + c)


def _warm_starts(
    recipe: SamplerRecipe, posterior: Any, x: Tensor, y: Tensor, m: int, seed: int, progress: bool
):
    """The ``init`` of the chains (each at its MAP phase's best iterate) and each chain's
    ``[best step, steps run]``."""
    from ..core.random import make_generator
    from ..core.warm_start import map_init

    if not recipe.vectorized_map:
        init = map_init(
            posterior,
            (x, y),
            steps=_map_cap(recipe, posterior, x, m),
            lr=recipe.map_lr,
            batch_size=m,
            start="fan_in",
            holdout=recipe.map_holdout,
            patience=recipe.map_patience,
        )
        return init, init.map_steps, None  # filled as the driver calls it
    gens = [make_generator(seed, MAP_CHAINS + c, x.device) for c in range(recipe.chains)]
    best, steps, held_mse = map_fits(recipe, posterior, x, y, m, gens, progress)

    def init(chain: int, gen: torch.Generator) -> dict[str, Tensor]:
        return posterior.view.unravel(best[chain])

    init.__name__ = f"map_phase(seed={seed}, chains={recipe.chains})"
    return init, {c: s for c, s in enumerate(steps)}, held_mse


def map_fits(
    recipe: SamplerRecipe,
    posterior: Any,
    x: Tensor,
    y: Tensor,
    batch_size: int,
    gens: list[torch.Generator],
    progress: bool,
) -> tuple[Tensor, list[tuple[int, int]], Tensor | None]:
    """The recipe's MAP phase for ``len(gens)`` chains as one vectorised computation, chain ``c``
    starting from PyTorch's initialisation drawn from ``gens[c]``: the positions ``[K, D]`` at each
    chain's best held-out iterate, each chain's ``(best step, steps run)`` and held-out squared
    error (:func:`bnnkit.core.map_phase.map_phase`).  The default's warm starts and a classifier's
    ensemble members both come from here."""
    from ..core.map_phase import map_phase
    from ..core.warm_start import fan_in_position

    x0 = torch.stack([fan_in_position(posterior, g) for g in gens])
    patience_steps = recipe.map_patience_steps_classifier if _is_classifier(posterior) else None
    best, steps, held_mse = map_phase(
        posterior,
        x,
        y,
        x0,
        gens,
        steps=_map_cap(recipe, posterior, x, batch_size),
        lr=recipe.map_lr,
        batch_size=batch_size,
        holdout=recipe.map_holdout,
        patience=recipe.map_patience,
        patience_steps=patience_steps,
        drop_stopped=patience_steps is not None,
        # a functional prior's exact log density sums every Vecchia factor: use the step's estimate
        stochastic=_is_functional(posterior),
        progress=progress,
    )
    if not torch.isfinite(best).all():
        from ..core.errors import BnnkitError

        raise BnnkitError("the MAP phase diverged; lower the recipe's map_lr (e.g. by 10x).")
    return best, steps, held_mse


def _map_cap(recipe: SamplerRecipe, posterior: Any, x: Tensor, batch_size: int) -> int:
    """:func:`map_steps_cap` for ``posterior``'s likelihood (a classifier's cap or regression's)."""
    return map_steps_cap(recipe, int(x.shape[0]), batch_size, _is_classifier(posterior))


def _is_classifier(posterior: Any) -> bool:
    return getattr(posterior.likelihood, "kind", None) in ("categorical", "bernoulli")


def map_steps_cap(recipe: SamplerRecipe, n: int, batch_size: int, classifier: bool = False) -> int:
    """The MAP phase's step budget on ``n`` rows: ``map_max_steps`` (a classifier's: at most
    ``map_max_steps_classifier``), and at most ``map_max_epochs`` passes over the rows it fits
    (``1 - map_holdout`` of them)."""
    cap = min(recipe.map_max_steps, recipe.map_max_steps_classifier) if classifier else recipe.map_max_steps
    if recipe.map_max_epochs is None:
        return cap
    fitted = max(1, n - int(round(recipe.map_holdout * n)))
    per_epoch = -(-fitted // min(batch_size, fitted))
    return max(1, min(cap, recipe.map_max_epochs * per_epoch))


def sampler_schedule(
    recipe: SamplerRecipe, n: int, batch_size: int, classifier: bool = False
) -> tuple[int, int]:
    """The sampling phase's ``(burn_in, thin)`` on ``n`` rows: the recipe's (a classifier's thinning
    ``thin_classifier`` where set), or both scaled down by the same factor so that
    ``burn_in + draws * thin`` is at most ``sampler_max_epochs`` epochs (and at least
    ``sampler_min_steps`` steps, where set)."""
    thin = recipe.thin_classifier if classifier and recipe.thin_classifier is not None else recipe.thin
    if recipe.sampler_max_epochs is None:
        return recipe.burn_in, thin
    cap = max(recipe.sampler_max_epochs * -(-n // min(batch_size, n)), recipe.sampler_min_steps or 0)
    f = min(1.0, cap / (recipe.burn_in + recipe.draws * thin))
    return max(1, round(recipe.burn_in * f)), max(1, round(thin * f))


def _noise(
    recipe: SamplerRecipe, posterior: Any, init: Any, held_rmse: float | None, x: Tensor, y: Tensor, seed: int
) -> tuple[Any, Any, float | None, dict, Any]:
    """The posterior and ``init`` the chains run on (:func:`held_noise`'s copy where the noise is
    held, with the GP's widening where ``noise_widen`` says so), the held sd (or None), what
    the noise rule recorded (the GP's noise, where one was fitted) and that GP (or None)."""
    report: dict = {}
    noise_held = held_noise(recipe, posterior, held_rmse, y, x=x, seed=seed, report=report)
    gp = report.pop("gp", None)
    if noise_held is not None:
        posterior, init = _held_noise_posterior(recipe, posterior, init, noise_held, gp, x, seed)
    return posterior, init, noise_held, report, gp


def _held_noise_posterior(
    recipe: SamplerRecipe, posterior: Any, init: Any, sd: float, gp: Any, x: Tensor, seed: int
) -> tuple[Any, Any]:
    """:func:`_held_out_noise`'s copy of ``posterior`` with the noise held at ``sd``, its predictive
    widened by the GP ``gp`` beyond the training inputs ``x`` where ``noise_widen`` says so."""
    posterior, init = _held_out_noise(posterior, init, sd)
    if recipe.noise_widen and gp is not None:
        from ..functional.widening import PriorWidening

        posterior.predictive_widening = PriorWidening(gp, x, seed=seed)
    return posterior, init


def _held_out_noise(posterior: Any, init: Any, sd: float) -> tuple[Any, Any]:
    """``posterior`` with its Gaussian noise held at ``sd`` (a copy; the weight prior and layout of
    the network are the same), and ``init`` on that layout (the noise entry dropped)."""
    from ..core.posterior import Posterior
    from ..likelihoods import Gaussian

    if type(posterior) is not Posterior:  # a functional prior keeps its sampled noise
        return posterior, init
    fixed = Posterior(posterior.module, Gaussian(sd), posterior.prior, num_data=posterior.num_data)
    names = fixed.view.names

    def again(chain: int, gen: torch.Generator) -> dict[str, Tensor]:
        start = init(chain, gen)
        return {k: v for k, v in start.items() if k in names}

    again.__name__ = getattr(init, "__name__", "init")
    return fixed, again


def _is_functional(posterior: Any) -> bool:
    from ..functional import FunctionalPosterior

    return isinstance(posterior, FunctionalPosterior)
