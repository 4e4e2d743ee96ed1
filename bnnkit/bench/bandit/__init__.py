"""The mushroom contextual bandit (Blundell et al. 2015; the functional SG-MCMC paper): each
method's Thompson sampling agent (:mod:`bnnkit.decisions`) or greedy baseline plays 8124 mushrooms,
eat or reject, and the report gives the cumulative expected regret against the oracle.  Modules:
:mod:`~bnnkit.bench.bandit.protocol` (the frozen :data:`DEFAULTS`, the reward and regret rules),
:mod:`~bnnkit.bench.bandit.agents`, :mod:`~bnnkit.bench.bandit.runner` and
:mod:`~bnnkit.bench.bandit.report`; the protocol in words: ``docs/bandit_protocol.md``.
"""

# The public names, imported by the CLI, the tests and experiments/.
from .agents import hmc_like, make_agent  # noqa: F401
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
    RETIRED,
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
from .runner import command_line, play, public_record, run_bandit, same_run  # noqa: F401
