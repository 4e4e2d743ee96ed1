"""The bandit's protocol: its constants, one frozen, versioned configuration (:data:`DEFAULTS`,
:data:`PROTOCOL`), the reward and regret rules and the environment.  The protocol in words is the
docstring of :mod:`bnnkit.bench.bandit`."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import torch
from torch import Tensor

from ...core.random import make_generator


def _frozen(d: dict[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType({k: _frozen(v) if isinstance(v, dict) else v for k, v in d.items()})


def _plain(m: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _plain(v) if isinstance(v, Mapping) else v for k, v in m.items()}


# Appended, never reordered: a method's agent generator is make_generator(seed, 2 + its index).
METHODS = (
    "sgld",
    "fsgld",
    "bbb",
    "greedy0",
    "greedy1",
    "greedy5",
    "sghmc",
    "fsghmc",
    "fbnn",
    "laplace",
    "default",
)
GREEDY_EPSILON: Mapping[str, float] = _frozen({"greedy0": 0.0, "greedy1": 0.01, "greedy5": 0.05})
PATTERNS = (0.4, 0.5, 0.6)
SEEDS = (0, 1, 2)
STEPS = 10_000
EAT, REJECT = 0, 1
EDIBLE_REWARD, POISON_REWARD, REJECT_REWARD = 5.0, -35.0, 0.0

# The protocol's version; every record carries it (key ``protocol``; a record without it is version
# 1).  Bump it with any change that moves a run's numbers at the same DEFAULTS, so that --resume and
# --from-runs never mix runs of two versions.
PROTOCOL = 1

# The configuration, frozen (read-only mappings; plain_config gives the plain dict a run uses).
# A key added here must default to the earlier behaviour: records written before it are read with
# that default (see records.same_run).
DEFAULTS: Mapping[str, Any] = _frozen(
    {
        "hidden": 100,
        "buffer": 4096,
        "batch_size": 64,
        "updates": 2,
        "reward_scale": 1 / 20,
        "noise": 0.25,
        "prior_scales": {"default": 0.1, "0.": 0.2},
        "sgld_lr": 0.5,
        "fsgld_lr": 0.5,
        "sgld_max_step": 1e-3,
        "fsgld_max_step": 2e-4,
        "sghmc_momentum_decay": 0.1,
        "gp_lengthscale": 2.0,
        "gp_outputscale": 0.25,
        "fsgld_weight_scale": 0.2,
        "gp_points": 16,
        "gp_random_points": 16,
        "gp_jitter": 1e-2,
        "bbb_lr": 3e-3,
        "bbb_updates": 8,
        "bbb_init_sigma": 0.01,
        "bbb_estimator": "local",
        "fbnn_function_samples": 10,
        "greedy_lr": 3e-3,
        "greedy_weight_decay": 1e-4,
        "laplace_every": 50,  # interactions between refits of the last-layer Laplace
        "default_first_fit": 32,  # interactions before the default agent's first bnnkit.fit (then doubling)
        "default_recipe": None,  # the default agent's SamplerRecipe fields (None: bnnkit.fit's own)
        "curve_points": 200,
    }
)
# Keys that have left DEFAULTS, with the value they had there: a stored record holding one at that
# value ran as the protocol now runs (the earlier options' runs rebuild at commit 6fd8c02).
RETIRED: Mapping[str, Any] = _frozen(
    {
        "sg_recipe": "plain",
        "psgld_step": 1e-3,
        "psgld_alpha": 0.99,
        "asghmc_step": 3e-3,
        "asghmc_mdecay": 0.05,
        "gp_action_lengthscale": None,
        "fsgld_weight_term": "isotropic",
    }
)
QUICK: Mapping[str, Any] = _frozen(
    {"hidden": 20, "default_recipe": {"chains": 2, "map_max_steps": 60, "burn_in": 30, "draws": 4, "thin": 5}}
)
QUICK_STEPS = 300
QUICK_PATTERNS = (0.5,)
QUICK_SEEDS = (0, 1)
RUNS_FILE = "bandit_runs.jsonl"  # one line per finished run, appended as it finishes


def plain_config(quick: bool = False, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The configuration of a run as a plain (JSON-able, mutable) dict: DEFAULTS, then QUICK in
    quick mode, then ``overrides`` (unchecked here; :func:`~bnnkit.bench.bandit.run_bandit` checks
    the keys)."""
    return _plain({**DEFAULTS, **(QUICK if quick else {}), **(overrides or {})})


# ---------------------------------------------------------------------------- rewards and regret
def expected_rewards(edible: Tensor, p: float) -> Tensor:
    """Expected reward ``[n, 2]`` (float64) of (eat, reject) for mushrooms with these ``edible`` flags."""
    eat_poison = (1 - p) * EDIBLE_REWARD + p * POISON_REWARD
    eat = torch.full(edible.shape, eat_poison, dtype=torch.float64).masked_fill(edible, EDIBLE_REWARD)
    return torch.stack([eat, torch.full_like(eat, REJECT_REWARD)], dim=-1)


def oracle_actions(edible: Tensor) -> Tensor:
    """The oracle eats exactly the edible mushrooms."""
    return torch.where(edible, EAT, REJECT)


def expected_regret(edible: Tensor, actions: Tensor, p: float) -> Tensor:
    """Per-interaction expected regret ``E[oracle reward] - E[reward of the chosen action]``.

    5 for rejecting an edible mushroom, ``40 p - 5`` for eating a poisonous one, 0 otherwise.
    """
    r = expected_rewards(edible, p)
    best = r.gather(-1, oracle_actions(edible)[..., None]).squeeze(-1)
    got = r.gather(-1, actions.long()[..., None]).squeeze(-1)
    return best - got


def realised_rewards(edible: Tensor, actions: Tensor, poisoned: Tensor) -> Tensor:
    """Rewards actually drawn: ``poisoned`` says whether eating a poisonous mushroom gives -35."""
    eat = torch.where(edible | ~poisoned, torch.tensor(EDIBLE_REWARD), torch.tensor(POISON_REWARD)).double()
    return torch.where(actions == EAT, eat, torch.tensor(REJECT_REWARD, dtype=torch.float64))


def cumulative_regret(edible: Tensor, actions: Tensor, p: float) -> Tensor:
    """Cumulative expected regret after each interaction (float64)."""
    return expected_regret(edible, actions, p).cumsum(0)


# ---------------------------------------------------------------------------- the environment
def environment(num_mushrooms: int, steps: int, seed: int) -> tuple[Tensor, Tensor]:
    """Mushroom indices and the uniforms ``u`` of the poison outcomes (-35 when ``u < p``).

    Two generators, so a shorter run sees a prefix of a longer run's environment.
    """
    idx = torch.randint(num_mushrooms, (steps,), generator=make_generator(seed, 0))
    u = torch.rand(steps, generator=make_generator(seed, 1), dtype=torch.float64)
    return idx, u
