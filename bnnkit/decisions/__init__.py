"""Decisions with a posterior: Thompson sampling agents for contextual bandits
(:mod:`~bnnkit.decisions.agents`) and what they learn from, a replay buffer and the inputs of a
context with each action (:mod:`~bnnkit.decisions.inputs`).  ``bnnkit bench bandit`` runs them on
the mushroom bandit."""

from .agents import (
    ChainAgent,
    FunctionalVariationalAgent,
    GreedyAgent,
    LaplaceAgent,
    RefitAgent,
    VariationalAgent,
)
from .inputs import OneHotContextPoints, ReplayBuffer, action_inputs, one_hot_blocks

__all__ = [
    "ChainAgent",
    "VariationalAgent",
    "FunctionalVariationalAgent",
    "GreedyAgent",
    "LaplaceAgent",
    "RefitAgent",
    "ReplayBuffer",
    "OneHotContextPoints",
    "action_inputs",
    "one_hot_blocks",
]
