"""Mushroom contextual bandit (Blundell et al. 2015; functional SG-MCMC paper; docs/fsgmcmc_design.md 9.4).

Environment (the paper's rule):

- 8124 UCI mushrooms, context = 117-column one-hot of the 22 attributes; actions eat / reject;
- rewards: eat an edible mushroom +5; eat a poisonous one -35 with probability ``p``, else +5;
  reject 0; reward patterns ``p`` in {0.4, 0.5, 0.6};
- the oracle eats exactly the edible ones (expected reward 5 for edible, 0 for poisonous);
- every interaction draws a mushroom uniformly at random.  The mushroom sequence and the uniform
  numbers behind the poison outcomes (``-35`` when ``u < p``) come from the environment generators
  of the seed alone, so for one seed every method and every pattern sees the same mushrooms
  (common random numbers: differences between methods are not differences in luck).

Regret: the curves and tables use the *expected* regret, ``E[oracle reward] - E[reward of the
chosen action]`` per interaction (5 for rejecting an edible mushroom, ``40 p - 5`` for eating a
poisonous one, 0 otherwise), which removes the coin-flip noise of the poison outcomes; the
realised regret (oracle reward minus the reward actually drawn) is kept in the JSON/CSV too.  For
``p < 1/8`` eating a poisonous mushroom has a positive expected reward, so "the oracle" is not
optimal there and the expected regret can decrease; the paper's patterns are all above 1/8.

Agent (bnnkit's choices where the paper is silent; the report lists every value in
:data:`DEFAULTS`, and ``config=`` overrides them):

- network: input = context + one-hot action (eat, reject), 119 columns; MLP with two hidden
  layers of ``hidden`` ReLU units (100, as Blundell et al.; 20 in quick mode) and one output, the
  predicted reward.  Likelihood: Gaussian with fixed noise ``noise = 0.25`` on rewards scaled by
  ``reward_scale = 1/20`` (targets +0.25, 0, -1.75; the noise is 5 reward units).  A noise of 1
  (20 units, the spread of a poisonous "eat") made every Thompson agent explore far too long:
  the +5 of an edible mushroom is then a quarter of a noise standard deviation;
- Thompson sampling with one posterior draw per decision: before each decision the agent takes
  ``updates = 2`` sampler / optimiser steps (``bbb_updates = 8`` for bbb, see below) on
  minibatches of ``batch_size = 64`` rows drawn uniformly with replacement from the buffer of the
  last ``buffer = 4096`` interactions (all of them while fewer than 64), then predicts the
  reward of both actions with its current draw and takes the larger;
- the data size of the ``n / M`` minibatch scaling is the buffer size ``n``: the SG-MCMC agents
  sample ``posterior.with_num_data(n)`` (a posterior per size, built as the buffer grows), bbb and
  fbnn pass ``n`` to their ELBO terms;
- weight prior of sgld and bbb: N(0, 0.2^2) on the first layer, N(0, 0.1^2) on the others (about
  Neal's 1/sqrt(fan-in); the prior sd of the network output on mushrooms is then 0.50, 10 reward
  units);
- sgld: step size ``eps = min(2 lr sigma^2 / n, sgld_max_step)`` with ``lr = 0.5``: the drift is
  ``lr`` times the mean minibatch gradient of the half squared error whatever ``n``, and the cap
  keeps the first, nearly data-free steps stable against the prior's stiffness; the chain keeps
  its state across interactions and its current position is the Thompson draw;
- fsgld: the same updates (cap ``fsgld_max_step = 2e-4``: the GP term is stiffer) on a
  :class:`~bnnkit.functional.FunctionalPosterior` whose prior is an RBF GP on the reward output,
  zero mean, with *fixed* hyperparameters (fitting them would need data the agent does not
  have): isotropic lengthscale 2 (the squared distance of two inputs is 2 x the number of
  differing attributes, + 2 if the action differs: the prior correlation of "eat" and "reject"
  on one mushroom is 0.78, of two mushrooms differing in 3 attributes 0.47), outputscale 0.25
  (the same function scale as the weight prior above), relative jitter 1e-2.  Measurement points
  (:class:`BothActionPoints`): 16 minibatch contexts and 16 random mushrooms (each attribute's
  level uniform), each with both actions.  A Gaussian weight term ``fsgld_weight_scale = 0.2``
  keeps the target proper: without it (the paper's setting) or with 1.0 the weights drift along
  the network's flat directions over the 20,000 steps of a run (weight norm 80-110 after 2000
  interactions against 24 for sgld) and the predictions for new mushrooms drift with them.
  ``fsgld_weight_term = "sgld"`` (default ``"isotropic"``: the N(0, fsgld_weight_scale^2) term
  above) makes the weight term sgld's weight prior instead (``prior_scales``: 0.2 on the first
  layer, 0.1 on the others), so the fSG agents' target is sgld's times the GP term (fbnn's ELBO
  has no weight term and is unchanged by it).  The
  diagnosis in ``docs/bandit_results.md`` (``experiments/bandit_probe.py``): the GP term is weak
  against the data (its gradient 1/8-1/65 of the likelihood's, and switching it off by an
  outputscale of 100 leaves the regret unchanged), so the weight term decides how the fSG agents
  explore, and the isotropic 0.2 one lets them eat more poisonous mushrooms than sgld.
  ``gp_action_lengthscale`` (default None: the action columns share ``gp_lengthscale``) gives the
  two action columns a lengthscale of their own (an ARD kernel): 0.5 makes "eat" and "reject" of
  one mushroom nearly independent a priori (correlation e^-4 = 0.02);
- sghmc / fsghmc: SGHMC on sgld's posterior and fSGHMC on fsgld's, in learning-rate form with
  momentum decay ``a = sghmc_momentum_decay = 0.1`` and learning rate ``a eps / 2`` for the step
  ``eps`` of sgld / fsgld, so the settled momentum moves the chain as far per step as (f)SGLD;
  the momentum is kept across interactions;
- ``sg_recipe = "adaptive"`` (default ``"plain"``, everything above) gives the four SG agents the
  UCI bench's SG recipe instead: (f)SGLD is preconditioned SGLD (RMSprop decay ``psgld_alpha =
  0.99``) at ``eps = psgld_step / n`` with ``psgld_step = 1e-3``, (f)SGHMC scale-adapted SGHMC at
  ``asghmc_step = 3e-3``, ``asghmc_mdecay = 0.05``, whose mass estimate keeps adapting for the
  whole run (the target changes with every interaction, so there is no end of warm-up at which to
  freeze it).  The noise stays fixed at ``noise`` for every agent (sampling it would give the SG
  agents another model than the others');
- bbb: Bayes by Backprop, mean-field Gaussian q over the same network and prior as sgld, Adam
  (lr 3e-3) on ``-(n/M E_q[log p(batch)] - KL) / n`` with the local reparameterisation,
  ``init_sigma = 0.01``, ``bbb_updates = 8`` steps per interaction (with 2, q lags the data and
  the agent stays near random: regret 6100 against 2740 after 2000 interactions on seed 0); the
  Thompson draw is one draw of all the weights from q;
- fbnn: functional VI (:class:`~bnnkit.vi.FBNN`, Sun et al. 2019) with fsgld's GP prior at fsgld's
  measurement points, ``fbnn_function_samples = 10`` function draws per step for the spectral
  Stein score, and bbb's optimiser, updates, initial q and Thompson draw (one draw of all the
  weights from q); 35-60 ms per interaction (8 updates) with other jobs on the machine, the
  slowest agent.  With this fixed GP prior it keeps eating poisonous mushrooms to the end and has
  the highest regret of all agents (``docs/bandit_results.md``);
- greedy0 / greedy1 / greedy5: the same network from the same initial weights trained by Adam
  (lr 3e-3, weight decay 1e-4) on the mean squared error (MAP), ``updates`` steps per interaction,
  epsilon-greedy with epsilon 0, 1%, 5%.

Randomness: per seed, the environment generators ``make_generator(seed, 0)`` (mushrooms) and
``make_generator(seed, 1)`` (poison outcomes), and one agent generator per method
``make_generator(seed, 2 + METHODS.index(method))``; the network's initial weights (the same for
every method of a seed) come from PyTorch's default initialisation under the global CPU RNG seeded
with ``seed`` inside a fork (:func:`~bnnkit.core.random.global_rng_seeded`), so the caller's
random state is left untouched.  A second run of the same command gives the same numbers (same
machine, same thread count), and a run of ``k`` interactions is the first ``k`` interactions of a
longer one.

Outputs in ``out``: ``bandit_p<p>.png`` per pattern (mean cumulative expected regret over seeds
with a min-max band), ``bandit.json`` (protocol, command, per-run final regrets, curves at 200
interaction counts, wall-clock times), ``bandit.csv`` (one row per run), ``bandit.md`` (final
regret mean +- sd per method and pattern, with the command) and ``bandit_runs.jsonl`` (each run
with its configuration, appended as it finishes: a stopped command loses only the run in
progress, ``resume=True`` / ``--resume`` plays only the runs not in it, and ``from_runs`` /
``--from-runs`` rebuilds the report from such files, e.g. of commands run in parallel).

Runtime (one torch thread, a shared 2-core machine with another job beside it): milliseconds per
interaction sgld 0.8-1.2, each greedy agent 0.8-1.0, sghmc 1.7, fsgld 2.5, fsghmc 5.3 (the GP
kernel and its Cholesky factor at every step), bbb 5.5-6.4 and fbnn 35-60 (8 updates each).  The
full protocol (every method, 3 patterns x 3 seeds x 10,000 interactions) is about 1.5 hours of
one core, two thirds of it fbnn; methods and patterns can run as separate commands in parallel
and be joined with ``from_runs``.  Results and their reading: ``docs/bandit_results.md``.

The package is split by what changes together (as :mod:`bnnkit.bench.uci`):

- :mod:`~bnnkit.bench.bandit.protocol`: the constants, one frozen, versioned configuration
  (:data:`DEFAULTS`, read-only, and :data:`PROTOCOL`, the version every record carries), the
  reward and regret rules and the environment;
- :mod:`~bnnkit.bench.bandit.agents`: the agents, the buffer and the measurement points;
- :mod:`~bnnkit.bench.bandit.runner`: :func:`play` (one run) and :func:`run_bandit`;
- :mod:`~bnnkit.bench.bandit.records`: which record is the run a command plays;
- :mod:`~bnnkit.bench.bandit.report`: the markdown table, ``bandit.json`` and the plots.

The names below are those the single module this package replaced exported (the tests, the CLI
and scripts import them from here).
"""

