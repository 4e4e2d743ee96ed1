"""UCI regression benchmark (functional SG-MCMC paper, section 5.2; docs/fsgmcmc_design.md 9.2).

Protocol (bnnkit's defaults where the paper is silent; the report states every one):

- data: the standard Hernandez-Lobato & Adams splits (90/10), the first ``splits`` of them;
  inputs and targets standardised with training statistics;
- network: 2 hidden layers of ``hidden`` tanh units (paper: 100);
- likelihood: Gaussian; the samplers sample the noise precision with the weights (Gamma(1, 0.1)
  prior, start at noise 0.5: a large starting noise also smooths the burn-in); the VI baselines
  (bbb, fbnn, mcdropout, ensemble) cover weights only, so they use, fixed, the noise of an RBF GP
  (ARD) fitted by marginal likelihood on at most 1000 training rows (a subset drawn with seed
  ``seed + split``; with 1000 more rows to spare, the better of two starts on those rows), the
  same GP that is the functional methods' prior;
- SG-MCMC (sgld, sghmc, fsgld, fsghmc): minibatch 32, ``burn_in`` steps, then ``draws`` draws
  thinned by ``thin`` (paper: 500 burn-in iterations, 15 draws, thinning unknown), N(0, 1)
  weight prior for sgld/sghmc, the fitted RBF GP prior at measurement points for the functional
  methods (all training inputs when N <= 1000, else 1000 random ones, as in the paper); step
  sizes fixed (chosen on Boston split 0 and scaled to the set's N, see
  :func:`default_step_size`), or with ``--tune`` chosen per split from 0.03, 0.1, 0.3, 1 and
  3 x those by chains as long as the run on 80/20 of the training rows: the lowest held-out NLL
  among the settings that stayed finite (``docs/fsgmcmc_design.md`` section 6: tune on a grid);
- nuts: full-batch NUTS (the gold standard on small sets), N(0, 1) prior; ``hmc`` is accepted as
  an alias (the gold standard is run with NUTS, and the report says so);
- the VI baselines (below): Adam on minibatches of 32 for ``epochs`` epochs, but at most
  ``max_steps`` optimiser steps (only protein reaches the cap: 77 epochs of bbb instead of 300),
  100 predictive draws (ensemble: its members);
- bbb: Bayes by Backprop (local reparameterisation), N(0, 1) prior;
- fbnn: functional VI (Sun et al. 2019) with the fitted GP prior of fsgld/fsghmc, on the
  minibatch plus ``fbnn["uniform"]`` points uniform in the (10% widened) training box per step,
  ``fbnn["function_samples"]`` function draws per step (a step costs that many network passes,
  hence fewer epochs than bbb), cosine learning-rate decay;
- mcdropout: MC dropout (Gal & Ghahramani 2016) on the same network, dropout ``p`` before the
  second and the output layer (``MCDropout.wrap``), weight decay ``(1 - p) / N`` per data point
  from the N(0, 1) prior (the noise precision enters through the Gaussian likelihood), cosine
  decay;
- ensemble: anchored deep ensemble (randomise-then-optimise, Pearce et al. 2020) of
  ``ensemble["members"]`` members from PyTorch's initialisation: each member is regularised
  towards its own N(0, 1) prior draw and fits its own noise-perturbed targets, which makes the
  members exact posterior draws for a linear-Gaussian model (a plain ensemble collapses to the MAP
  there and spreads only by multi-modality); cosine decay, so each member reaches its optimum.

Metrics per split: test RMSE and test NLL (``-mean log p(y*)`` under the mixture over draws), in
standardised units (the paper's scale, see ``docs/fsgmcmc_design.md`` 9.2) and in original
units.  Tables give mean +- standard error over splits, with the paper's Table 2/3 numbers
beside ours.
"""

from __future__ import annotations

import csv
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..core.driver import sample
from ..core.errors import BnnkitError
from ..core.posterior import Posterior
from ..core.random import global_rng_seeded
from ..data.minibatch import Minibatches
from ..data.uci import load_uci, resolve_uci_name, uci_num_splits
from ..likelihoods import Gaussian
from ..predict import predict, rmse
from ..priors import GaussianPrior
from .divergence import sample_or_diverged
from .methods import MOMENTUM, family, is_sg, methods_of, sg_algorithm
from .models import mlp
from .records import append_record, read_records, start_records

METHODS = ("sgld", "sghmc", "asghmc", "fsgld", "fsghmc", "nuts", "bbb", "fbnn", "mcdropout", "ensemble")
# Other names accepted by --methods: the issue calls the gold standard "hmc"; what runs is NUTS.
ALIASES = {"hmc": "nuts"}

