"""How each method of the UCI benchmark runs on one split: the posterior it samples or fits, the
SG-MCMC step (fixed or tuned), and the draws its predictive is made of.

The constants come from the protocol's config (:meth:`~bnnkit.bench.uci.protocol.UCIProtocol.config`);
the loop over data sets, splits and methods is :mod:`~bnnkit.bench.uci.runner`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from ...core.driver import once_per_chain, sample
from ...core.errors import BnnkitError
from ...core.posterior import Posterior
from ...core.random import global_rng_seeded
from ...data.minibatch import Minibatches
from ...laplace import Laplace
from ...likelihoods import Gaussian
from ...predict import predict
from ...predict.metrics import rmse
from ...priors import GaussianPrior
from ..divergence import sample_or_diverged
from ..methods import MOMENTUM, family, is_sg, sg_algorithm
from ..models import mlp
from .protocol import METHODS, _batches_per_epoch, _epochs, adaptive_methods, default_step_size, friction


def predictive(post: Any, draws: Any, inputs: torch.Tensor) -> Any:
    """The predictive at ``inputs``: :func:`bnnkit.predict.predict` of the draws (a
    :class:`~bnnkit.Samples` for every sampler and VI method; MC dropout's masks are folded into
    the weights), or a :class:`~bnnkit.Laplace`'s linearised (GLM) predictive."""
    if isinstance(draws, Laplace):
        return draws.predict(inputs)
    return predict(post, draws, inputs)


def test_scores(pred: Any, data: Any) -> dict[str, float]:
    """The test RMSE and NLL of a predictive at ``data.x_test``, standardised and in original units
    (what every cell reports; :func:`_rung_fit` reports them per rung)."""
    lp = pred.log_prob(data.y_test)
    return {
        "rmse_std": rmse(pred.mean, data.y_test),
        "nll_std": float(-lp.mean()),
        "rmse": rmse(data.unnormalise_y(pred.mean), data.unnormalise_y(data.y_test)),
        "nll": float(-data.unnormalise_log_density(lp).mean()),
    }


def _sampler_posterior(
    x: torch.Tensor, cfg: dict, gp: Any, functional: bool, vecchia: bool = False, noise: float | None = None
) -> Any:
    """The samplers' posterior on the training inputs ``x``: the network, a Gaussian likelihood with
    the noise precision sampled, and the N(0, prior_scale^2) weight prior, or (``functional``) the
    fitted GP prior at the measurement points: all training inputs up to
    ``cfg["measurement_points"]`` of them (the paper's UCI protocol), else that many drawn per step;
    ``vecchia``: the GP prior in its Vecchia form; ``noise``: the noise sd held fixed at that
    value instead of sampled (``experiments/uci_cyclical_rhat.py --fixed-noise``)."""
    from ...functional import FunctionalPosterior, MeasurementPoints, Vecchia

    n, d = x.shape
    net = mlp(d, cfg["hidden"])
    if noise is None:
        lik = Gaussian(cfg["noise_init"], learn_noise=True, precision_prior=tuple(cfg["noise_prior"]))
    else:
        lik = Gaussian(noise)
    if not functional:
        return Posterior(net, lik, GaussianPrior(cfg["prior_scale"]), num_data=n)
    if n <= cfg["measurement_points"]:
        meas: Any = x
    else:
        meas = MeasurementPoints(num_from_data=cfg["measurement_points"], num_uniform=0)
    form = Vecchia() if vecchia else "exact"
    return FunctionalPosterior(net, lik, gp, meas, x, num_data=n, prior_form=form)


def _sg_setup(
    method: str, x: torch.Tensor, y: torch.Tensor, cfg: dict, gp: Any, rows: int
) -> tuple[Any, Callable]:
    """The posterior of an SG-MCMC method on ``(x, y)`` and ``step_size -> algorithm``; ``rows``
    is the size of the full training set, which sets SGHMC's friction."""
    post = _sampler_posterior(x, cfg, gp, functional=family(method) == "fsg")
    c = friction(rows, cfg)
    kind = sg_algorithm(method)
    if method not in MOMENTUM:
        return post, kind
    return post, lambda step_size: kind(step_size, friction=c)


