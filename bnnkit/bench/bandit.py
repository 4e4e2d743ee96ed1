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
  interactions against 24 for sgld) and the predictions for new mushrooms drift with them;
- sghmc / fsghmc: SGHMC on sgld's posterior and fSGHMC on fsgld's, in learning-rate form with
  momentum decay ``a = sghmc_momentum_decay = 0.1`` and learning rate ``a eps / 2`` for the step
  ``eps`` of sgld / fsgld, so the settled momentum moves the chain as far per step as (f)SGLD;
  the momentum is kept across interactions;
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
"""

from __future__ import annotations

import csv
import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ..core.errors import BnnkitError
from ..core.random import global_rng_seeded, make_generator
from .methods import GP_PRIOR, MOMENTUM, family, sg_algorithm
from .models import mlp
from .records import append_record, read_records, start_records

# Appended, never reordered: a method's agent generator is make_generator(seed, 2 + its index).
METHODS = ("sgld", "fsgld", "bbb", "greedy0", "greedy1", "greedy5", "sghmc", "fsghmc", "fbnn", "laplace")
GREEDY_EPSILON = {"greedy0": 0.0, "greedy1": 0.01, "greedy5": 0.05}
PATTERNS = (0.4, 0.5, 0.6)
SEEDS = (0, 1, 2)
STEPS = 10_000
EAT, REJECT = 0, 1
EDIBLE_REWARD, POISON_REWARD, REJECT_REWARD = 5.0, -35.0, 0.0

# A key added here must default to the earlier behaviour: records written before it are read with
# that default (see _same_run).
DEFAULTS: dict[str, Any] = {
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
    "curve_points": 200,
}
QUICK: dict[str, Any] = {"hidden": 20}
QUICK_STEPS = 300
QUICK_PATTERNS = (0.5,)
QUICK_SEEDS = (0, 1)
RUNS_FILE = "bandit_runs.jsonl"  # one line per finished run, appended as it finishes


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


# ---------------------------------------------------------------------------- the agents' pieces
class Buffer:
    """The last ``capacity`` interactions (input rows and scaled rewards) as a ring buffer."""

    def __init__(self, capacity: int, dim: int):
        self.x = torch.zeros(capacity, dim)
        self.y = torch.zeros(capacity)
        self.capacity = capacity
        self.size = 0
        self._next = 0

    def add(self, x: Tensor, y: float) -> None:
        self.x[self._next] = x
        self.y[self._next] = y
        self._next = (self._next + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, rows: int, gen: torch.Generator) -> tuple[Tensor, Tensor]:
        """``min(rows, size)`` rows drawn uniformly with replacement."""
        idx = torch.randint(self.size, (min(rows, self.size),), generator=gen)
        return self.x[idx], self.y[idx]


def _both_actions(contexts: Tensor) -> Tensor:
    """Inputs ``[2k, D + 2]``: each context with (eat) then with (reject)."""
    k = contexts.shape[0]
    eat = torch.tensor([1.0, 0.0]).expand(k, 2)
    rej = torch.tensor([0.0, 1.0]).expand(k, 2)
    return torch.cat([torch.cat([contexts, eat], 1), torch.cat([contexts, rej], 1)])


def attribute_blocks(contexts: Tensor) -> list[tuple[int, int]]:
    """Column ranges ``[start, stop)`` of the one-hot attribute blocks (each row has one 1 per block)."""
    blocks, start, partial = [], 0, torch.zeros(contexts.shape[0])
    for j in range(contexts.shape[1]):
        partial = partial + contexts[:, j]
        if bool((partial == 1).all()):
            blocks.append((start, j + 1))
            start, partial = j + 1, torch.zeros(contexts.shape[0])
    if start != contexts.shape[1]:
        raise BnnkitError("the contexts are not a one-hot encoding of categorical attributes.")
    return blocks


class BothActionPoints:
    """Measurement points for fsgld, both actions at each of ``num_batch`` minibatch contexts and
    ``num_random`` random mushrooms (every attribute's level drawn uniformly), deduplicated.

    The random mushrooms put the functional prior on contexts the agent has not seen yet, not only
    on the ones it is fitting; the two actions of one context tie the prediction for the action not
    taken to the observed one through the kernel.
    """

    def __init__(self, blocks: list[tuple[int, int]], num_batch: int = 16, num_random: int = 16):
        self.blocks = blocks
        self.num_batch = num_batch
        self.num_random = num_random
        self.width = blocks[-1][1]
        self._lo = torch.tensor([lo for lo, _ in blocks])
        self._size = torch.tensor([hi - lo for lo, hi in blocks], dtype=torch.float32)

    def sample(self, batch_x: Tensor | None, generator: torch.Generator) -> Tensor:
        from ..functional import dedupe_rows

        assert batch_x is not None
        rows = batch_x[torch.randperm(batch_x.shape[0], generator=generator)[: self.num_batch], :-2]
        if self.num_random:
            u = torch.rand(self.num_random, len(self.blocks), generator=generator)
            cols = self._lo + (u * self._size).long().clamp_max(self._size.long() - 1)
            rand = torch.zeros(self.num_random, self.width).scatter_(1, cols, 1.0)
            rows = torch.cat([rows, rand])
        return dedupe_rows(_both_actions(rows))

    def config(self) -> dict:
        return {"batch_contexts": self.num_batch, "random_contexts": self.num_random, "actions": "both"}


class _SGMCMCAgent:
    """Thompson sampling with the current state of an SG-MCMC chain (sgld / fsgld)."""

    def __init__(
        self, posterior: Any, algorithm: Callable[[float], Any], lr: float, max_step: float, x0: Tensor
    ):
        # the posterior at the buffer's current size: the data size N of the N/M scaling is fixed
        # per posterior, so update() takes posterior.with_num_data(n) (and its target) as n grows
        self.posterior = posterior
        self.target = posterior.target()
        self.algorithm = algorithm
        self.lr = lr
        self.max_step = max_step
        self.state: Any = None
        self.x0 = x0
        self._n = -1
        self._kernel: Any = None

    def update(self, buf: Buffer, cfg: dict, gen: torch.Generator) -> None:
        n = buf.size
        if n != self._n:  # eps = min(2 lr sigma^2 / n, max_step): rebuild the (cheap) kernel while n grows
            self.posterior = self.posterior.with_num_data(n)  # N = n in the N/M scaling (a cheap copy)
            self.target = self.posterior.target()
            eps = min(2 * self.lr * cfg["noise"] ** 2 / n, self.max_step)
            self._kernel = self.algorithm(eps).build(self.target)
            self._n = n
        for _ in range(cfg["updates"]):
            batch = buf.sample(cfg["batch_size"], gen)
            if self.state is None:
                self.state = self._kernel.init(self.x0, batch)
            self.state, _ = self._kernel.step(self.state, batch, gen)

    def position(self) -> Tensor:
        return self.x0 if self.state is None else self.state.position

    def act(self, context: Tensor, gen: torch.Generator) -> int:
        with torch.no_grad():
            w = self.position()
            f = self.posterior.forward(self.posterior.split(w)[0], _both_actions(context[None]))
        return int(f.reshape(-1).argmax())

    def finite(self) -> bool:
        return bool(torch.isfinite(self.position()).all())


class _BBBAgent:
    """Thompson sampling with one draw from a mean-field Gaussian q, trained online (BBB)."""

    def __init__(self, posterior: Any, cfg: dict):
        from ..vi.bbb import BayesByBackprop
        from ..vi.meanfield import MeanFieldGaussian

        self.posterior = posterior
        self.bbb = BayesByBackprop(lr=cfg["bbb_lr"], estimator=cfg["bbb_estimator"], kl="closed")
        self.plan = self.bbb.plan(posterior)
        self.q = MeanFieldGaussian(posterior, cfg["bbb_init_sigma"])
        self.opt = torch.optim.Adam(self.q.parameters(), lr=cfg["bbb_lr"])

    def _elbo_terms(
        self, batch: tuple[Tensor, Tensor], n: int, gen: torch.Generator
    ) -> tuple[Tensor, Tensor]:
        """The minibatch estimate of the full-data expected log likelihood, and the KL term."""
        ll, kl = self.bbb.terms(self.plan, self.q, batch, gen)
        return ll * (n / batch[0].shape[0]), kl

    def update(self, buf: Buffer, cfg: dict, gen: torch.Generator) -> None:
        n = buf.size  # the data size, passed to the ELBO terms (the posterior's num_data is not read)
        for _ in range(cfg["bbb_updates"]):
            ll, kl = self._elbo_terms(buf.sample(cfg["batch_size"], gen), n, gen)
            loss = -(ll - kl) / n
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()

    def act(self, context: Tensor, gen: torch.Generator) -> int:
        w = self.q.sample(1, gen)[0]
        with torch.no_grad():
            f = self.posterior.forward(self.posterior.split(w)[0], _both_actions(context[None]))
        return int(f.reshape(-1).argmax())

    def finite(self) -> bool:
        return bool(torch.isfinite(self.q.mu).all() and torch.isfinite(self.q.rho).all())


class _FBNNAgent(_BBBAgent):
    """Thompson sampling with one weight draw from FBNN's mean-field q, trained online.

    Each update is a step of the functional ELBO (:meth:`~bnnkit.vi.FBNN.terms`) on a buffer
    minibatch with the fsgld agent's GP prior at its measurement points (both actions of the
    minibatch's and random mushrooms), the same learning rate, number of updates and initial q
    as bbb.
    """

    def __init__(self, posterior: Any, cfg: dict):
        from ..vi.fbnn import FBNN
        from ..vi.meanfield import MeanFieldGaussian

        self.posterior = posterior
        # include_batch=False: the measurement points already hold each minibatch context with
        # both actions, so the batch rows themselves would repeat points of K.
        self.fbnn = FBNN(
            lr=cfg["bbb_lr"], num_function_samples=cfg["fbnn_function_samples"], include_batch=False
        )
        self.q = MeanFieldGaussian(posterior, cfg["bbb_init_sigma"])
        self.opt = torch.optim.Adam(self.q.parameters(), lr=cfg["bbb_lr"])

    def _elbo_terms(
        self, batch: tuple[Tensor, Tensor], n: int, gen: torch.Generator
    ) -> tuple[Tensor, Tensor]:
        return self.fbnn.terms(self.posterior, self.q, batch, n, gen)


class _GreedyAgent:
    """MAP network (Adam with weight decay on the squared error), epsilon-greedy."""

    def __init__(self, net: torch.nn.Module, epsilon: float, cfg: dict):
        self.net = net
        self.epsilon = epsilon
        self.opt = torch.optim.Adam(
            net.parameters(), lr=cfg["greedy_lr"], weight_decay=cfg["greedy_weight_decay"]
        )

    def update(self, buf: Buffer, cfg: dict, gen: torch.Generator) -> None:
        for _ in range(cfg["updates"]):
            xb, yb = buf.sample(cfg["batch_size"], gen)
            loss = ((self.net(xb).squeeze(-1) - yb) ** 2).mean()
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()

    def act(self, context: Tensor, gen: torch.Generator) -> int:
        if self.epsilon > 0:  # draw only when exploring can happen: greedy0 uses no random numbers
            u = float(torch.rand((), generator=gen))
            if u < self.epsilon:
                return int(torch.randint(2, (), generator=gen))
        with torch.no_grad():
            f = self.net(_both_actions(context[None]))
        return int(f.reshape(-1).argmax())

    def finite(self) -> bool:
        return all(bool(torch.isfinite(p).all()) for p in self.net.parameters())


class _LaplaceAgent(_GreedyAgent):
    """Thompson sampling from a last-layer Laplace posterior around the greedy agent's network.

    The network is trained as greedy0's (Adam on the squared error); every ``laplace_every``
    interactions a :class:`~bnnkit.Laplace` (last layer, full GGN, the bandit's noise and weight
    prior, no evidence tuning: a refit must stay cheap) is fitted around its current weights on
    the whole buffer, and each action uses one draw of the last layer from it (the chain's
    generator), the rest of the network at its trained weights.
    """

    def __init__(self, posterior: Any, net: torch.nn.Module, cfg: dict):
        super().__init__(net, 0.0, cfg)
        self.posterior = posterior
        self.every = cfg["laplace_every"]
        self.calls = 0
        self.draw: Callable[[int, torch.Generator], dict[str, Tensor]] | None = None

    def update(self, buf: Buffer, cfg: dict, gen: torch.Generator) -> None:
        super().update(buf, cfg, gen)
        if self.calls % self.every == 0:
            from ..laplace import Laplace

            data = (buf.x[: buf.size], buf.y[: buf.size])
            la = Laplace(self.posterior, subset="last_layer", structure="full")
            self.draw = la.fit(data, map="module").init(draw=True)
        self.calls += 1

    def act(self, context: Tensor, gen: torch.Generator) -> int:
        if self.draw is None:  # before the first interaction: the untrained network
            return super().act(context, gen)
        with torch.no_grad():
            f = self.posterior.forward(self.draw(0, gen), _both_actions(context[None]))
        return int(f.reshape(-1).argmax())


def _hmc_like(kind: Any, momentum_decay: float) -> Callable[[float], Any]:
    """``eps -> (f)SGHMC`` whose drift matches (f)SGLD's at step ``eps``.

    SGLD moves ``(eps / 2) g`` per step.  SGHMC in learning-rate form, ``v <- (1 - a) v + lr g +
    noise``, ``w <- w + v``, moves ``lr g / a`` per step once the momentum has settled, so
    ``lr = a eps / 2`` gives the same drift; the momentum carries the chain through ``1 / a``
    steps of one minibatch's noise instead of one.
    """
    return lambda eps: kind.from_learning_rate(momentum_decay * eps / 2, momentum_decay)


def _sg_algorithm(method: str, cfg: dict) -> Any:
    """``eps -> algorithm`` of an SG-MCMC ``method``: (f)SGLD's class, or (f)SGHMC with (f)SGLD's drift."""
    kind = sg_algorithm(method)
    return _hmc_like(kind, cfg["sghmc_momentum_decay"]) if method in MOMENTUM else kind


def _make_agent(method: str, d: int, cfg: dict, seed: int, blocks: list[tuple[int, int]]) -> Any:
    from ..core.posterior import Posterior
    from ..likelihoods import Gaussian
    from ..priors import GaussianPrior

    with global_rng_seeded(seed):  # the same initial weights for every method of a seed
        net = mlp(d, cfg["hidden"], torch.nn.ReLU)
    if method in GREEDY_EPSILON:
        return _GreedyAgent(net, GREEDY_EPSILON[method], cfg)
    lik = Gaussian(cfg["noise"])
    scales = {k: v for k, v in cfg["prior_scales"].items() if k != "default"}
    prior = GaussianPrior(cfg["prior_scales"]["default"], scales=scales)
    if method == "laplace":
        return _LaplaceAgent(Posterior(net, lik, prior), net, cfg)
    if method == "bbb":
        return _BBBAgent(Posterior(net, lik, prior, num_data=1), cfg)
    if family(method) == "sg":
        post = Posterior(net, lik, prior, num_data=1)
        alg = _sg_algorithm(method, cfg)
        return _SGMCMCAgent(post, alg, cfg["sgld_lr"], cfg["sgld_max_step"], post.initial_position("module"))
    if method in GP_PRIOR:
        from ..functional import FunctionalPosterior, GPPrior

        gp = GPPrior(
            "rbf",
            input_dim=d,
            ard=False,
            lengthscale=cfg["gp_lengthscale"],
            outputscale=cfg["gp_outputscale"],
            jitter=cfg["gp_jitter"],
            max_jitter=max(1e-2, cfg["gp_jitter"]),
        )
        # train_inputs only seed the fixed reference set of the deterministic log density, which
        # the bandit never evaluates (SG-MCMC steps draw BothActionPoints from each minibatch).
        post = FunctionalPosterior(
            net,
            lik,
            gp,
            BothActionPoints(blocks, cfg["gp_points"], cfg["gp_random_points"]),
            torch.zeros(1, d),
            num_data=1,
            weight_scale=cfg["fsgld_weight_scale"],
        )
        if method == "fbnn":
            return _FBNNAgent(post, cfg)
        alg = _sg_algorithm(method, cfg)
        return _SGMCMCAgent(
            post, alg, cfg["fsgld_lr"], cfg["fsgld_max_step"], post.initial_position("module")
        )
    raise BnnkitError(f"unknown method {method!r}; choose from {', '.join(METHODS)}.")


# ---------------------------------------------------------------------------- one run
def environment(num_mushrooms: int, steps: int, seed: int) -> tuple[Tensor, Tensor]:
    """Mushroom indices and the uniforms ``u`` of the poison outcomes (-35 when ``u < p``).

    Two generators, so a shorter run sees a prefix of a longer run's environment.
    """
    idx = torch.randint(num_mushrooms, (steps,), generator=make_generator(seed, 0))
    u = torch.rand(steps, generator=make_generator(seed, 1), dtype=torch.float64)
    return idx, u


def play(
    method: str,
    contexts: Tensor,
    edible: Tensor,
    p: float,
    steps: int,
    seed: int,
    cfg: dict,
    progress: bool = False,
) -> dict[str, Any]:
    """One agent for ``steps`` interactions; returns actions, rewards and regrets (tensors)."""
    idx, u = environment(contexts.shape[0], steps, seed)
    agent_gen = make_generator(seed, 2 + METHODS.index(method))
    d = contexts.shape[1] + 2
    agent = _make_agent(method, d, cfg, seed, attribute_blocks(contexts))
    buf = Buffer(cfg["buffer"], d)
    actions = torch.empty(steps, dtype=torch.long)
    rewards = torch.empty(steps, dtype=torch.float64)
    eat_row, rej_row = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    scale = cfg["reward_scale"]
    bar = _bar(steps, f"{method} p={p:g} seed {seed}", progress)
    t0 = time.perf_counter()
    for t in range(steps):
        if buf.size:
            agent.update(buf, cfg, agent_gen)
        i = int(idx[t])
        ctx = contexts[i]
        a = agent.act(ctx, agent_gen)
        is_edible = bool(edible[i])
        if a == EAT:
            r = EDIBLE_REWARD if (is_edible or float(u[t]) >= p) else POISON_REWARD
        else:
            r = REJECT_REWARD
        actions[t], rewards[t] = a, r
        buf.add(torch.cat([ctx, eat_row if a == EAT else rej_row]), r * scale)
        if bar is not None:
            bar.update(1)
        if (t + 1) % 500 == 0 or t + 1 == steps:
            _check_finite(agent, method, p, seed, t + 1)
    seconds = time.perf_counter() - t0
    if bar is not None:
        bar.close()
    ed = edible[idx]
    assert torch.equal(rewards, realised_rewards(ed, actions, u < p))  # the inline rule is the documented one
    oracle = torch.where(ed, torch.tensor(EDIBLE_REWARD), torch.tensor(REJECT_REWARD)).double()
    return {
        "actions": actions,
        "rewards": rewards,
        "cumulative_regret": cumulative_regret(ed, actions, p),
        "realised_regret": float((oracle - rewards).sum()),
        "poisonous_eaten": int(((actions == EAT) & ~ed).sum()),
        "edible_rejected": int(((actions == REJECT) & ed).sum()),
        "seconds": seconds,
    }


def _check_finite(agent: Any, method: str, p: float, seed: int, t: int) -> None:
    if not agent.finite():
        raise BnnkitError(
            f"{method} diverged (non-finite weights) after {t} interactions on pattern p={p:g}, seed {seed}: "
            "lower its step size (config sgld_lr / sgld_max_step, fsgld_lr / fsgld_max_step, bbb_lr, greedy_lr)."
        )


# ---------------------------------------------------------------------------- the benchmark
def _check_inputs(methods, patterns, seeds, steps) -> None:
    if not methods:
        raise BnnkitError(f"no methods given; choose from {', '.join(METHODS)}.")
    for m in methods:
        if m not in METHODS:
            raise BnnkitError(f"unknown method {m!r}; choose from {', '.join(METHODS)}.")
    if not patterns:
        raise BnnkitError("no reward patterns given; the paper's are p = 0.4, 0.5, 0.6.")
    for p in patterns:
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not (0.0 <= float(p) <= 1.0):
            raise BnnkitError(
                f"reward pattern p={p!r} is not a probability: p is the chance that eating a poisonous "
                "mushroom gives -35 and must lie in [0, 1] (the paper uses 0.4, 0.5, 0.6)."
            )
    if not seeds:
        raise BnnkitError("no seeds given; pass e.g. seeds=(0, 1, 2).")
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise BnnkitError(f"seeds must be non-negative integers, got {s!r}.")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise BnnkitError(f"steps (interactions per run) must be an integer >= 1, got {steps!r}.")


def _split(values: Any, kind: type, name: str) -> list[Any]:
    """A sequence, or a comma-separated string (as on the command line), as a list; strings are
    converted to ``kind`` and integer patterns to floats (types are checked by ``_check_inputs``)."""
    if isinstance(values, str):
        values = [v.strip() for v in values.split(",") if v.strip()]
    out = []
    for v in values:
        if isinstance(v, str) and kind is not str:
            try:
                v = kind(v)
            except ValueError:
                raise BnnkitError(
                    f"{name} must be {kind.__name__}s (comma-separated on the command line), got {v!r}."
                ) from None
        elif kind is float and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        out.append(v)
    if len(set(out)) != len(out):
        raise BnnkitError(f"{name} repeat an entry ({_fmt_list(out)}); give each once.")
    return out


def _fmt_list(values: Sequence[Any]) -> str:
    return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)


def command_line(methods, patterns, seeds, steps, quick) -> str:
    return (
        f"bnnkit bench bandit --methods {','.join(methods)} --patterns {_fmt_list([float(p) for p in patterns])} "
        f"--seeds {_fmt_list(seeds)} --steps {steps}" + (" --quick" if quick else "")
    )


def run_bandit(
    methods: Sequence[str] = METHODS,
    patterns: Sequence[float] | None = None,
    seeds: Sequence[int] | None = None,
    steps: int | None = None,
    out: str | Path = "bnnkit-out/bandit",
    root: str | None = None,
    quick: bool = False,
    progress: bool = True,
    log: Callable[[str], None] = print,
    config: dict[str, Any] | None = None,
    resume: bool = False,
    from_runs: str | Path | None = None,
) -> dict[str, Any]:
    """Run the Mushroom bandit for every method, pattern and seed; write PNGs, JSON, CSV, markdown.

    Args:
        methods: any of ``sgld, fsgld, bbb, greedy0, greedy1, greedy5, sghmc, fsghmc, fbnn`` (all by default).
        patterns: probabilities ``p`` that eating a poisonous mushroom gives -35 (default the
            paper's 0.4, 0.5, 0.6; quick mode: 0.5 only).
        seeds: one run per seed (default 0, 1, 2; quick mode: 0, 1).
        steps: interactions per run (default 10,000, the paper's; quick mode: 300).
        out: output folder.
        root: data directory holding ``mushroom/agaricus-lepiota.data`` (default: ``$BNNKIT_DATA``
            or the user cache).
        quick: a smoke test: 20 hidden units and the quick defaults above (explicit ``patterns``,
            ``seeds`` and ``steps`` are honoured).
        progress: a progress bar per run.
        log: receives one line per finished run.
        config: overrides of :data:`DEFAULTS` (learning rates, noise, GP hyperparameters, ...);
            anything that differs from the defaults is written into the report.
        resume: reuse the runs already in ``out/bandit_runs.jsonl`` that match a requested
            method, pattern and seed with the same number of interactions and configuration, and
            play only the others.  Every finished run is appended to that file as it finishes, so
            a stopped command loses only the run in progress.
        from_runs: play nothing; build the report from the runs in this ``bandit_runs.jsonl``
            (e.g. several files of separate commands, concatenated) that match the arguments.
            A requested run missing from it is left out and said so: the table marks cells with
            fewer seeds than asked (``n = k``) and ``-`` where none is there.

    Returns the JSON report (also written to ``out/bandit.json``).  The command line it names,
    e.g. ``bnnkit bench bandit --methods sgld,... --patterns 0.4,0.5,0.6 --seeds 0,1,2 --steps
    10000``, reproduces every number (with the default config).
    """
    from .. import __version__
    from ..data.mushroom import load_mushroom

    if patterns is None:
        patterns = QUICK_PATTERNS if quick else PATTERNS
    if seeds is None:
        seeds = QUICK_SEEDS if quick else SEEDS
    methods = tuple(_split(methods, str, "methods"))
    patterns = tuple(_split(patterns, float, "patterns"))
    seeds = tuple(_split(seeds, int, "seeds"))
    steps = steps if steps is not None else (QUICK_STEPS if quick else STEPS)
    _check_inputs(methods, patterns, seeds, steps)
    cfg = {**DEFAULTS, **(QUICK if quick else {})}
    overrides = dict(config or {})
    for k in overrides:
        if k not in DEFAULTS:
            raise BnnkitError(f"unknown config key {k!r}; keys are: {', '.join(DEFAULTS)}.")
    cfg.update(overrides)

    if from_runs is not None and resume:
        raise BnnkitError(
            "from_runs rebuilds the report and plays nothing, resume plays the missing runs: pass one."
        )
    contexts, edible = load_mushroom(root)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cmd = command_line(methods, patterns, seeds, steps, quick)
    grid = _curve_index(steps, cfg["curve_points"])
    record_cfg = json.loads(json.dumps(cfg))  # as a record file gives it back, for the comparison
    base = json.loads(json.dumps({**DEFAULTS, **(QUICK if quick else {})}))
    runs_path = out / RUNS_FILE
    source = Path(from_runs) if from_runs is not None else runs_path
    stored: list[dict[str, Any]] = []
    if from_runs is not None:
        if not source.is_file():
            raise BnnkitError(
                f"{source} does not exist; pass the {RUNS_FILE} that a `bnnkit bench bandit` run wrote."
            )
        stored = read_records(source, log)
    elif resume and runs_path.is_file():
        stored = read_records(runs_path, log)
        runs_path.write_text("".join(json.dumps(r) + "\n" for r in stored))  # drop a line cut short
    else:
        start_records(runs_path, log)
    runs: list[dict[str, Any]] = []
    missing: list[str] = []
    reused = 0
    t_all = time.perf_counter()
    for p in patterns:
        for method in methods:
            for seed in seeds:
                # a later line for the same run (a rerun) supersedes an earlier one
                found = [r for r in stored if _same_run(r, method, p, seed, steps, record_cfg, base)]
                if found:
                    runs.append(_public(found[-1]))
                    reused += 1
                    continue
                if from_runs is not None:
                    missing.append(f"{method} p={p:g} seed {seed}")
                    continue
                res = play(method, contexts, edible, p, steps, seed, cfg, progress)
                cum = res["cumulative_regret"]
                run = {
                    "method": method,
                    "pattern": p,
                    "seed": seed,
                    "final_expected_regret": float(cum[-1]),
                    "final_realised_regret": res["realised_regret"],
                    "poisonous_eaten": res["poisonous_eaten"],
                    "edible_rejected": res["edible_rejected"],
                    "seconds": res["seconds"],
                    "ms_per_interaction": 1e3 * res["seconds"] / steps,
                    "steps": steps,
                    "curve": [float(cum[i - 1]) for i in grid],
                }
                append_record(runs_path, {**run, "config": record_cfg, "bnnkit_version": __version__})
                runs.append(run)
                log(
                    f"p={p:g} {method:8s} seed {seed}: expected regret {run['final_expected_regret']:.0f} "
                    f"(realised {run['final_realised_regret']:.0f}; ate {run['poisonous_eaten']} poisonous, "
                    f"rejected {run['edible_rejected']} edible) {res['seconds']:.1f} s "
                    f"({run['ms_per_interaction']:.2f} ms/interaction)"
                )
    if reused:
        log(f"{source}: reused {reused} of the {len(runs)} runs")
    if missing:
        log(
            f"{source}: holds no run of this command for {len(missing)} of the requested: {', '.join(missing)}"
        )
    if not runs:
        raise BnnkitError(
            f"{source} holds no run of methods {list(methods)}, patterns {list(patterns)}, seeds "
            f"{list(seeds)} with {steps} interactions and this configuration; check the arguments."
        )
    wall = time.perf_counter() - t_all
    report = _report(
        runs, methods, patterns, seeds, steps, quick, cfg, overrides, cmd, grid, wall, reused, source
    )
    (out / "bandit.json").write_text(json.dumps(report, indent=2, default=float))
    with (out / "bandit.csv").open("w", newline="") as f:
        rows = [{k: v for k, v in r.items() if k != "curve"} for r in runs]
        # records may carry keys of their own (e.g. a `note`): every key gets a column
        w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in rows for k in r)), restval="")
        w.writeheader()
        w.writerows(rows)
    (out / "bandit.md").write_text(report["markdown"])
    for p in patterns:
        curves = {m: [r["curve"] for r in runs if r["method"] == m and r["pattern"] == p] for m in methods}
        _plot(out / f"bandit_p{p:g}.png", p, curves, grid, seeds, cmd)
    return report


def _same_run(
    r: dict[str, Any], method: str, p: float, seed: int, steps: int, cfg: dict[str, Any], base: dict[str, Any]
) -> bool:
    """Whether the record ``r`` is the run this command plays for ``(method, p, seed)``.

    A record written before a key joined :data:`DEFAULTS` lacks that key; it is read with the key's
    default (``base``), since a new key's default keeps the earlier behaviour.  A key the record has
    and the configuration does not (one since removed) never matches.
    """
    stored = r.get("config")
    if not isinstance(stored, dict):
        return False
    return (r.get("method"), r.get("pattern"), r.get("seed"), r.get("steps"), {**base, **stored}) == (
        method,
        p,
        seed,
        steps,
        cfg,
    )


def _public(record: dict[str, Any]) -> dict[str, Any]:
    """A run as the report holds it: the record less its configuration (the report has one)."""
    return {k: v for k, v in record.items() if k not in ("config", "bnnkit_version")}


def _curve_index(steps: int, points: int) -> list[int]:
    """Interaction counts (1-based) at which the JSON keeps the cumulative regret; ends at ``steps``."""
    k = max(1, min(points, steps))
    return sorted({max(1, round(steps * (j + 1) / k)) for j in range(k)})


def _mean_sd(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (None for a single value: JSON has no NaN)."""
    n = len(values)
    m = sum(values) / n
    if n < 2:
        return m, None
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))


def _report(
    runs, methods, patterns, seeds, steps, quick, cfg, overrides, cmd, grid, wall, reused, source
) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for p in patterns:
        for m in methods:
            sel = [r for r in runs if r["method"] == m and r["pattern"] == p]
            if not sel:  # rebuilt from a record file that lacks these runs
                summary.setdefault(f"{p:g}", {})[m] = None
                continue
            exp = [r["final_expected_regret"] for r in sel]
            mean, sd = _mean_sd(exp)
            summary.setdefault(f"{p:g}", {})[m] = {
                "seeds": [r["seed"] for r in sel],
                "final_expected_regret_mean": mean,
                "final_expected_regret_sd": sd,
                "final_expected_regret_min": min(exp),
                "final_expected_regret_max": max(exp),
                "final_realised_regret_mean": _mean_sd([r["final_realised_regret"] for r in sel])[0],
                "seconds_mean": _mean_sd([r["seconds"] for r in sel])[0],
                "ms_per_interaction_mean": _mean_sd([r["ms_per_interaction"] for r in sel])[0],
            }

    def cell(s: dict | None) -> str:
        if s is None:
            return "-"
        m, sd = s["final_expected_regret_mean"], s["final_expected_regret_sd"]
        text = f"{m:.0f}" if sd is None else f"{m:.0f} +- {sd:.0f}"
        return text if len(s["seeds"]) == len(seeds) else f"{text} (n = {len(s['seeds'])})"

    lines = [
        f"# Mushroom contextual bandit ({'quick mode: a smoke test, not results' if quick else 'Blundell et al. protocol'})",
        "",
        f"Command: `{cmd}`"
        + (f" with config overrides `{json.dumps(overrides)}`" if overrides else "")
        + ".",
        f"Seeds {_fmt_list(seeds)} (one run per seed; the seed fixes the mushroom sequence, the poison",
        "outcomes, the initial weights and the agent's random numbers). Cells: cumulative *expected* regret",
        f"after {steps} interactions (E[oracle reward] - E[reward of the chosen action], summed), mean +- sd",
        "over seeds. The oracle eats exactly the edible mushrooms. Lower is better.",
        "",
        "| method | " + " | ".join(f"p = {p:g}" for p in patterns) + " |",
        "|---|" + "---|" * len(patterns),
    ]
    for m in methods:
        lines.append(f"| {m} | " + " | ".join(cell(summary[f"{p:g}"][m]) for p in patterns) + " |")
    timing = ", ".join(
        f"{m} {_mean_sd([r['ms_per_interaction'] for r in runs if r['method'] == m])[0]:.1f}"
        for m in methods
        if any(r["method"] == m for r in runs)
    )
    run_seconds = sum(r["seconds"] for r in runs)
    if reused:
        when = (
            f"{wall:.0f} s for this command, which reused {reused} of its {len(runs)} runs from "
            f"`{source}` ({run_seconds:.0f} s summed over the runs, each with the threads of its own command)"
        )
    else:
        when = f"{wall:.0f} s in all with {torch.get_num_threads()} torch thread(s)"
    lines += [
        "",
        f"Wall-clock time (varies between runs, unlike the regrets): {when}; ms per interaction: {timing}.",
        "Curves: `bandit_p<p>.png` (mean over seeds, min-max band). Per-run numbers: `bandit.csv`, `bandit.json`,",
        f"`{RUNS_FILE}` (each run as it finished; `--resume` and `--from-runs` read it).",
        "Protocol choices (bnnkit's where the paper is silent): `protocol` in `bandit.json` and the docstring of",
        "`bnnkit.bench.bandit`.",
    ]
    protocol = {
        **cfg,
        "reward_rule": "eat edible +5; eat poisonous -35 with probability p, else +5; reject 0",
        "oracle": "eats exactly the edible mushrooms",
        "regret": "expected: E[oracle reward] - E[reward of the chosen action] per interaction",
        "input": "117-column one-hot context + one-hot action (eat, reject)",
        "network": f"119-{cfg['hidden']}-{cfg['hidden']}-1 ReLU MLP, output = predicted scaled reward",
        "likelihood": f"Gaussian, noise {cfg['noise']} on rewards x {cfg['reward_scale']:g}",
        "thompson": f"one draw per decision after {cfg['updates']} update(s) ({cfg['bbb_updates']} for bbb) on "
        f"minibatches of {cfg['batch_size']} drawn with replacement from the last {cfg['buffer']} interactions",
        "weight_prior": "sgld and bbb: N(0, s^2) with s from prior_scales by parameter-name prefix",
        "sgld_step_size": "eps = min(2 sgld_lr noise^2 / n, sgld_max_step), n = buffer size = num_data; "
        "fsgld likewise with fsgld_lr, fsgld_max_step",
        "fsgld_prior": f"RBF GP (isotropic), zero mean, fixed lengthscale {cfg['gp_lengthscale']:g} and outputscale "
        f"{cfg['gp_outputscale']:g}; measurement points: {cfg['gp_points']} minibatch contexts + "
        f"{cfg['gp_random_points']} random mushrooms, both actions each; Gaussian weight term sd "
        f"{cfg['fsgld_weight_scale']}",
        "bbb": f"mean-field Gaussian, {cfg['bbb_estimator']} estimator, init sigma {cfg['bbb_init_sigma']:g}, "
        "Adam on -(n/M E_q log p(batch) - KL)/n, Thompson draw = one draw of all weights from q",
        "greedy": "same network and initial weights, Adam with weight decay on the squared error; "
        "epsilon 0, 0.01, 0.05",
        "laplace": f"greedy0's network; every {cfg['laplace_every']} interactions a last-layer full-GGN Laplace "
        "(the noise and weight prior above, no evidence tuning) around its weights on the whole buffer; "
        "Thompson draw = one draw of the last layer",
        "randomness": "mushrooms make_generator(seed, 0), poison outcomes make_generator(seed, 1), agent "
        "make_generator(seed, 2 + index of the method in METHODS); initial weights: PyTorch's default init "
        "under the global CPU RNG seeded with seed, in a fork (global_rng_seeded(seed))",
        "band": "min-max over seeds",
    }
    return {
        "benchmark": "mushroom_bandit",
        "command": cmd,
        "config_overrides": overrides,
        "quick": quick,
        "methods": list(methods),
        "patterns": list(patterns),
        "seeds": list(seeds),
        "steps": steps,
        "protocol": protocol,
        "summary": summary,
        "curve_interactions": grid,
        "runs": runs,
        "wall_clock_seconds": wall,
        "runs_reused": reused,
        "run_seconds_total": run_seconds,
        "torch_threads": torch.get_num_threads(),
        "markdown": "\n".join(lines) + "\n",
    }


COLOURS = {
    "sgld": "tab:orange",
    "fsgld": "tab:blue",
    "bbb": "tab:green",
    "greedy0": "tab:red",
    "greedy1": "tab:purple",
    "greedy5": "tab:brown",
    "sghmc": "tab:olive",
    "fsghmc": "tab:cyan",
    "fbnn": "tab:pink",
    "laplace": "tab:gray",
}


def _plot(path: Path, p: float, curves: dict[str, list[list[float]]], grid: list[int], seeds, cmd) -> None:
    """Mean cumulative expected regret over seeds with a min-max band, one line per method that
    has runs; ``curves[m]`` holds one curve per seed at the interaction counts ``grid``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    x = torch.tensor([0, *grid]).numpy()  # no regret before the first interaction
    for m, runs in curves.items():
        if not runs:
            continue
        c = torch.nn.functional.pad(torch.tensor(runs, dtype=torch.float64), (1, 0))
        ax.fill_between(
            x, c.min(0).values.numpy(), c.max(0).values.numpy(), color=COLOURS[m], alpha=0.2, lw=0
        )
        n = "" if len(runs) == len(seeds) else f", n = {len(runs)}"
        ax.plot(
            x,
            c.mean(0).numpy(),
            color=COLOURS[m],
            ls="--" if m in GREEDY_EPSILON else "-",  # the baselines apart from the Bayesian agents
            lw=1.6,
            label=f"{m} ({float(c[:, -1].mean()):.0f}{n})",
        )
    ax.set_xlabel("interaction")
    ax.set_ylabel("cumulative expected regret")
    ax.set_title(f"Mushroom bandit, p = {p:g}: mean over seeds {_fmt_list(seeds)}, min-max band", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", title="method (final mean; dashed: greedy)", title_fontsize=8)
    ax.grid(alpha=0.3)
    fig.text(0.01, 0.005, cmd, fontsize=6, color="grey")
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _bar(total: int, desc: str, progress: bool):
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="step", mininterval=0.5, dynamic_ncols=True, leave=False)