# The paper's Table 2 (RMSE) and Table 3 (NLL): mean and sd over 10 splits, standardised units.
PAPER = {
    "rmse": {
        "yacht": {"sgld": (1.09, 0.10), "fsgld": (0.41, 0.10), "sghmc": (1.19, 0.10), "fsghmc": (0.25, 0.13)},
        "bostonHousing": {
            "sgld": (1.23, 0.06),
            "fsgld": (0.36, 0.09),
            "sghmc": (1.31, 0.06),
            "fsghmc": (0.24, 0.10),
        },
        "concrete": {
            "sgld": (1.10, 0.07),
            "fsgld": (0.45, 0.04),
            "sghmc": (1.15, 0.06),
            "fsghmc": (0.28, 0.05),
        },
        "energy": {
            "sgld": (1.04, 0.06),
            "fsgld": (0.24, 0.03),
            "sghmc": (1.07, 0.08),
            "fsghmc": (0.18, 0.03),
        },
        "wine-quality-red": {
            "sgld": (1.08, 0.09),
            "fsgld": (0.71, 0.05),
            "sghmc": (1.14, 0.09),
            "fsghmc": (0.62, 0.04),
        },
        "kin8nm": {
            "sgld": (1.20, 0.02),
            "fsgld": (0.74, 0.02),
            "sghmc": (1.26, 0.03),
            "fsghmc": (0.37, 0.01),
        },
        "protein-tertiary-structure": {
            "sgld": (1.12, 0.01),
            "fsgld": (0.84, 0.01),
            "sghmc": (1.21, 0.01),
            "fsghmc": (0.83, 0.01),
        },
    },
    "nll": {
        "yacht": {
            "sgld": (-0.37, 0.08),
            "fsgld": (-2.46, 0.28),
            "sghmc": (-2.06, 0.10),
            "fsghmc": (-3.37, 0.69),
        },
        "bostonHousing": {
            "sgld": (-0.60, 0.11),
            "fsgld": (-2.20, 0.20),
            "sghmc": (-2.25, 0.08),
            "fsghmc": (-3.26, 0.33),
        },
        "concrete": {
            "sgld": (-0.54, 0.05),
            "fsgld": (-1.63, 0.14),
            "sghmc": (-2.51, 0.08),
            "fsghmc": (-2.74, 0.18),
        },
        "energy": {
            "sgld": (-0.58, 0.09),
            "fsgld": (-2.25, 0.25),
            "sghmc": (-2.39, 0.09),
            "fsghmc": (-4.29, 0.23),
        },
        "wine-quality-red": {
            "sgld": (-0.90, 0.12),
            "fsgld": (-2.53, 0.15),
            "sghmc": (-2.50, 0.10),
            "fsghmc": (-2.34, 0.25),
        },
        "kin8nm": {
            "sgld": (-0.60, 0.04),
            "fsgld": (-2.24, 0.09),
            "sghmc": (-2.29, 0.04),
            "fsghmc": (-2.00, 0.12),
        },
        "protein-tertiary-structure": {
            "sgld": (-0.60, 0.01),
            "fsgld": (-2.10, 0.08),
            "sghmc": (-2.20, 0.01),
            "fsghmc": (-2.02, 0.06),
        },
    },
}

DEFAULTS = {
    "hidden": 100,
    "batch_size": 32,
    "burn_in": 4000,
    "draws": 15,
    "thin": 50,
    # Chosen on Boston split 0 (bnnkit.tune-style sweep); fixed-noise runs needed ~10x smaller steps.
    "step_size": {"sgld": 3e-4, "sghmc": 3e-3, "fsgld": 3e-4, "fsghmc": 3e-3},
    "step_rows": 455,  # Boston's training rows: the steps above are for that N (default_step_size)
    "friction": 10.0,
    "nuts": {"warmup": 300, "draws": 100, "max_tree_depth": 7},
    # Scale-adapted SGHMC (docs/sgmcmc_diagnosis.md): one step for every set (no N scaling, no
    # tuning), 4 vectorised chains x 100 draws, the preconditioner estimated in the burn-in.
    "asghmc": {"step_size": 3e-2, "burn_in": 4000, "draws": 100, "thin": 50, "chains": 4},
    # max_steps caps the optimiser steps on large sets (protein: 300 epochs would be 386k steps);
    # no set up to kin8nm reaches the cap, so their runs are the plain epoch budget.
    "bbb": {"epochs": 300, "max_steps": 100_000, "lr": 1e-2, "draws": 100},
    "fbnn": {
        "epochs": 100,
        "max_steps": 25_000,  # a step costs function_samples network passes
        "lr": 1e-2,
        "lr_decay": "cosine",
        "draws": 100,
        "function_samples": 20,
        "uniform": 32,
    },
    "mcdropout": {
        "p": 0.05,
        "epochs": 300,
        "max_steps": 100_000,
        "lr": 1e-2,
        "lr_decay": "cosine",
        "draws": 100,
    },
    "ensemble": {
        "members": 5,
        "epochs": 300,
        "max_steps": 100_000,  # per member
        "lr": 1e-2,
        "lr_decay": "cosine",
        "anchored": True,
        "init": "module",
    },
    "gp_fit_steps": 300,
    "tune": None,  # --tune: per-split step-size choice by held-out NLL (TUNE below)
}
# 2 chains each.  "rule" names how a step is chosen (see _tuned_step_size); --resume reuses a tuned
# cell only under the same rule.  burn_in None: the run's own burn-in (DEFAULTS["burn_in"]).
# The grid reaches 0.03x: on Boston split 0 fSGLD's held-out NLL is lowest there (0.52; 0.58 at
# 0.1x, 1.53 at 1x), and the fSG methods chose the old grid's lowest point, 0.1x, on most splits.
TUNE = {
    "factors": [0.03, 0.1, 0.3, 1.0, 3.0],
    "burn_in": None,
    "draws": 20,
    "thin": 10,
    "rule": "run-length-burn-in, vectorised pair, 0.03x-3x, lowest held-out NLL among finite",
}
QUICK_TUNE = {
    "factors": [0.3, 1.0],
    "burn_in": 20,
    "draws": 20,
    "thin": 1,
    "rule": "quick, lowest held-out NLL",
}
QUICK = {
    "hidden": 20,
    "burn_in": 100,
    "draws": 5,
    "thin": 5,
    "nuts": {"warmup": 30, "draws": 10, "max_tree_depth": 4},
    "asghmc": {"step_size": 3e-2, "burn_in": 100, "draws": 5, "thin": 5, "chains": 2},
    "bbb": {"epochs": 5, "lr": 1e-2, "draws": 20},
    "fbnn": {"epochs": 2, "lr": 1e-2, "lr_decay": None, "draws": 20, "function_samples": 10, "uniform": 8},
    "mcdropout": {"p": 0.05, "epochs": 5, "lr": 1e-2, "lr_decay": None, "draws": 20},
    "ensemble": {"members": 3, "epochs": 5, "lr": 1e-2, "lr_decay": None, "anchored": True, "init": "module"},
    "gp_fit_steps": 30,
    "max_rows": 200,
}