# The private helpers are re-exported too: the tests and scripts reach them as bnnkit.bench.bandit._name.
from . import agents, protocol, records, report, runner  # noqa: F401
from .agents import (  # noqa: F401
    BothActionPoints,
    Buffer,
    _BBBAgent,
    _both_actions,
    _FBNNAgent,
    _GreedyAgent,
    _hmc_like,
    _LaplaceAgent,
    _make_agent,
    _sg_algorithm,
    _SGMCMCAgent,
    attribute_blocks,
)
from .protocol import (  # noqa: F401
    DEFAULTS,
    EAT,
    EDIBLE_REWARD,
    GREEDY_EPSILON,
    METHODS,
    PATTERNS,
    POISON_REWARD,
    PROTOCOL,
    QUICK,
    QUICK_PATTERNS,
    QUICK_SEEDS,
    QUICK_STEPS,
    REJECT,
    REJECT_REWARD,
    RUNS_FILE,
    SEEDS,
    STEPS,
    cumulative_regret,
    environment,
    expected_regret,
    expected_rewards,
    oracle_actions,
    plain_config,
    realised_rewards,
)
from .records import _public, _same_run  # noqa: F401
from .report import COLOURS, _curve_index, _fmt_list, _mean_sd, _plot, _report  # noqa: F401
from .runner import _bar, _check_finite, _check_inputs, _split, command_line, play, run_bandit  # noqa: F401

__all__ = [
    "DEFAULTS",
    "EAT",
    "METHODS",
    "PATTERNS",
    "PROTOCOL",
    "QUICK",
    "REJECT",
    "RUNS_FILE",
    "SEEDS",
    "STEPS",
    "BothActionPoints",
    "Buffer",
    "attribute_blocks",
    "command_line",
    "cumulative_regret",
    "environment",
    "expected_regret",
    "expected_rewards",
    "oracle_actions",
    "plain_config",
    "play",
    "realised_rewards",
    "run_bandit",
]
