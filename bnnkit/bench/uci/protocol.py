"""The UCI regression protocol: one frozen, versioned config of every constant a cell depends on.

Protocol (bnnkit's defaults where the functional SG-MCMC paper is silent; the report states
every one):

- data: the standard Hernandez-Lobato & Adams splits (90/10), the first ``splits`` of them (or the
  splits of the user's own UCI-layout folder or arrays); inputs and targets standardised with
  training statistics;
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
- sghmc and fsghmc (protocol 4, the new default; the ``adaptive`` table): scale-adapted SGHMC
  (:class:`~bnnkit.sgmcmc.AdaptiveSGHMC`, eps ``3e-3``, the preconditioner estimated in the burn-in
  and then frozen), the noise precision sampled with the weights, 4 vectorised chains, each warm
  started by a MAP phase (Adam from PyTorch's default initialisation drawn from the chain's
  generator, ``map_init(start="fan_in")``, on the gradient the sampler sees, early-stopped on a
  held-out 10 % of the training rows, at most ``map_max_steps`` steps), then ``burn_in``
  steps and draws thinned by ``thin`` until the function-space R-hat at up to ``check_inputs``
  test inputs (inputs only) is at most ``rhat`` with bulk ESS at least ``ess``, checked every
  ``min_draws`` draws per chain from ``min_draws`` on (so at least 4 x 25 = 100 draws), or
  ``draws`` per chain are spent (:class:`~bnnkit.diagnostics.FunctionSpaceConvergence`); one
  setting for every set (no N scaling, no tuning).  sghmc has the N(0, 1) weight prior, fsghmc
  the fitted GP prior in its Vecchia form (``prior_form``: :class:`~bnnkit.functional.Vecchia`,
  the same measurement points as protocol 3's);
- sgld and fsgld (protocol 5): the same table with preconditioned SGLD
  (:class:`~bnnkit.sgmcmc.PreconditionedSGLD`, RMSprop decay ``sgld_alpha``, step
  ``sgld_step_size / N``) in place of scale-adapted SGHMC, the same priors as sghmc / fsghmc
  (protocol 4 ran them by protocol 3's recipe, below);
- csgld (protocol 7): cyclical pSGLD (Zhang et al. 2020) from the same MAP warm starts, with the
  same posterior and stopping rule: a cosine cycle of ``cyclical_cycle`` steps whose peak step
  ``cyclical_peak / N`` kicks each chain out of its mode, the first ``cyclical_exploration`` of
  each cycle without noise or draws, one cycle of burn-in, draws thinned by ``cyclical_thin``
  (at most ``cyclical_draws`` per chain, the rule checked every ``cyclical_min_draws``): the
  sampler whose chains can agree in function space (docs/sgmcmc_diagnosis.md).  With
  ``cyclical_gibbs_every`` set (:func:`gibbs_csgld_protocol`, an experiment, not the stock
  recipe) it also draws the noise precision by Gibbs every that many steps; its chains then run
  one at a time (a vectorised target has no conjugate updates), so they run the whole budget and
  the R-hat and ESS are measured at the end; protocol 9 (the default) gives it a ladder of peaks,
  ``cyclical_ladder``: the cell runs them in turn, from the same warm starts and seed, and keeps the
  first whose chains agree, function-space R-hat at most ``rhat`` when the run ended (the ESS
  target only ends a run early; if none agrees, the one with the lowest R-hat), so the
  peak is the smallest that converges on that split, chosen without test labels; its seconds are
  every rung's;
- sghmc (protocol 10, the default): cyclical scale-adapted SGHMC on the same cycles as csgld
  (:class:`~bnnkit.sgmcmc.AdaptiveSGHMC` on a :class:`~bnnkit.sgmcmc.CosineCycle` of
  ``cyclical_cycle`` steps, the mass re-estimated where a cycle explores over at most a window of
  steps and frozen where it samples), climbing ``cyclical_sghmc_ladder``, a ladder of (peak eps,
  window) rungs, by csgld's rule (the first whose chains agree, else the lowest R-hat); None
  (protocols 4-9): the constant step ``step_size``;
- asghmc: protocol 3's scale-adapted SGHMC cell (eps 3e-2, cold start from a prior draw),
  kept for comparison;
- nuts: full-batch NUTS (the gold standard on small sets), N(0, 1) prior, the noise precision
  sampled; 4 chains of 25 draws, each after its own 300 warm-up transitions (protocols 3-5: one
  chain of 100), the function-space R-hat / ESS of the chains at the first 100 test inputs
  recorded as the adaptive cells' are (reported, not a stopping rule); ``hmc`` is accepted as
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
units.

Every constant above is a field of :class:`UCIProtocol`; :data:`FULL_PROTOCOL` is the bench's,
:data:`QUICK_PROTOCOL` its smoke test.  Its ``version`` is written into every cell (under the
key ``protocol``, the name cells have carried since protocol 2), and ``--resume`` /
``--from-cells`` use only cells of the version being run, so a change of a constant that changes a
cell's numbers must come with a new version.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ...core.errors import BnnkitError
from ..methods import MOMENTUM, methods_of

METHODS = (
    "default",
    "sgld",
    "csgld",
    "sghmc",
    "asghmc",
    "fsgld",
    "fsghmc",
    "nuts",
    "bbb",
    "fbnn",
    "mcdropout",
    "ensemble",
    "laplace",
)
# Other names accepted by --methods: the issue calls the gold standard "hmc"; what runs is NUTS.
ALIASES = {"hmc": "nuts"}
SG_METHODS = methods_of("sg", "fsg")  # sgld, csgld, sghmc, fsgld, fsghmc
VI_METHODS = methods_of("vi")  # bbb, fbnn, mcdropout, ensemble

# The version of FULL_PROTOCOL.  Raised whenever a default changes what a cell's numbers are, so that
# --resume never mixes cells of two protocols.  2: GP fit without repeated (x, y) rows, SG-MCMC steps
# scaled to N, VI step cap.  3: the GP fit's 1000-row subset (sets with more training rows) drawn
# from a generator seeded with seed + split; protocol 2 drew it from torch's global RNG, which this
# torch seeds anew in every process, so those cells could not be reproduced.  Where 1000 more rows
# remain (kin8nm, protein; not wine) the fit also starts from the median distance and keeps the start
# that predicts them best.  A cell written before the key existed counts as protocol 1.  4: sghmc and
# fsghmc are scale-adapted SGHMC from MAP warm starts with a convergence-based length (the
# ``adaptive`` table; fsghmc with the Vecchia form of its GP prior); the other methods' recipes are
# protocol 3's, so their protocol-3 cells are what protocol 4 would give.  5: sgld and fsgld join
# the ``adaptive`` table as preconditioned SGLD (pSGLD) from the same MAP warm starts, sampled noise
# and convergence-based length; protocol 4's sghmc / fsghmc cells and the others' protocol-3 cells
# are what protocol 5 gives.  6: nuts runs 4 chains of 25 draws each (was one chain of 100), the
# draws the SG-MCMC issue's protocol asks of every sampler (>= 100 across >= 4 chains), and records
# the function-space R-hat and ESS of its chains at the test inputs as the adaptive cells do.  7: a
# new method, csgld (cyclical pSGLD from the same MAP warm starts, the ``cyclical_*`` fields of the
# ``adaptive`` table); every other method's cells are protocol 6's.  8 is not a stock protocol: it
# is :data:`GIBBS_CSGLD_VERSION`, the experiment of experiments/uci_csgld_gibbs.py (csgld with Gibbs
# draws of the noise precision), whose cells carry it; it did better on NLL on yacht and energy and
# worse on R-hat, RMSE and Boston's NLL, so the stock csgld stays protocol 7's.  9: csgld climbs a
# ladder of peaks (``cyclical_ladder``, 0.02 -> 0.05 -> 0.1) and keeps the first whose chains agree,
# R-hat <= ``rhat`` (the smallest converging peak, chosen without test labels; on split 0 it was
# 0.02 on yacht and energy, 0.05 on Boston and concrete, 0.1 on wine and kin8nm, and NLL rose above
# it); every other method's cells are protocol 7's (and so 6's).  10: sghmc is cyclical scale-adapted
# SGHMC climbing ``cyclical_sghmc_ladder`` (docs/sgmcmc_diagnosis.md, "Cyclical scale-adapted SGHMC":
# on split 0 a rung of it converged on all seven sets, at a better NLL than csgld on six); every
# other method's cells are protocol 9's.
PROTOCOL = 10
GIBBS_CSGLD_VERSION = 8
# The experiment of experiments/uci_fit_rungs.py, not a stock protocol: protocol 10 with sghmc running
# every rung of its ladder, recording how each fits, and keeping among the rungs whose chains agree the
# one that fits the training rows best (:func:`fit_rungs_protocol`), because the first converged rung
# fit badly on some splits (Boston 7 and 8: test NLL 2.55 and 3.28 against a median of 2.23).  On
# Boston, yacht, energy and concrete it moved NLL by less than one s.e. for three runs a cell, and even
# the rung of best test NLL would gain about one s.e. (docs/uci_results.md), so the stock sghmc stays
# protocol 10's.
FIT_RUNGS_VERSION = 11
# the versions :func:`stock_protocol` builds (``--protocol``)
STOCK_VERSIONS = (3, 4, 5, 6, 7, 9, PROTOCOL)
# The methods each version changed (the cells of the version before are not its cells).
CHANGED_IN = {
    4: frozenset({"sghmc", "fsghmc"}),
    5: frozenset({"sgld", "fsgld"}),
    6: frozenset({"nuts"}),
    7: frozenset({"csgld"}),
    8: frozenset({"csgld"}),  # the Gibbs experiment (not a stock protocol): its cells are its own
    9: frozenset({"csgld"}),
    10: frozenset({"sghmc"}),
    11: frozenset({"sghmc"}),  # the rung-by-fit experiment (not a stock protocol): its cells are its own
}
# The versions that moved methods into the ``adaptive`` table (6 changed nuts, which it does not run).
_JOINED_ADAPTIVE = (4, 5, 7)
# Methods a version introduced: earlier versions have no recipe for them.
INTRODUCED_IN = {"csgld": 7}


def adaptive_methods(version: int) -> frozenset[str]:
    """The methods the ``adaptive`` table runs under protocol ``version``."""
    return frozenset().union(*(CHANGED_IN[v] for v in _JOINED_ADAPTIVE if v <= version))


def unchanged_since(method: str, old: int, new: int) -> bool:
    """Whether ``method``'s recipe is the same in protocol ``new`` as in ``old`` (``old <= new``);
    False for a version past :data:`PROTOCOL`, whose changes the bench does not know."""
    if new > PROTOCOL:
        return False
    return not any(method in CHANGED_IN.get(v, ()) for v in range(old + 1, new + 1))


GP_FIT_MAX_POINTS = 1000
# Sets whose training splits have at most GP_FIT_MAX_POINTS rows: the fit takes every row, draws no
# subset, and their protocol-2 cells are protocol-3 cells (tests/bench/test_uci.py checks the sizes).
NO_GP_SUBSET = frozenset({"bostonHousing", "concrete", "energy", "yacht"})

# --tune: 2 chains each.  "rule" names how a step is chosen (see _tuned_step_size); --resume reuses a
# tuned cell only under the same rule.  burn_in None: the run's own burn-in (the protocol's burn_in).
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


def _frozen(value: Any) -> Any:
    """A read-only copy of nested dicts and lists (mapping proxies and tuples), so that a frozen
    protocol cannot be changed through one of its tables."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    return value