@dataclass(frozen=True)
class DropoutDraws:
    """``num`` MC-dropout networks of a trained :class:`~bnnkit.vi.MCDropoutResult`.

    The masks come from ``seed``, so every call sees the same ``num`` networks, as a fixed set of
    posterior draws would: :func:`predictive` routes them to ``MCDropoutResult.predict``.
    """

    result: Any
    num: int
    seed: int


def predictive(post: Any, draws: Any, inputs: torch.Tensor) -> Any:
    """The predictive at ``inputs``: posterior or VI draws through :func:`bnnkit.predict.predict`,
    MC-dropout networks (:class:`DropoutDraws`) through their own masks (the same mixture)."""
    if isinstance(draws, DropoutDraws):
        return draws.result.predict(inputs, num_samples=draws.num, seed=draws.seed)
    return predict(post, draws, inputs)


def canonical_methods(methods: Sequence[str], known: Sequence[str]) -> list[str]:
    """``methods`` with aliases resolved (``hmc`` -> ``nuts``) and repeats dropped; unknown names refused."""
    out: list[str] = []
    for m in methods:
        c = ALIASES.get(m, m)
        if c not in known:
            names = ", ".join([*known, *(a for a, t in ALIASES.items() if t in known)])
            raise BnnkitError(f"unknown method {m!r}; choose from {names}.")
        if c not in out:
            out.append(c)
    return out


# Raised whenever a default changes what a cell's numbers are, so that --resume never mixes cells of
# two protocols.  2: GP fit without repeated (x, y) rows, SG-MCMC steps scaled to N, VI step cap.
# 3: the GP fit's 1000-row subset (sets with more training rows) drawn from a generator seeded with
# seed + split; protocol 2 drew it from torch's global RNG, which this torch seeds anew in every
# process, so those cells could not be reproduced.  Where 1000 more rows remain (kin8nm, protein;
# not wine) the fit also starts from the median distance and keeps the start that predicts them best.
PROTOCOL = 3
GP_FIT_MAX_POINTS = 1000
# Sets whose training splits have at most GP_FIT_MAX_POINTS rows: the fit takes every row, draws no
# subset, and their protocol-2 cells are protocol-3 cells (tests/bench/test_uci.py checks the sizes).
NO_GP_SUBSET = frozenset({"bostonHousing", "concrete", "energy", "yacht"})
SG_METHODS = methods_of("sg", "fsg")  # sgld, sghmc, fsgld, fsghmc
VI_METHODS = methods_of("vi")  # bbb, fbnn, mcdropout, ensemble


def _sg_setup(
    method: str, x: torch.Tensor, y: torch.Tensor, cfg: dict, gp: Any, rows: int
) -> tuple[Any, Callable]:
    """The posterior of an SG-MCMC method on ``(x, y)`` and ``step_size -> algorithm``; ``rows``
    is the size of the full training set, which sets SGHMC's friction."""
    from ..functional import FunctionalPosterior, MeasurementPoints

    n, d = x.shape
    net = mlp(d, cfg["hidden"])
    lik = Gaussian(0.5, learn_noise=True, precision_prior=(1.0, 0.1))
    if family(method) == "fsg":
        if n <= 1000:
            meas: Any = x  # all training inputs, fixed (the paper's UCI protocol)
        else:
            meas = MeasurementPoints(num_from_data=1000, num_uniform=0)
        post: Any = FunctionalPosterior(net, lik, gp, meas, x, num_data=n)
    else:
        post = Posterior(net, lik, GaussianPrior(1.0), num_data=n)
    c = friction(rows, cfg)
    kind = sg_algorithm(method)
    if method not in MOMENTUM:
        return post, kind
    return post, lambda step_size: kind(step_size, friction=c)


