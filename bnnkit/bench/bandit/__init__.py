"""Mushroom contextual bandit (Blundell et al. 2015; functional SG-MCMC paper; docs/fsgmcmc_design.md 9.4).

Environment (the paper's rule): 8124 UCI mushrooms, the context a 117-column one-hot of their 22
attributes, actions eat / reject.  Eating an edible mushroom gives +5, a poisonous one -35 with
probability ``p`` (else +5), rejecting 0; reward patterns ``p`` in {0.4, 0.5, 0.6}.  Every
interaction draws a mushroom uniformly, and for one seed every method and pattern sees the same
mushrooms and poison outcomes (common random numbers).  The tables and curves give the cumulative
*expected* regret against the oracle that eats exactly the edible mushrooms.

Agents: Thompson sampling with one posterior draw per decision (SGLD, fSGLD, SGHMC, fSGHMC, Bayes
by Backprop, FBNN, last-layer Laplace, ``bnnkit.fit``) and epsilon-greedy MAP baselines, all on one
MLP over the context and a one-hot action.  Every choice where the paper is silent is a key of
:data:`DEFAULTS` (``config=`` overrides it), described in ``docs/bandit_protocol.md`` and stated in
``protocol`` of each ``bandit.json``.

Outputs in ``out``: ``bandit_p<p>.png`` per pattern, ``bandit.json``, ``bandit.csv``, ``bandit.md``
and ``bandit_runs.jsonl`` (each run appended as it finishes: ``resume=True`` plays only the runs
not in it, ``from_runs`` rebuilds the report from such files).

Modules: :mod:`~bnnkit.bench.bandit.protocol` (constants, the frozen, versioned :data:`DEFAULTS`
and :data:`PROTOCOL`, reward and regret rules, environment), :mod:`~bnnkit.bench.bandit.agents`,
:mod:`~bnnkit.bench.bandit.runner` (:func:`play`, :func:`run_bandit`, the records) and
:mod:`~bnnkit.bench.bandit.report`.
"""

# The public names, imported by the CLI, the tests and experiments/.
from .agents import BothActionPoints, Buffer, attribute_blocks, both_actions, hmc_like, make_agent  # noqa: F401
from .protocol import (  # noqa: F401
    DEFAULTS,
    EAT,
    EDIBLE_REWARD,
    METHODS,
    PATTERNS,
    POISON_REWARD,
    PROTOCOL,
    QUICK,
    QUICK_STEPS,
    REJECT,
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
from .runner import command_line, play, public_record, run_bandit, same_run, split_values  # noqa: F401