def _thawed(value: Any) -> Any:
    """Plain dicts and lists again (what the runner, JSON and the cells hold)."""
    if isinstance(value, Mapping):
        return {k: _thawed(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thawed(v) for v in value]
    return copy.copy(value)


def _table(**kw: Any) -> Any:
    return field(default_factory=lambda: _frozen(kw))


@dataclass(frozen=True)
class UCIProtocol:
    """Every constant of the UCI benchmark's protocol (see the module docstring), frozen.

    ``version`` goes into every cell; change it with any constant that changes a cell's numbers,
    or ``--resume`` and ``--from-cells`` would mix the old cells with the new.  The tables (step
    sizes, one per method family) are read-only mappings; :meth:`config` gives them as the plain
    dicts the runner reads, :meth:`replace` a protocol with some fields changed.
    """

    version: int = PROTOCOL
    hidden: int = 100
    batch_size: int = 32
    burn_in: int = 4000
    draws: int = 15
    thin: int = 50
    # Chosen on Boston split 0 (bnnkit.tune-style sweep); fixed-noise runs needed ~10x smaller steps.
    step_size: Mapping[str, float] = _table(sgld=3e-4, sghmc=3e-3, fsgld=3e-4, fsghmc=3e-3)
    step_rows: int = 455  # Boston's training rows: the steps above are for that N (default_step_size)
    friction: float = 10.0
    # draws per chain; every chain runs its own warm-up (300 transitions, as the one chain of
    # protocols 3-5).  check_inputs: the function-space R-hat / ESS are reported at that many test
    # inputs, the adaptive table's measure (they do not stop the run).
    nuts: Mapping[str, Any] = _table(warmup=300, draws=25, max_tree_depth=7, chains=4, check_inputs=100)
    # Scale-adapted SGHMC (docs/sgmcmc_diagnosis.md): one step for every set (no N scaling, no
    # tuning), 4 vectorised chains x 100 draws, the preconditioner estimated in the burn-in.
    asghmc: Mapping[str, Any] = _table(step_size=3e-2, burn_in=4000, draws=100, thin=50, chains=4)
    # Protocol 4's sghmc and fsghmc (docs/sgmcmc_diagnosis.md, "protocol 4").  eps 3e-3: from the
    # same MAP start on yacht split 0 the sampled noise sd went from 0.05 to 0.20 (standardised)
    # within 1,500 steps at eps 3e-2, to 0.063 at 1e-2 and stayed at 0.052 at 3e-3 (test RMSE 0.107
    # at 3e-2 against 0.034).  The MAP phase: Adam on 90 % of the rows, stopped early on the other
    # 10 % (map_init's holdout: a fixed length overfits noisy sets and underfits smooth ones).
    adaptive: Mapping[str, Any] | None = _table(
        step_size=3e-3,
        mdecay=0.05,
        map_max_steps=20_000,
        map_holdout=0.1,
        map_patience=20,
        map_lr=1e-2,
        map_start="fan_in",
        burn_in=1000,
        draws=100,
        min_draws=25,
        thin=50,
        chains=4,
        rhat=1.1,
        ess=100,
        check_inputs=100,
        prior_form="vecchia",  # fsghmc's and fsgld's GP prior
        # sgld / fsgld (protocol 5): pSGLD's step per datum, eps = sgld_step_size / N (pSGLD's
        # drift G g is N times a unit-scale RMSprop direction).  1e-3: on split 0 with 3e-4 / 1e-3 /
        # 3e-3, test RMSE yacht 0.47 / 0.51 / 0.82, concrete 5.34 / 5.18 / 5.16, Boston 2.32 / 2.29.
        sgld_step_size=1e-3,
        sgld_alpha=0.99,
        # csgld (protocol 7): pSGLD (alpha sgld_alpha) on a cosine cycle of cyclical_cycle steps,
        # eps_t = (cyclical_peak / N) (cos(pi r_t) + 1) / 2; the first cyclical_exploration of each
        # cycle explores (no noise, no draws), one whole cycle is the burn-in, draws thinned by
        # cyclical_thin, at most cyclical_draws per chain, the stopping rule checked every
        # cyclical_min_draws.  a = 5e-2, L = 2,000: the setting that reached R-hat <= 1.1 on Boston
        # and concrete splits 0-4 at protocol 5's NLL (docs/sgmcmc_diagnosis.md); one setting for
        # every set, as the rest of the table.
        cyclical_peak=5e-2,
        # protocol 9: the peaks a csgld cell tries in turn from the same warm starts and seed,
        # keeping the first whose chains agree, R-hat <= rhat (none: the lowest R-hat); its cost
        # is every rung it ran.  None (protocol 7): cyclical_peak alone.
        cyclical_ladder=(2e-2, 5e-2, 1e-1),
        # protocol 10: sghmc's (peak eps, exploration window) rungs, tried in turn as csgld's peaks
        # are.  On split 0 (docs/sgmcmc_diagnosis.md) eps 0.05 with window 100 converged on yacht,
        # energy and kin8nm, window 1,000 on Boston and concrete, 0.07 with window 100 on wine and
        # protein.  None (protocols 4-9): the constant step_size.
        cyclical_sghmc_ladder=((5e-2, 100), (5e-2, 1000), (7e-2, 100)),
        cyclical_cycle=2000,
        cyclical_exploration=0.9,
        cyclical_draws=160,
        cyclical_thin=50,
        cyclical_min_draws=10,
        # k: a Gibbs draw of the noise precision every k steps, chains one at a time (None: the
        # precision moves with the weights; gibbs_csgld_protocol() sets 50)
        cyclical_gibbs_every=None,
    )
    # max_steps caps the optimiser steps on large sets (protein: 300 epochs would be 386k steps);
    # no set up to kin8nm reaches the cap, so their runs are the plain epoch budget.
    bbb: Mapping[str, Any] = _table(epochs=300, max_steps=100_000, lr=1e-2, draws=100)
    fbnn: Mapping[str, Any] = _table(
        epochs=100,
        max_steps=25_000,  # a step costs function_samples network passes
        lr=1e-2,
        lr_decay="cosine",
        draws=100,
        function_samples=20,
        uniform=32,
    )
    mcdropout: Mapping[str, Any] = _table(
        p=0.05, epochs=300, max_steps=100_000, lr=1e-2, lr_decay="cosine", draws=100
    )
    ensemble: Mapping[str, Any] = _table(
        members=5,
        epochs=300,
        max_steps=100_000,  # per member
        lr=1e-2,
        lr_decay="cosine",
        anchored=True,
        init="module",
    )
    # Laplace: a MAP by Adam with one ensemble member's budget (constant lr), KFAC GGN over all
    # weights (a full GGN of the 2 x 100 network would be an 11k x 11k matrix), prior precision
    # and noise by the Laplace evidence, the linearised (GLM) predictive in closed form.
    laplace: Mapping[str, Any] = _table(
        epochs=300, max_steps=100_000, lr=1e-2, subset="all", structure="kron", draws=100
    )
    gp_fit_steps: int = 300
    gp_fit_max_points: int = GP_FIT_MAX_POINTS
    # the samplers' likelihood: starting noise sd and the Gamma(shape, rate) prior of its precision
    noise_init: float = 0.5
    noise_prior: tuple[float, float] = (1.0, 0.1)
    # floor on the GP-fitted noise sd that the VI baselines use, fixed (standardised units)
    noise_floor: float = 0.01
    prior_scale: float = 1.0  # the N(0, prior_scale^2) weight prior of the samplers and VI baselines
    measurement_points: int = 1000  # fSG: all training inputs up to this many, else this many random
    tune: Mapping[str, Any] = field(default_factory=lambda: _frozen(TUNE))  # the grid of --tune
    max_rows: int | None = None  # quick mode: the first max_rows training rows only

    def __post_init__(self) -> None:
        # the tables are frozen however they were given (a plain dict through replace(), say)
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, _frozen(getattr(self, f.name)))
        _check_ladders(self.adaptive)

    def replace(self, **changes: Any) -> UCIProtocol:
        """This protocol with ``changes``; give it a new ``version`` if its cells differ."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise BnnkitError(f"UCIProtocol has no field(s) {unknown}; see bnnkit.bench.uci.UCIProtocol.")
        return dataclasses.replace(self, **changes)

    def config(self, tune: bool = False) -> dict[str, Any]:
        """The protocol as the plain dict the runner, ``uci.json`` and the tests read: every field,
        with ``"tune"`` the tuning grid when ``tune`` is on and None when it is off."""
        out = {f.name: _thawed(getattr(self, f.name)) for f in dataclasses.fields(self)}
        out["noise_prior"] = tuple(out["noise_prior"])
        out["tune"] = out["tune"] if tune else None
        return out


def _check_ladders(adaptive: Mapping[str, Any] | None) -> None:
    """Refuse a bad rung when the protocol is built, not when a cell reaches it (after its MAP
    phase, hours into a run)."""
    if not adaptive:
        return

    def positive(x: Any) -> bool:
        return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x > 0

    for peak in adaptive.get("cyclical_ladder") or ():
        if not positive(peak):
            raise BnnkitError(
                f"cyclical_ladder holds csgld's peaks (a in a / N), positive numbers; got {peak!r}. Try (0.02, 0.05, 0.1)."
            )
    for rung in adaptive.get("cyclical_sghmc_ladder") or ():
        ok = isinstance(rung, Sequence) and len(rung) == 2 and positive(rung[0])
        if not ok or isinstance(rung[1], bool) or not isinstance(rung[1], int) or rung[1] < 1:
            raise BnnkitError(
                "cyclical_sghmc_ladder holds sghmc's (peak eps, exploration window) rungs: a positive number and a "
                f"whole number of steps >= 1; got {rung!r}. Try ((0.05, 100), (0.05, 1000), (0.07, 100))."
            )
    choice = adaptive.get("rung_choice", "first")
    if choice not in ("first", "lppd"):
        raise BnnkitError(
            f"rung_choice is 'first' (the first rung whose chains agree) or 'lppd' (every rung runs; the converged "
            f"one that fits the training rows best), not {choice!r}."
        )


FULL_PROTOCOL = UCIProtocol()
QUICK = {
    "hidden": 20,
    "burn_in": 100,
    "draws": 5,
    "thin": 5,
    "nuts": {"warmup": 30, "draws": 5, "max_tree_depth": 4, "chains": 2, "check_inputs": 20},
    "asghmc": {"step_size": 3e-2, "burn_in": 100, "draws": 5, "thin": 5, "chains": 2},
    "adaptive": {
        "step_size": 3e-3,
        "mdecay": 0.05,
        "map_max_steps": 100,
        "map_holdout": 0.1,
        "map_patience": 20,
        "map_lr": 1e-2,
        "map_start": "fan_in",
        "burn_in": 50,
        "draws": 8,
        "min_draws": 4,
        "thin": 5,
        "chains": 2,
        "rhat": 1.1,
        "ess": 20,
        "check_inputs": 20,
        "prior_form": "vecchia",
        "sgld_step_size": 1e-3,
        "sgld_alpha": 0.99,
        "cyclical_peak": 5e-2,
        "cyclical_ladder": (2e-2, 5e-2, 1e-1),
        "cyclical_sghmc_ladder": ((5e-2, 100), (5e-2, 1000), (7e-2, 100)),
        "cyclical_cycle": 20,
        "cyclical_exploration": 0.5,
        "cyclical_draws": 8,
        "cyclical_thin": 2,
        "cyclical_min_draws": 4,
        "cyclical_gibbs_every": None,
    },
    "bbb": {"epochs": 5, "lr": 1e-2, "draws": 20},
    "fbnn": {"epochs": 2, "lr": 1e-2, "lr_decay": None, "draws": 20, "function_samples": 10, "uniform": 8},
    "mcdropout": {"p": 0.05, "epochs": 5, "lr": 1e-2, "lr_decay": None, "draws": 20},
    "ensemble": {"members": 3, "epochs": 5, "lr": 1e-2, "lr_decay": None, "anchored": True, "init": "module"},
    "laplace": {"epochs": 5, "lr": 1e-2, "subset": "all", "structure": "kron", "draws": 20},
    "gp_fit_steps": 30,
    "max_rows": 200,
    "tune": QUICK_TUNE,
}
# --quick: a smoke test of the pipeline (tiny network, short runs, 200 training rows), not results.
QUICK_PROTOCOL = FULL_PROTOCOL.replace(**QUICK)
# nuts before protocol 6: one chain of 100 draws (the quick one of 10).
_ONE_CHAIN_NUTS = {
    False: _frozen({"warmup": 300, "draws": 100, "max_tree_depth": 7}),
    True: _frozen({"warmup": 30, "draws": 10, "max_tree_depth": 4}),
}
# The full protocol as a dict (what the runner reads; "tune" None: no tuning).
DEFAULTS = FULL_PROTOCOL.config()


def stock_protocol(quick: bool, version: int = PROTOCOL) -> UCIProtocol:
    """The bench's protocol: :data:`QUICK_PROTOCOL` for ``--quick``, else :data:`FULL_PROTOCOL`;
    ``version=9`` gives protocol 9 (sghmc at a constant step), ``version=7`` protocol 7 (csgld at ``cyclical_peak`` alone, no ladder), ``version=6``
    protocol 6 (the same recipes, without csgld), ``version=3`` protocol 3
    (no ``adaptive`` table: sghmc and fsghmc run plain (f)SGHMC at the step-size table), which rebuilds and extends the protocol-3 tables of docs/uci_results.md;
    ``version=4`` protocol 4 (sgld and fsgld at protocol 3's recipe); ``version=5`` protocol 5 (nuts
    one chain of 100 draws, as in every version before 6).  Which methods the table runs is
    :func:`adaptive_methods` of the version."""
    stock = QUICK_PROTOCOL if quick else FULL_PROTOCOL
    if version == PROTOCOL:
        return stock
    # protocol 9: sghmc at its constant step (no cycles)
    stock = stock.replace(adaptive={**stock.config()["adaptive"], "cyclical_sghmc_ladder": None})
    if version == 9:
        return stock.replace(version=9)
    # protocol 7: csgld at cyclical_peak alone (no ladder)
    stock = stock.replace(adaptive={**stock.config()["adaptive"], "cyclical_ladder": None})
    if version == 7:
        return stock.replace(version=7)
    if version == 6:
        return stock.replace(version=6)
    if version in (5, 4):
        return stock.replace(version=version, nuts=_ONE_CHAIN_NUTS[quick])
    if version == 3:
        return stock.replace(version=3, adaptive=None, nuts=_ONE_CHAIN_NUTS[quick])
    raise BnnkitError(f"the UCI bench runs protocol {PROTOCOL}, 9, 7, 6, 5, 4 or 3, not {version!r}.")


def gibbs_csgld_protocol(quick: bool = False, every: int | None = None) -> UCIProtocol:
    """The stock protocol with csgld drawing the noise precision by Gibbs every ``every`` steps
    (default 50; 5 with ``quick``), under version :data:`GIBBS_CSGLD_VERSION`: the experiment of
    ``experiments/uci_csgld_gibbs.py`` (docs/uci_results.md, "csgld with Gibbs noise draws")."""
    stock = stock_protocol(quick, 7)  # the experiment ran protocol 7's csgld (one peak)
    k = every if every is not None else (5 if quick else 50)
    return stock.replace(
        version=GIBBS_CSGLD_VERSION, adaptive={**stock.config()["adaptive"], "cyclical_gibbs_every": k}
    )


def fit_rungs_protocol(quick: bool = False) -> UCIProtocol:
    """The stock protocol with sghmc choosing its rung by fit among the rungs that converge, under
    version :data:`FIT_RUNGS_VERSION`: every rung of ``cyclical_sghmc_ladder`` runs and records its
    fit, and the cell keeps the converged rung (R-hat <= ``rhat``) of highest in-sample log
    pointwise predictive density on the training rows (no test labels); none converged: the
    lowest R-hat, as protocol 10.  The experiment of ``experiments/uci_fit_rungs.py``; it costs every
    rung of the ladder.  (PSIS-LOO, recorded per rung too, is not the rule: on yacht its Pareto k is
    above 0.7 on most rows.)"""
    stock = stock_protocol(quick)
    return stock.replace(version=FIT_RUNGS_VERSION, adaptive={**stock.config()["adaptive"], "rung_choice": "lppd"})


def check_protocol(protocol: UCIProtocol, quick: bool) -> None:
    """Refuse a changed protocol under a stock version (the bench's or an older one it still runs):
    its cells would pass for the bench's."""
    if protocol.version not in STOCK_VERSIONS:
        return
    stock = stock_protocol(quick, protocol.version)
    if protocol != stock:
        changed = sorted(
            f.name for f in dataclasses.fields(stock) if getattr(protocol, f.name) != getattr(stock, f.name)
        )
        raise BnnkitError(
            f"this protocol differs from the bench's {'quick' if quick else 'full'} protocol in {changed} but "
            f"keeps its version {stock.version}: give it another version (protocol.replace(version=...)), so "
            "its cells are never mixed with the bench's."
        )


def canonical_methods(methods: Sequence[str], known: Sequence[str], version: int | None = None) -> list[str]:
    """``methods`` with aliases resolved (``hmc`` -> ``nuts``) and repeats dropped; unknown names
    refused, and so are methods that protocol ``version`` (when given) predates."""
    out: list[str] = []
    for m in methods:
        c = ALIASES.get(m, m)
        if c not in known:
            names = ", ".join([*known, *(a for a, t in ALIASES.items() if t in known)])
            raise BnnkitError(f"unknown method {m!r}; choose from {names}.")
        if version is not None and version < INTRODUCED_IN.get(c, 0):
            raise BnnkitError(
                f"method {m!r} is new in protocol {INTRODUCED_IN[c]}; protocol {version} has no recipe for it "
                f"(run it with --protocol {INTRODUCED_IN[c]} or later, or leave it out)."
            )
        if c not in out:
            out.append(c)
    return out


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


def _batches_per_epoch(n: int, cfg: dict[str, Any]) -> int:
    """Minibatches in one pass over ``n`` rows at the protocol's batch size."""
    return math.ceil(n / min(cfg["batch_size"], n))


def _epochs(c: dict[str, Any], n: int, cfg: dict[str, Any]) -> int:
    """``c["epochs"]``, fewer where that many would pass ``c["max_steps"]`` optimiser steps."""
    per_epoch = _batches_per_epoch(n, cfg)
    cap = c.get("max_steps")
    return c["epochs"] if cap is None else max(1, min(c["epochs"], cap // per_epoch))