def default_step_size(method: str, n: int, cfg: dict[str, Any]) -> float:
    """The default step of ``method`` for ``n`` training rows.

    The defaults ``cfg["step_size"]`` were chosen on Boston (``cfg["step_rows"]`` = 455 training
    rows).  The minibatch gradient ``(N/n) sum_B`` and the posterior's curvature grow with N, so
    on a larger set the stable step shrinks with ``r = step_rows / N``: SGLD's step is a learning
    rate and scales as ``r``; SGHMC's learning rate is ``eps^2``, so ``eps`` scales as
    ``sqrt(r)`` and the friction as ``1 / sqrt(r)`` (:func:`friction`), which keeps the momentum
    decay ``eps C`` of the default.  Measured on protein split 0 (full runs, no tuning): SGLD's
    test RMSE was 0.93 at ``eps N`` = Boston's, 6.0 at 10x that, and its chain diverged at the
    Boston step.
    """
    base = cfg["step_size"][method]
    r = _rows_ratio(n, cfg)
    return float(f"{base * (math.sqrt(r) if method in MOMENTUM else r):.6g}")


def friction(n: int, cfg: dict[str, Any]) -> float:
    """SGHMC's friction ``C`` for ``n`` training rows (see :func:`default_step_size`)."""
    return cfg["friction"] / math.sqrt(_rows_ratio(n, cfg))


def _rows_ratio(n: int, cfg: dict[str, Any]) -> float:
    """``r = step_rows / N``, at most 1: how much smaller than Boston's the stable step is."""
    return min(1.0, cfg["step_rows"] / n)


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
    from ..sgmcmc.tune import tune

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