def _tuned_step_size(
    method: str, x: torch.Tensor, y: torch.Tensor, cfg: dict, gp: Any, seed: int
) -> tuple[float, list[dict[str, Any]]]:
    """The step size of ``cfg["tune"]["factors"]`` x the default chosen by tuning chains, and the
    table it was chosen from (one row per setting: step, held-out NLL, finite, stationary, R-hat).

    The chains (:func:`bnnkit.tune`) run on a random 80% of the training rows and are scored by
    the NLL on the other 20%; the test split is not touched.  They burn in as long as the run they
    tune (``cfg["tune"]["burn_in"]`` None), so they are scored where the run will be: after a
    500-step burn-in a small step's chain has hardly moved, looks stationary and scores best, and
    over the full run lands far from the others (concrete split 0, SGLD: the 0.1x step won at 500
    steps with held-out NLL 2.22; at 4000 it scores 1.52 and 0.3x wins with 0.64, as it does over
    the full run).  The choice is the lowest held-out NLL among the settings that stayed finite
    (:func:`_choose_step`); diverged settings are never chosen.
    """
    from ...sgmcmc.tune import tune

    t = cfg["tune"]
    n = x.shape[0]  # the grid is around the full set's default (and friction): the step runs there
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    k = n - max(n // 5, 2)
    fit_rows, held_rows = perm[:k], perm[k:]
    post, make = _sg_setup(method, x[fit_rows], y[fit_rows], cfg, gp, n)
    base = default_step_size(method, n, cfg)
    result = tune(
        make,
        {"step_size": [base * f for f in t["factors"]]},
        post,
        Minibatches(x[fit_rows], y[fit_rows], batch_size=min(cfg["batch_size"], k)),
        (x[held_rows], y[held_rows]),
        num_samples=t["draws"],
        num_warmup=cfg["burn_in"] if t["burn_in"] is None else t["burn_in"],
        thin=t["thin"],
        num_chains=2,
        seed=seed,
        progress=False,
        # One batched computation for the pair: a functional posterior draws one measurement set
        # and one factorisation per step for both (wine, 1000 points: 1.7x faster than in turn).
        chain_method="vectorized",
    )

    def short(step: float) -> float:
        return float(f"{step:.6g}")  # 3e-05, not 2.9999999999999997e-05

    table = [
        {
            "step_size": short(r["setting"]["step_size"]),
            **{k: r[k] for k in ("heldout_nll", "finite", "stationary", "rhat_logp")},
        }
        for r in result.rows
    ]
    return short(_choose_step(result.rows)), table


def _choose_step(rows: Sequence[dict[str, Any]]) -> float:
    """The rule of :func:`_tuned_step_size` on the rows of a :class:`~bnnkit.sgmcmc.tune.TuneResult`:
    the lowest held-out NLL among the finite settings.

    The stationarity test of the log density (R-hat and Geweke over 2 x 20 draws) is recorded but
    does not gate the choice: it is too noisy at that length.  Gating on it (protocol 2's first
    rule) chose Boston split 0's SGHMC step 0.3x, whose pair passed the test (R-hat 1.07) at
    held-out NLL 2.53, over 1x, which failed it (R-hat 1.43) at 0.91; the run at 0.3x ended at test
    RMSE 1.07 (standardised), the prior's spread.
    """
    finite = [r for r in rows if r["finite"]]
    if not finite:
        raise BnnkitError(
            f"every step size tried ({[r['setting']['step_size'] for r in rows]}) diverged; "
            "lower the defaults in DEFAULTS['step_size']."
        )
    return min(finite, key=lambda r: r["heldout_nll"])["setting"]["step_size"]


def map_warm_start(post: Any, x: torch.Tensor, y: torch.Tensor, cfg: dict, functional: bool) -> Any:
    """The ``adaptive`` table's per-chain MAP warm starts (``map_init`` with the table's settings):
    Adam from PyTorch's default initialisation, stopped early on a held-out share of the rows.
    Also used by ``experiments/uci_cyclical_rhat.py``."""
    from ...core.warm_start import map_init

    c = cfg["adaptive"]
    return map_init(
        post,
        (x, y),
        steps=c["map_max_steps"],
        lr=c["map_lr"],
        batch_size=min(cfg["batch_size"], x.shape[0]),
        start=c["map_start"],
        # the functional prior's exact log density sums every Vecchia factor: use the step's estimate
        gradient="stochastic" if functional else "exact",
        holdout=c["map_holdout"],
        patience=c["map_patience"],
    )


def _replayed(init: Any) -> Any:
    """``init`` (a per-chain callable such as :func:`map_init`'s) run once per chain
    (:func:`~bnnkit.core.driver.once_per_chain`), so a rerun from the same seed is the chain the
    first run gave, without its MAP phase; it keeps ``init``'s record of the MAP steps."""
    again = once_per_chain(init)
    again.map_steps = init.map_steps  # type: ignore[attr-defined]
    return again


def _adaptive(method: str, data: Any, cfg: dict, gp: Any, seed: int, progress: bool) -> tuple[Posterior, Any]:
    """A cell of the ``adaptive`` table (protocols 4, 5, 7, 9 and 10): sghmc / fsghmc run scale-adapted
    SGHMC, sgld / fsgld preconditioned SGLD, csgld cyclical pSGLD, from per-chain MAP warm starts,
    until the function-space R-hat and ESS at the test inputs (inputs only) meet the table's
    thresholds or the draw budget is spent.  fsghmc and fsgld sample the functional posterior with
    the fitted GP prior in its Vecchia form.  The draws' ``config["convergence"]`` holds the last
    R-hat and ESS and what stopped the run.

    csgld with a ``cyclical_ladder`` (protocol 9), and sghmc with a ``cyclical_sghmc_ladder``
    (protocol 10: cyclical scale-adapted SGHMC, rungs of peak and exploration window), run each rung
    in turn from the same warm starts and seed and keep the first run whose chains agree, R-hat at
    most the table's ``rhat`` when it ended (none did: the one of lowest R-hat);
    ``convergence["ladder"]`` lists every rung run (peak, window, R-hat, ESS, draws, seconds).  With
    ``rung_choice="lppd"`` (:func:`fit_rungs_protocol`) every rung runs, each records its fit
    (:func:`_rung_fit`), and the cell keeps the converged one that fits the training rows best
    (:func:`fit_rung`)."""
    c = cfg["adaptive"]
    x = data.x_train
    functional = family(method) == "fsg"
    if functional and c["prior_form"] != "vecchia":
        raise BnnkitError(f"the adaptive table's prior_form must be 'vecchia', got {c['prior_form']!r}.")
    post = _sampler_posterior(x, cfg, gp, functional=functional, vecchia=True)
    init = _replayed(map_warm_start(post, x, data.y_train, cfg, functional))
    ladder = _ladder(method, c)
    if not ladder:
        s, rule = _adaptive_run(method, post, data, cfg, init, seed, progress, c.get("cyclical_peak"))
        return post, _converged_draws(s, rule, init)
    score = RUNG_CHOICES[c.get("rung_choice", "first")]  # fit_rungs_protocol(): every rung runs
    rungs: list[dict[str, Any]] = []
    runs = []  # (draws, rule) of each rung
    for peak, window in ladder:
        t0 = time.perf_counter()
        s, rule = _adaptive_run(method, post, data, cfg, init, seed, progress, peak, window)
        # agreement of the chains (R-hat) decides; ESS only ends a run early: demanding it too
        # climbed past peaks whose chains agreed (Boston split 0: R-hat 1.044 at 0.05, ESS 77) to
        # a larger peak and a worse fit (test NLL 2.56 at 0.1)
        met = bool(rule.last) and rule.last["rhat"] <= rule.rhat
        where = {"peak": peak} if window is None else {"peak": peak, "window": window}
        seconds = time.perf_counter() - t0  # the run's; judging its fit is not part of its cost
        fit = _rung_fit(post, s, data) if score else {}
        rungs.append({**where, **rule.last, "converged": met, **fit, "seconds": seconds})
        runs.append((s, rule))
        if met and not score:
            break
    k = fit_rung(rungs, c["rhat"], score) if score else kept_rung(rungs, c["rhat"])
    s = _converged_draws(*runs[k], init)
    s.config["convergence"].update(ladder=rungs, peak=rungs[k]["peak"])
    if "window" in rungs[k]:
        s.config["convergence"]["window"] = rungs[k]["window"]
    return post, s


def _ladder(method: str, c: Mapping[str, Any]) -> list[tuple[float, int | None]] | None:
    """The (peak, exploration window) rungs a cell of ``method`` climbs (None: one run): csgld's peaks
    (protocol 9) with no window, sghmc's pairs (protocol 10)."""
    if method == "csgld" and c.get("cyclical_ladder"):
        return [(peak, None) for peak in c["cyclical_ladder"]]
    if method == "sghmc" and c.get("cyclical_sghmc_ladder"):
        return [(peak, window) for peak, window in c["cyclical_sghmc_ladder"]]
    return None


def kept_rung(rungs: Sequence[Mapping[str, Any]], rhat: float) -> int:
    """The index of the rung a ladder (csgld's peaks, sghmc's peak and window pairs) keeps: the first
    whose R-hat is at most ``rhat``, else (none converged) the one whose chains came closest, by
    R-hat, not by test labels.  Also used
    by ``experiments/uci_ladder_cells.py`` to check cells written by an earlier form of the rule."""
    for i, r in enumerate(rungs):
        if r.get("rhat", math.inf) <= rhat:
            return i
    return min(range(len(rungs)), key=lambda i: rungs[i].get("rhat", math.inf))


RUNG_CHOICES = {"first": None, "lppd": "train_lppd"}  # rung_choice -> the score it keeps


def fit_rung(rungs: Sequence[Mapping[str, Any]], rhat: float, score: str) -> int:
    """The index of the rung :func:`fit_rungs_protocol`'s ladder keeps: among the rungs whose R-hat is
    at most ``rhat``, the one of highest ``score`` (a fit to the training rows such as
    ``train_lppd``: no test labels); none converged: :func:`kept_rung`'s choice, the lowest R-hat."""
    # a score that is not a number (PSIS-LOO gives NaN where every row's k is infinite) ranks nothing
    agree = [i for i, r in enumerate(rungs) if r.get("rhat", math.inf) <= rhat and math.isfinite(r.get(score, math.nan))]
    if not agree:
        return kept_rung(rungs, rhat)
    return max(agree, key=lambda i: rungs[i][score])


def _rung_fit(post: Any, s: Any, data: Any) -> dict[str, Any]:
    """How a rung's draws ``s`` fit, for choosing among rungs and for judging that choice:
    ``train_lppd``, the mean over training rows of ``log (1/S) sum_s p(y_n | theta_s)``
    (standardised units; in-sample, so it rewards fit and does not penalise overfitting), PSIS-LOO
    on the training rows (``loo_elpd`` = elpd_loo / N, ``loo_se``, ``pareto_k_max`` and ``bad_k``,
    the rows with k > 0.7 where the estimate is unreliable), and ``test_rmse`` / ``test_nll`` in
    original units, which no rule reads (they say afterwards whether a rule chose well).  Empty
    when a draw is not finite (a diverged rung has no fit to compare)."""
    from ...diagnostics import psis_loo

    if not torch.isfinite(s.positions).all():
        return {}
    train = predictive(post, s, data.x_train)
    r = psis_loo(train.log_prob_draws(data.y_train).reshape(s.num_chains, s.num_draws, -1))
    n = r["n"]
    test = test_scores(predictive(post, s, data.x_test), data)
    return {
        "train_lppd": float(train.log_prob(data.y_train).mean()),
        "loo_elpd": r["elpd"] / n,
        "loo_se": r["se"] / n,
        "pareto_k_max": r["pareto_k_max"],
        "bad_k": r["bad_k"],
        "test_rmse": test["rmse"],
        "test_nll": test["nll"],
    }


def _adaptive_run(
    method: str,
    post: Any,
    data: Any,
    cfg: dict,
    init: Any,
    seed: int,
    progress: bool,
    peak: float | None,
    window: int | None = None,
) -> tuple[Any, Any]:
    """One run of the ``adaptive`` table (csgld at cyclical peak ``peak``; sghmc with a ``window``:
    cyclical at peak eps ``peak``, the mass re-estimated over at most ``window`` exploration steps):
    the draws and the stopping rule that watched them."""
    from ...diagnostics import FunctionSpaceConvergence
    from ...sgmcmc import AdaptiveSGHMC, PreconditionedSGLD
    from ...sgmcmc.schedules import CosineCycle

    c = cfg["adaptive"]
    x, y = data.x_train, data.y_train
    n = x.shape[0]
    # burn-in, draws per chain, thinning, draws per check of the stopping rule
    length = (c["burn_in"], c["draws"], c["thin"], c["min_draws"])
    if method in MOMENTUM and window is not None:
        # eps_t = eps_peak (cos(pi r_t) + 1) / 2 (no / N: the adapted mass makes the drift scale free),
        # csgld's cycles and lengths
        step: Any = peak
        schedule = CosineCycle(peak, c["cyclical_cycle"], c["cyclical_exploration"])
        algorithm: Any = AdaptiveSGHMC(schedule, mdecay=c["mdecay"], explore_window=window)
        length = (c["cyclical_cycle"], c["cyclical_draws"], c["cyclical_thin"], c["cyclical_min_draws"])
    elif method in MOMENTUM:
        step = c["step_size"]
        algorithm = AdaptiveSGHMC(step, mdecay=c["mdecay"])
    elif method == "csgld":
        # eps_t = (a / N) (cos(pi r_t) + 1) / 2 over cycles of L steps; one whole cycle of burn-in
        step = peak / n
        schedule = CosineCycle(step, c["cyclical_cycle"], c["cyclical_exploration"])
        gibbs = c.get("cyclical_gibbs_every")  # gibbs_csgld_protocol()
        algorithm = PreconditionedSGLD(schedule, alpha=c["sgld_alpha"], gibbs_every=gibbs)
        length = (c["cyclical_cycle"], c["cyclical_draws"], c["cyclical_thin"], c["cyclical_min_draws"])
    else:
        step = c["sgld_step_size"] / n
        algorithm = PreconditionedSGLD(step, alpha=c["sgld_alpha"])
    burn_in, draws, thin, check_every = length
    rule = FunctionSpaceConvergence(
        post, data.x_test[: c["check_inputs"]], rhat=c["rhat"], ess=c["ess"], min_draws=check_every
    )
    # Gibbs draws need one chain at a time, and chains that run one after the other cannot be
    # compared as they run: they spend the whole budget and the rule measures them at the end
    together = getattr(algorithm, "gibbs_every", None) is None
    s = sample_or_diverged(
        algorithm,
        post,
        Minibatches(x, y, batch_size=min(cfg["batch_size"], n)),
        num_samples=draws,
        num_warmup=burn_in,
        thin=thin,
        num_chains=c["chains"],
        chain_method="vectorized" if together else "sequential",
        chunk_size=check_every,  # the rule is checked every chunk of kept draws
        init=init,
        stop_when=rule if together else None,
        seed=seed,
        progress=progress,
    )
    if not together:
        if torch.isfinite(s.positions).all():
            rule.update(s.positions)
        s.config["stopped"] = {"reason": "fixed length (Gibbs draws: chains run one at a time)", **rule.last}
    s.config["step_size_used"] = step  # csgld and cyclical sghmc: the peak step
    return s, rule


def _converged_draws(s: Any, rule: Any, init: Any) -> Any:
    """``s`` with ``config["convergence"]``: the rule's last R-hat / ESS, what stopped the run and
    the (best step, steps run) of each chain's MAP phase."""
    map_steps = [list(v) for _, v in sorted(init.map_steps.items())]
    s.config["convergence"] = {**rule.last, "stopped": s.config.get("stopped"), "map_steps": map_steps}
    return s


def _run_method(method: str, data: Any, cfg: dict, noise: float, gp: Any, seed: int, progress: bool):
    """Draws (or VI draws) of one method on one split; returns (posterior, draws).

    ``draws`` is a :class:`~bnnkit.Samples`; pass both to
    :func:`predictive`.  The modules' initial weights come from the global RNG seeded with
    ``seed`` in a fork (chains start from prior draws anyway); the caller's random state is left
    alone, and everything else draws from explicit generators."""
    with global_rng_seeded(seed):
        return _run_method_seeded(method, data, cfg, noise, gp, seed, progress)


def _run_method_seeded(method: str, data: Any, cfg: dict, noise: float, gp: Any, seed: int, progress: bool):
    from ...samplers import NUTS

    x, y = data.x_train, data.y_train
    n, d = x.shape
    net = mlp(d, cfg["hidden"])
    if method == "default":
        # bnnkit.fit as a user calls it on the raw rows: the split is standardised already (with the
        # same float64 rule as fit's), so fit is told not to standardise again
        from ...api import fit

        f = fit(net, (x, y), method="default", seed=seed, progress=progress, standardize=False)
        return f.posterior, f.draws
    # The samplers (nuts, asghmc here) sample the noise precision; ``noise``, the GP fit's, is the
    # VI baselines' fixed noise only, so a sampler's cell does not depend on what ran beside it.
    lik = Gaussian(cfg["noise_init"], learn_noise=True, precision_prior=tuple(cfg["noise_prior"]))
    stream = Minibatches(x, y, batch_size=min(cfg["batch_size"], n))
    sg = dict(
        num_samples=cfg["draws"], num_warmup=cfg["burn_in"], thin=cfg["thin"], seed=seed, progress=progress
    )
    if cfg.get("adaptive") and method in adaptive_methods(cfg["version"]):  # protocols 4, 5 and 7
        return _adaptive(method, data, cfg, gp, seed, progress)
    if is_sg(method):
        eps = default_step_size(method, n, cfg)
        table = None
        if cfg.get("tune"):
            eps, table = _tuned_step_size(method, x, y, cfg, gp, seed)
        post, make = _sg_setup(method, x, y, cfg, gp, n)
        s = sample_or_diverged(make(eps), post, stream, **sg)
        s.config["step_size_used"] = eps
        s.config["tuning"] = table
        return post, s
    post = Posterior(net, lik, GaussianPrior(cfg["prior_scale"]), num_data=n)
    if method == "asghmc":
        from ...sgmcmc import AdaptiveSGHMC

        c = cfg["asghmc"]
        s = sample_or_diverged(
            AdaptiveSGHMC(c["step_size"]),
            post,
            stream,
            num_samples=c["draws"],
            num_warmup=c["burn_in"],
            thin=c["thin"],
            num_chains=c["chains"],
            chain_method="vectorized",
            seed=seed,
            progress=progress,
        )
        return post, s
    if method == "nuts":
        c = cfg["nuts"]
        full = Posterior(net, lik, GaussianPrior(cfg["prior_scale"]))
        s = sample(
            NUTS(max_tree_depth=c["max_tree_depth"]),
            full,
            (x, y),
            num_samples=c["draws"],
            num_warmup=c["warmup"],
            num_chains=c.get("chains", 1),
            seed=seed,
            progress=progress,
        )
        if c.get("check_inputs"):  # protocol 6: the adaptive cells' convergence measure, reported only
            from ...diagnostics import FunctionSpaceConvergence

            rule = FunctionSpaceConvergence(full, data.x_test[: c["check_inputs"]], min_draws=4)
            rule.update(s.positions)
            s.config["convergence"] = {**rule.last, "stopped": "fixed length"}
        return full, s
    if method in ("bbb", "fbnn", "mcdropout", "ensemble"):
        return _vi_cell(method, net, x, y, cfg, noise, gp, seed, progress)
    if method == "laplace":
        c = cfg["laplace"]
        post = Posterior(net, Gaussian(noise), GaussianPrior(cfg["prior_scale"]), num_data=n)
        # the table uses the GLM predictive, so no weights are drawn
        la = Laplace(post, subset=c["subset"], structure=c["structure"]).fit(
            (x, y),
            steps=_epochs(c, n, cfg) * _batches_per_epoch(n, cfg),
            lr=c["lr"],
            batch_size=min(cfg["batch_size"], n),
            seed=seed,
        )
        la.optimize_marglik()
        return la.posterior, la  # the posterior with the tuned noise and prior
    raise BnnkitError(f"unknown method {method!r}; choose from {', '.join(METHODS)}.")


def _vi_cell(
    method: str, net: Any, x: Any, y: Any, cfg: dict, noise: float, gp: Any, seed: int, progress: bool
):
    """A VI baseline's cell: its fit, by Adam at its table's ``lr`` and epochs and the protocol's
    batch size, with the fixed ``noise`` (fbnn: under the fitted GP prior ``gp``), and the draws."""
    from ...functional import FunctionalPosterior, MeasurementPoints
    from ...vi import FBNN, BayesByBackprop, DeepEnsemble, MCDropout

    n = x.shape[0]
    c = cfg[method]
    adam = {"lr": c["lr"], "num_epochs": _epochs(c, n, cfg), "batch_size": cfg["batch_size"]}
    prior = GaussianPrior(cfg["prior_scale"])
    if method == "bbb":
        post = Posterior(net, Gaussian(noise), prior, num_data=n)
        fit = BayesByBackprop(**adam, estimator="local")
    elif method == "fbnn":
        meas = MeasurementPoints(num_from_data=0, num_uniform=c["uniform"])
        post = FunctionalPosterior(net, Gaussian(noise), gp, meas, x, num_data=n)
        fit = FBNN(**adam, num_function_samples=c["function_samples"], lr_decay=c["lr_decay"])
    elif method == "mcdropout":
        # eval(): the Posterior is a fixed function of the weights; MCDropout draws its own masks
        post = Posterior(MCDropout.wrap(net, c["p"]).eval(), Gaussian(noise), prior, num_data=n)
        fit = MCDropout(p=c["p"], **adam, lr_decay=c["lr_decay"])
    else:  # ensemble: the members are the draws
        post = Posterior(net, Gaussian(noise), prior, num_data=n)
        members = DeepEnsemble(
            num_members=c["members"], **adam, anchored=c["anchored"], init=c["init"], lr_decay=c["lr_decay"]
        )
        return post, members.fit(post, (x, y), seed=seed, progress=progress)
    res = fit.fit(post, (x, y), seed=seed, progress=progress)
    # MC dropout's masks are written into the weights they feed: draws that predict() takes as they are
    return post, res.sample(c["draws"], seed=seed)


# public names for the experiment scripts (experiments/) that run one method's cell
run_method = _run_method
sampler_posterior = _sampler_posterior
