"""Mushroom contextual bandit (Blundell et al. 2015; functional SG-MCMC paper; docs/fsgmcmc_design.md 9.4).

Environment (the paper's rule): 8124 UCI mushrooms, the context a 117-column one-hot of their 22
attributes, actions eat / reject.  Eating an edible mushroom gives +5, a poisonous one -35 with
probability ``p`` (else +5), rejecting 0; reward patterns ``p`` in {0.4, 0.5, 0.6}.  Every
interaction draws a mushroom uniformly, and for one seed every method and pattern sees the same
mushrooms and poison outcomes (common random numbers).  The tables and curves give the cumulative
*expected* regret against the oracle that eats exactly the edible mushrooms.

Agents: Thompson sampling with one posterior draw per decision (SGLD, fSGLD, SGHMC, fSGHMC, Bayes
by Backprop, FBNN, last-layer Laplace) and epsilon-greedy MAP baselines, all on one MLP over the
context and a one-hot action.  Every choice where the paper is silent is a key of :data:`DEFAULTS`
(``config=`` overrides it), described in ``docs/bandit_protocol.md`` and stated in ``protocol`` of
each ``bandit.json``.

Outputs in ``out``: ``bandit_p<p>.png`` per pattern, ``bandit.json``, ``bandit.csv``, ``bandit.md``
and ``bandit_runs.jsonl`` (each run appended as it finishes: ``resume=True`` plays only the runs
not in it, ``from_runs`` rebuilds the report from such files).

The package is split by what changes together (as :mod:`bnnkit.bench.uci`):
:mod:`~bnnkit.bench.bandit.protocol` (the constants, the frozen, versioned :data:`DEFAULTS` and
:data:`PROTOCOL`, the reward and regret rules, the environment), :mod:`~bnnkit.bench.bandit.agents`,
:mod:`~bnnkit.bench.bandit.runner` (:func:`play`, :func:`run_bandit`),
:mod:`~bnnkit.bench.bandit.records` and :mod:`~bnnkit.bench.bandit.report`.  The names below are
those the single module this package replaced exported (the tests, the CLI and scripts import
them from here).
"""

# The private helpers are re-exported too: the tests and scripts reach them as bnnkit.bench.bandit._name.
from . import agents, protocol, records, report, runner  # noqa: F401
from .agents import (  # noqa: F401
    BothActionPoints,
    Buffer,
    _BBBAgent,
    _FBNNAgent,
    _GreedyAgent,
    _LaplaceAgent,
    _sg_algorithm,
    _SGMCMCAgent,
    attribute_blocks,
    both_actions,
    hmc_like,
    make_agent,
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
from .records import public_record, same_run  # noqa: F401
from .report import COLOURS, _curve_index, _fmt_list, _mean_sd, _plot, _report  # noqa: F401
from .runner import _bar, _check_finite, _check_inputs, command_line, play, run_bandit, split_values  # noqa: F401

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