def _epochs(c: dict[str, Any], n: int, cfg: dict[str, Any]) -> int:
    """``c["epochs"]``, fewer where that many would pass ``c["max_steps"]`` optimiser steps."""
    per_epoch = math.ceil(n / min(cfg["batch_size"], n))
    cap = c.get("max_steps")
    return c["epochs"] if cap is None else max(1, min(c["epochs"], cap // per_epoch))


def _run_method(method: str, data: Any, cfg: dict, noise: float, gp: Any, seed: int, progress: bool):
    """Draws (or VI draws) of one method on one split; returns (posterior, draws).

    ``draws`` is a :class:`~bnnkit.Samples` (:class:`DropoutDraws` for mcdropout); pass both to
    :func:`predictive`.  The modules' initial weights come from the global RNG seeded with
    ``seed`` in a fork (chains start from prior draws anyway); the caller's random state is left
    alone, and everything else draws from explicit generators."""
    with global_rng_seeded(seed):
        return _run_method_seeded(method, data, cfg, noise, gp, seed, progress)


def _run_method_seeded(method: str, data: Any, cfg: dict, noise: float, gp: Any, seed: int, progress: bool):
    from ..functional import FunctionalPosterior, MeasurementPoints
    from ..samplers import NUTS
    from ..vi import FBNN, BayesByBackprop, DeepEnsemble, MCDropout

    x, y = data.x_train, data.y_train
    n, d = x.shape
    net = mlp(d, cfg["hidden"])
    lik = Gaussian(0.5, learn_noise=True, precision_prior=(1.0, 0.1))
    stream = Minibatches(x, y, batch_size=min(cfg["batch_size"], n))
    sg = dict(
        num_samples=cfg["draws"], num_warmup=cfg["burn_in"], thin=cfg["thin"], seed=seed, progress=progress
    )
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
    post = Posterior(net, lik, GaussianPrior(1.0), num_data=n)
    if method == "asghmc":
        from ..sgmcmc import AdaptiveSGHMC

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
        full = Posterior(net, lik, GaussianPrior(1.0))
        s = sample(
            NUTS(max_tree_depth=c["max_tree_depth"]),
            full,
            (x, y),
            num_samples=c["draws"],
            num_warmup=c["warmup"],
            seed=seed,
            progress=progress,
        )
        return full, s
    if method == "bbb":
        c = cfg["bbb"]
        post = Posterior(net, Gaussian(noise), GaussianPrior(1.0), num_data=n)
        fit = BayesByBackprop(
            lr=c["lr"], num_epochs=_epochs(c, n, cfg), batch_size=cfg["batch_size"], estimator="local"
        )
        res = fit.fit(post, (x, y), seed=seed, progress=progress)
        return post, res.sample(c["draws"], seed=seed)
    if method == "fbnn":
        c = cfg["fbnn"]
        meas = MeasurementPoints(num_from_data=0, num_uniform=c["uniform"])
        post = FunctionalPosterior(net, Gaussian(noise), gp, meas, x, num_data=n)
        fit = FBNN(
            lr=c["lr"],
            num_epochs=_epochs(c, n, cfg),
            batch_size=cfg["batch_size"],
            num_function_samples=c["function_samples"],
            lr_decay=c["lr_decay"],
        )
        res = fit.fit(post, (x, y), seed=seed, progress=progress)
        return post, res.sample(c["draws"], seed=seed)
    if method == "mcdropout":
        c = cfg["mcdropout"]
        # eval(): the Posterior is a fixed function of the weights; MCDropout draws its own masks
        dropout_net = MCDropout.wrap(net, c["p"]).eval()
        post = Posterior(dropout_net, Gaussian(noise), GaussianPrior(1.0), num_data=n)
        fit = MCDropout(
            p=c["p"],
            lr=c["lr"],
            num_epochs=_epochs(c, n, cfg),
            batch_size=cfg["batch_size"],
            lr_decay=c["lr_decay"],
        )
        res = fit.fit(post, (x, y), seed=seed, progress=progress)
        return post, DropoutDraws(res, c["draws"], seed)
    if method == "ensemble":
        c = cfg["ensemble"]
        post = Posterior(net, Gaussian(noise), GaussianPrior(1.0), num_data=n)
        fit = DeepEnsemble(
            num_members=c["members"],
            lr=c["lr"],
            num_epochs=_epochs(c, n, cfg),
            batch_size=cfg["batch_size"],
            anchored=c["anchored"],
            init=c["init"],
            lr_decay=c["lr_decay"],
        )
        return post, fit.fit(post, (x, y), seed=seed, progress=progress)
    raise BnnkitError(f"unknown method {method!r}; choose from {', '.join(METHODS)}.")


def _mean_se(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    m = sum(values) / n
    if n < 2:
        return m, float("nan")
    var = sum((v - m) ** 2 for v in values) / (n - 1)
    return m, math.sqrt(var / n)


def run_uci(
    datasets: Sequence[str],
    methods: Sequence[str],
    splits: int = 10,
    out: str | Path = "bnnkit-out/uci",
    root: str | None = None,
    quick: bool = False,
    seed: int = 0,
    progress: bool = True,
    log: Callable[[str], None] = print,
    tune: bool = False,
    from_cells: str | Path | None = None,
    resume: bool = False,
    first_split: int = 0,
) -> dict[str, Any]:
    """Run ``methods`` on ``datasets`` for the first ``splits`` splits; write tables, JSON and
    ``uci.png`` (RMSE and NLL per method and data set, the paper's numbers marked).

    ``first_split`` skips the splits before it, so that one run can take splits 0-3 and another,
    in parallel, splits 4-9: each cell is the one the single run gives (split s always uses seed
    ``seed + s``), and ``from_cells`` joins their files.

    With ``tune`` each SG-MCMC method chooses its step size per split from ``TUNE["factors"]`` x
    its default by chains as long as the run on 80/20 of the training rows
    (:func:`_tuned_step_size`).  With
    ``from_cells`` nothing runs: the tables are rebuilt from the ``uci_cells.jsonl`` that a run of
    the same arguments wrote cell by cell (for a run that stopped before it finished; the report
    names the splits it holds).  With ``resume`` the cells already in ``out/uci_cells.jsonl`` from
    a run with the same seed, mode and tuning are kept and only the missing ones run: a stopped
    run goes on, or a 5-split run grows to 10, with the numbers a single run would give.
    """
    from ..functional import GPPrior

    requested = list(methods)
    methods = canonical_methods(requested, METHODS)
    if splits < 1:
        raise BnnkitError(f"splits must be >= 1, got {splits}.")
    if not 0 <= first_split < splits:
        raise BnnkitError(
            f"first_split must lie in 0..{splits - 1} (splits - 1), got {first_split}; it is the index of "
            "the first split to run, and splits the index after the last."
        )
    cfg = {**DEFAULTS, **(QUICK if quick else {})}
    if tune:
        cfg["tune"] = QUICK_TUNE if quick else TUNE
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if from_cells is not None:
        if resume:
            raise BnnkitError(
                "from_cells rebuilds the tables and runs nothing, resume runs the missing cells: pass one."
            )
        if first_split:
            raise BnnkitError("from_cells rebuilds the tables from every split present: drop first_split.")
        cells = _read_cells(Path(from_cells), datasets, methods, log, seed, quick, tune)
        report = _report(cells, datasets, methods, splits, quick, seed, cfg, requested, rebuilt=True)
        _write(out, report, cells)
        return report
    cells: list[dict[str, Any]] = []
    partial = out / "uci_cells.jsonl"  # one line per finished cell: nothing is lost if a run stops
    done: dict[tuple, dict[str, Any]] = {}
    if resume and partial.is_file():
        kept = read_records(partial, log)
        partial.write_text("".join(json.dumps(c) + "\n" for c in kept))  # drop a line cut short
        for c in kept:
            if _same_run(c, seed, quick, tune):
                done[(c["dataset"], c["split"], c["method"])] = c
    else:
        start_records(partial, log)
    for ds in datasets:
        name = resolve_uci_name(ds)
        available = uci_num_splits(name, root=root)
        if splits > available:  # protein has 5 standard splits, the others 20
            log(f"{name} has only {available} standard splits: splits {available}-{splits - 1} are skipped.")
        for split in range(first_split, min(splits, available)):
            todo = [m for m in methods if (name, split, m) not in done]
            for m in methods:
                if m not in todo:
                    cells.append(done[(name, split, m)])
            if not todo:
                continue
            if len(todo) < len(methods):
                log(
                    f"{name} split {split}: resumed {len(methods) - len(todo)} cell(s), running {', '.join(todo)}"
                )
            data = load_uci(name, split, root=root)
            if quick and data.x_train.shape[0] > cfg["max_rows"]:
                data = _subsample(data, cfg["max_rows"])
            t0 = time.perf_counter()
            gp = GPPrior("rbf", input_dim=data.x_train.shape[1], jitter=1e-4)
            fitted = gp.fit(
                data.x_train,
                data.y_train,
                num_steps=cfg["gp_fit_steps"],
                max_points=GP_FIT_MAX_POINTS,
                generator=torch.Generator().manual_seed(seed + split),
                progress=False,
            )
            noise = max(math.sqrt(fitted["noise_variance"]), 0.01)
            gp_seconds = time.perf_counter() - t0
            for method in todo:
                t0 = time.perf_counter()
                post, s = _run_method(method, data, cfg, noise, gp, seed + split, progress)
                seconds = time.perf_counter() - t0
                pred = predictive(post, s, data.x_test)
                lp = pred.log_prob(data.y_test)
                cell = {
                    "dataset": name,
                    "split": split,
                    "method": method,
                    "seed": seed + split,
                    "rmse_std": rmse(pred.mean, data.y_test),
                    "nll_std": float(-lp.mean()),
                    "rmse": rmse(data.unnormalise_y(pred.mean), data.unnormalise_y(data.y_test)),
                    "nll": float(-data.unnormalise_log_density(lp).mean()),
                    "seconds": seconds,
                    "gp_fit_seconds": gp_seconds,
                    "noise_std_standardised": noise,
                    "gp_fit_rows": fitted["num_points"],
                    "gp_fit_starts": fitted["starts"],
                    "step_size": s.config.get("step_size_used") if method in SG_METHODS else None,
                    # the tuning chains' table (step, held-out NLL, stationarity): the choice can be
                    # checked, or remade under another rule, without running them again
                    "tuning": s.config.get("tuning") if method in SG_METHODS else None,
                    "epochs": _epochs(cfg[method], data.x_train.shape[0], cfg)
                    if method in VI_METHODS
                    else None,
                    **_settings(method, quick, tune),
                }
                cells.append(cell)
                append_record(partial, cell)
                if not (math.isfinite(cell["rmse_std"]) and math.isfinite(cell["nll_std"])):
                    log(
                        f"{name} split {split} {method:9s} diverged: non-finite predictions ({seconds:.0f} s)"
                    )
                    continue
                log(
                    f"{name} split {split} {method:9s} RMSE {cell['rmse_std']:.3f} NLL {cell['nll_std']:.3f} "
                    f"(standardised) | RMSE {cell['rmse']:.3f} NLL {cell['nll']:.3f} (original) {seconds:.0f} s"
                )
    report = _report(cells, datasets, methods, splits, quick, seed, cfg, requested, first_split=first_split)
    _write(out, report, cells)
    return report


def _write(out: Path, report: dict[str, Any], cells: list[dict[str, Any]]) -> None:
    (out / "uci.json").write_text(json.dumps(report, indent=2, default=float))
    with (out / "uci.csv").open("w", newline="") as f:
        keys = list(dict.fromkeys(k for c in cells for k in c))  # cells of older runs may lack a key
        w = csv.DictWriter(f, fieldnames=keys, restval="")
        w.writeheader()
        w.writerows(cells)
    (out / "uci.md").write_text(report["markdown"])
    _plot(out / "uci.png", report)


def _settings(method: str, quick: bool, tune: bool) -> dict[str, Any]:
    """What a cell's numbers depend on beyond data set, split, method and seed (``--resume`` reuses
    a cell only when these match); ``--tune`` changes only the SG-MCMC methods.  A cell written
    before ``protocol`` was recorded counts as protocol 1."""
    tuned = tune and method in SG_METHODS
    return {
        "quick": quick,
        "tuned": (QUICK_TUNE if quick else TUNE)["rule"] if tuned else False,
        "protocol": PROTOCOL,
    }


def _same_run(cell: dict[str, Any], seed: int, quick: bool, tune: bool) -> bool:
    """Whether ``cell`` is what a run with these arguments (and this protocol) writes for it."""
    wanted = _settings(cell["method"], quick, tune)
    have = {k: cell.get(k, 1 if k == "protocol" else None) for k in wanted}
    if have["protocol"] == 2 and cell.get("dataset") in NO_GP_SUBSET:
        have["protocol"] = 3  # the protocols differ only in how a GP-fit subset is drawn
    return cell.get("seed") == seed + cell.get("split", -1) and have == wanted


def _read_cells(
    path: Path,
    datasets: Sequence[str],
    methods: Sequence[str],
    log: Callable[[str], None],
    seed: int,
    quick: bool,
    tune: bool,
) -> list[dict[str, Any]]:
    if not path.is_file():
        raise BnnkitError(
            f"{path} does not exist; pass the uci_cells.jsonl that a `bnnkit bench uci` run wrote."
        )
    names = {resolve_uci_name(d) for d in datasets}
    latest: dict[tuple, dict[str, Any]] = {}  # a later line for the same cell (a rerun) supersedes
    asked = [c for c in read_records(path, log) if c.get("dataset") in names and c.get("method") in methods]
    # Cells of another seed, mode, tuning rule or protocol are not this command's numbers.
    lines = [c for c in asked if _same_run(c, seed, quick, tune)]
    if len(lines) < len(asked):
        log(
            f"{path}: left out {len(asked) - len(lines)} cell(s) of another seed, --quick/--tune setting "
            "or protocol (they belong to another command's table)"
        )
    for c in lines:
        latest[(c["dataset"], c["split"], c["method"])] = c
    if len(latest) < len(lines):
        log(f"{path}: {len(lines) - len(latest)} cell(s) superseded by a later line for the same cell")
    cells = list(latest.values())
    if not cells:
        raise BnnkitError(
            f"{path} holds no cell of datasets {sorted(names)} and methods {list(methods)}; check the arguments."
        )
    return cells


def _method_label(method: str, asked_as: dict[str, str]) -> str:
    """A row's name in the table and the plot: ``hmc (NUTS)`` where NUTS was asked for as ``hmc``
    (``asked_as`` maps a method to the alias it was asked for by, e.g. ``{"nuts": "hmc"}``)."""
    return f"{asked_as[method]} (NUTS)" if method in asked_as else method


def _plot(path: Path, report: dict[str, Any]) -> None:
    """RMSE and NLL (standardised) per method, one row per data set: mean +- s.e. over splits,
    the paper's value (where published) as a red cross."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = report["summary"]
    # a data set with no finished cell (a stopped run) gets no empty panel
    names = [n for n in summary if any("rmse_std" in v for v in summary[n].values())] or list(summary)
    fig, axes = plt.subplots(len(names), 2, figsize=(10, 0.5 + 0.42 * len(report["methods"]) * len(names) + 0.8),
                             squeeze=False)  # fmt: skip
    asked_as = {t: a for a, t in report["aliases"].items()}  # e.g. {"nuts": "hmc"}
    for row, name in zip(axes, names):
        methods = [m for m in report["methods"] if "rmse_std" in summary[name].get(m, {})]
        labels = [_method_label(m, asked_as) for m in methods]
        for ax, key, title, paper in (
            (row[0], "rmse_std", "test RMSE", PAPER["rmse"]),
            (row[1], "nll_std", "test NLL", PAPER["nll"]),
        ):
            ys = range(len(methods))
            mean = [summary[name][m][key][0] for m in methods]
            se = [summary[name][m][key][1] for m in methods]
            se = [0.0 if math.isnan(e) else e for e in se]  # one split: no standard error
            ax.errorbar(mean, list(ys), xerr=se, fmt="o", color="tab:blue", capsize=3, label="bnnkit")
            px = [(paper.get(name, {}).get(m) or (None,))[0] for m in methods]
            pts = [(x, y) for x, y in zip(px, ys) if x is not None]
            if pts:
                ax.plot([x for x, _ in pts], [y for _, y in pts], "x", color="tab:red", ms=8, label="paper")
            ax.set_yticks(list(ys), labels)
            ax.invert_yaxis()
            ax.set_title(f"{name}: {title} (standardised; lower is better)", fontsize=9)
            ax.grid(axis="x", alpha=0.3)
        row[0].legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _subsample(data: Any, rows: int) -> Any:
    import dataclasses

    return dataclasses.replace(data, x_train=data.x_train[:rows], y_train=data.y_train[:rows])


def _report(
    cells, datasets, methods, splits, quick, seed, cfg, requested=None, rebuilt=False, first_split=0
) -> dict[str, Any]:
    requested = list(methods) if requested is None else list(requested)
    aliased = {ALIASES[m]: m for m in requested if m in ALIASES}  # e.g. {"nuts": "hmc"}
    cmd = (
        f"bnnkit bench uci --datasets {','.join(datasets)} --methods {','.join(requested)} --splits {splits}"
        + (f" --first-split {first_split}" if first_split else "")
        + (" --quick" if quick else "")
        + (" --tune" if cfg.get("tune") else "")
        + (f" --seed {seed}" if seed else "")
    )
    sg_run = {m: cfg["step_size"][m] for m in methods if m in SG_METHODS}
    scaled = (
        f" (for Boston's {cfg['step_rows']} training rows; on N > {cfg['step_rows']} rows, with "
        f"r = {cfg['step_rows']}/N, SGLD's x r, SGHMC's x sqrt(r) with the friction / sqrt(r))"
    )
    if not sg_run:
        step_note = ""
    elif cfg.get("tune"):
        t = cfg["tune"]
        step_note = (
            f"SG-MCMC step sizes: chosen per split from {t['factors']} x the defaults {sg_run}{scaled} by "
            f"chains ({cfg['burn_in'] if t['burn_in'] is None else t['burn_in']} burn-in, {t['draws']} draws, "
            "2 chains) on 80/20 of the training "
            "rows: the lowest held-out NLL among the settings that stayed finite; the chosen values are in "
            "the CSV/JSON (`step_size`), each cell's tuning table in the JSON and uci_cells.jsonl (`tuning`)."
        )
    else:
        step_note = f"SG-MCMC step sizes: fixed at {sg_run}{scaled} (chosen on Boston split 0; `--tune` chooses them per split)."
    vi_run = [m for m in methods if m in VI_METHODS]
    vi_note = (
        "VI baselines: "
        + ", ".join(
            f"{m} {cfg[m]['epochs']} epochs (at most {cfg[m]['max_steps']:,} optimiser steps"
            + (" per member)" if m == "ensemble" else ")")
            for m in vi_run
        )
        + "; the epochs run are in the CSV/JSON (`epochs`)."
        if vi_run and not quick
        else ""
    )
    summary: dict[str, Any] = {}
    lines = [
        f"# UCI regression ({'quick mode: a smoke test, not results' if quick else 'full protocol'})",
        "",
        f"Command: `{cmd}`; split s uses seed {seed} + s. Mean +- standard error over "
        + (
            "the splits present (see below)."
            if rebuilt
            else f"{splits - first_split} split(s)"
            + (f" ({first_split}-{splits - 1})." if first_split else ".")
        ),
        "RMSE/NLL in standardised units (the paper's scale) and in original units. Paper: Table 2/3 of",
        "Wu, Xuan & Lu (mean +- sd over their 10 random splits; their step sizes, thinning and noise",
        "model are unknown, so a difference may come from protocol, not method).",
        *[
            f"`{a}` is an alias of `{t}`: the gold standard is run with NUTS (full-batch No-U-Turn HMC, "
            f"{cfg['nuts']['warmup']} warm-up steps, {cfg['nuts']['draws']} draws, tree depth <= "
            f"{cfg['nuts']['max_tree_depth']}); its rows read `{a} (NUTS)`."
            for t, a in aliased.items()
        ],
        *([step_note] if step_note else []),
        *([vi_note] if vi_note else []),
        *(
            [
                "Rebuilt from the `uci_cells.jsonl` of this command (or of a run that stopped before it "
                "finished): the rows "
                "average the splits present, "
                + "; ".join(
                    f"{resolve_uci_name(d)} {sorted({c['split'] for c in cells if c['dataset'] == resolve_uci_name(d)})}"
                    for d in datasets
                )
                + " (the last split may lack some methods)."
            ]
            if rebuilt
            else []
        ),
        "",
        "| dataset | method | RMSE (std.) | paper RMSE | NLL (std.) | paper NLL | RMSE (orig.) | NLL (orig.) | s/split |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for ds in datasets:
        name = resolve_uci_name(ds)
        for m in methods:
            label = _method_label(m, aliased)  # every row of a method reads the same
            every = [c for c in cells if c["dataset"] == name and c["method"] == m]
            # A chain that diverged gives non-finite predictions: count it, average the others.
            sel = [c for c in every if math.isfinite(c["rmse_std"]) and math.isfinite(c["nll_std"])]
            diverged = len(every) - len(sel)
            if not every:  # a stopped run that never reached this method
                summary.setdefault(name, {})[m] = {"finished_splits": 0}
                lines.append(f"| {name} | {label} | no finished split | - | - | - | - | - | - |")
                continue
            if not sel:
                summary.setdefault(name, {})[m] = {"diverged": diverged}
                lines.append(
                    f"| {name} | {label} | diverged in all {diverged} split(s) | - | - | - | - | - | - |"
                )
                continue
            stats = {
                k: _mean_se([c[k] for c in sel]) for k in ("rmse_std", "nll_std", "rmse", "nll", "seconds")
            }
            stats["diverged"] = diverged
            summary.setdefault(name, {})[m] = stats
            p_r = PAPER["rmse"].get(name, {}).get(m)
            p_n = PAPER["nll"].get(name, {}).get(m)

            def f(t):
                return f"{t[0]:.3f} +- {t[1]:.3f}" if t[1] == t[1] else f"{t[0]:.3f}"

            if diverged:
                label += f" ({diverged} of {len(every)} splits diverged, not averaged)"
            lines.append(
                f"| {name} | {label} | {f(stats['rmse_std'])} | {f'{p_r[0]:.2f} +- {p_r[1]:.2f}' if p_r else '-'} | "
                f"{f(stats['nll_std'])} | {f'{p_n[0]:.2f} +- {p_n[1]:.2f}' if p_n else '-'} | "
                f"{f(stats['rmse'])} | {f(stats['nll'])} | {stats['seconds'][0]:.0f} |"
            )
    protocol = {k: v for k, v in cfg.items()}
    return {
        "benchmark": "uci_regression",
        "command": cmd,
        "methods": list(methods),
        "aliases": {a: t for t, a in aliased.items()},
        "quick": quick,
        "protocol": protocol,
        "summary": summary,
        "cells": cells,
        "markdown": "\n".join(lines) + "\n",
        "rebuilt_from_cells": rebuilt,
    }
