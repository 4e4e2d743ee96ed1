"""The bandit's agents (one per method), their buffer and the functional agents' measurement points."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ...core.errors import BnnkitError
from ...core.random import global_rng_seeded
from ...nets import mlp
from ..methods import GP_PRIOR, MOMENTUM, SG, sg_algorithm
from .protocol import GREEDY_EPSILON, METHODS


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


def _greedy_action(posterior: Any, params: Any, context: Tensor) -> int:
    """The action whose reward ``posterior``'s network predicts higher at the weights ``params``."""
    with torch.no_grad():
        return int(posterior.forward(params, both_actions(context[None])).reshape(-1).argmax())


def both_actions(contexts: Tensor) -> Tensor:
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
    ``num_random`` random mushrooms (every attribute's level drawn uniformly), deduplicated: the
    random mushrooms put the prior on contexts not seen yet, and the two actions of one context
    tie the action not taken to the observed one through the kernel."""

    def __init__(self, blocks: list[tuple[int, int]], num_batch: int = 16, num_random: int = 16):
        self.blocks = blocks
        self.num_batch = num_batch
        self.num_random = num_random
        self.width = blocks[-1][1]
        self._lo = torch.tensor([lo for lo, _ in blocks])
        self._size = torch.tensor([hi - lo for lo, hi in blocks], dtype=torch.float32)

    def sample(self, batch_x: Tensor | None, generator: torch.Generator) -> Tensor:
        from ...functional import dedupe_rows

        assert batch_x is not None
        rows = batch_x[torch.randperm(batch_x.shape[0], generator=generator)[: self.num_batch], :-2]
        if self.num_random:
            u = torch.rand(self.num_random, len(self.blocks), generator=generator)
            cols = self._lo + (u * self._size).long().clamp_max(self._size.long() - 1)
            rand = torch.zeros(self.num_random, self.width).scatter_(1, cols, 1.0)
            rows = torch.cat([rows, rand])
        return dedupe_rows(both_actions(rows))

    def config(self) -> dict:
        return {"batch_contexts": self.num_batch, "random_contexts": self.num_random, "actions": "both"}


class _SGMCMCAgent:
    """Thompson sampling with the current state of an SG-MCMC chain ((f)SGLD, (f)SGHMC).

    ``algorithm(n)`` is the algorithm at buffer size ``n``, rebuilt whenever ``n`` changes (its
    step may depend on it); the chain's state carries over.  A state's ``adapting`` flag (scale-
    adapted SGHMC) is set after ``init`` and never cleared: the target moves with every
    interaction, so there is no end of warm-up to freeze the mass at.
    """

    def __init__(self, posterior: Any, algorithm: Callable[[int], Any], x0: Tensor):
        # N of the N/M scaling is fixed per posterior: update() swaps it as n grows
        self.posterior = posterior
        self.target = posterior.target()
        self.algorithm = algorithm
        self.state: Any = None
        self.x0 = x0
        self._n = -1
        self._kernel: Any = None

    def update(self, buf: Buffer, cfg: dict, gen: torch.Generator) -> None:
        n = buf.size
        if n != self._n:  # rebuild the (cheap) kernel while n grows
            self.posterior = self.posterior.with_num_data(n)  # N = n in the N/M scaling (a cheap copy)
            self.target = self.posterior.target()
            self._kernel = self.algorithm(n).build(self.target)
            self._n = n
        for _ in range(cfg["updates"]):
            batch = buf.sample(cfg["batch_size"], gen)
            if self.state is None:
                self.state = self._kernel.init(self.x0, batch)
                if hasattr(self.state, "adapting"):
                    self.state = self.state._replace(adapting=torch.tensor(True))
            self.state, _ = self._kernel.step(self.state, batch, gen)

    def position(self) -> Tensor:
        return self.x0 if self.state is None else self.state.position

    def act(self, context: Tensor, gen: torch.Generator) -> int:
        return _greedy_action(self.posterior, self.posterior.split(self.position())[0], context)

    def finite(self) -> bool:
        return bool(torch.isfinite(self.position()).all())


class _BBBAgent:
    """Thompson sampling with one draw from a mean-field Gaussian q, trained online (BBB)."""

    def __init__(self, posterior: Any, cfg: dict):
        from ...vi.bbb import BayesByBackprop
        from ...vi.meanfield import MeanFieldGaussian

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
        with torch.no_grad():  # one draw of q, no graph through its parameters
            w = self.q.sample(1, gen)[0]
        return _greedy_action(self.posterior, self.posterior.split(w)[0], context)

    def finite(self) -> bool:
        return bool(torch.isfinite(self.q.mu).all() and torch.isfinite(self.q.rho).all())


class _FBNNAgent(_BBBAgent):
    """Thompson sampling with one weight draw from FBNN's mean-field q, trained online: each update
    a step of the functional ELBO (:meth:`~bnnkit.vi.FBNN.terms`) with the fsgld agent's GP prior
    and measurement points, bbb's learning rate, number of updates and initial q."""

    def __init__(self, posterior: Any, cfg: dict):
        from ...vi.fbnn import FBNN
        from ...vi.meanfield import MeanFieldGaussian

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
            f = self.net(both_actions(context[None]))
        return int(f.reshape(-1).argmax())

    def finite(self) -> bool:
        return all(bool(torch.isfinite(p).all()) for p in self.net.parameters())


class _LaplaceAgent(_GreedyAgent):
    """Thompson sampling from a last-layer Laplace posterior around greedy0's network: every
    ``laplace_every`` interactions a :class:`~bnnkit.Laplace` (last layer, full GGN, no evidence
    tuning: a refit must stay cheap) is fitted around its weights on the whole buffer; each action
    uses one draw of the last layer from it."""

    def __init__(self, posterior: Any, net: torch.nn.Module, cfg: dict):
        super().__init__(net, 0.0, cfg)
        self.posterior = posterior
        self.every = cfg["laplace_every"]
        self.calls = 0
        self.draw: Callable[[int, torch.Generator], dict[str, Tensor]] | None = None

    def update(self, buf: Buffer, cfg: dict, gen: torch.Generator) -> None:
        super().update(buf, cfg, gen)
        if self.calls % self.every == 0:
            from ...laplace import Laplace

            data = (buf.x[: buf.size], buf.y[: buf.size])
            la = Laplace(self.posterior, subset="last_layer", structure="full")
            self.draw = la.fit(data, map="module").init(draw=True)
        self.calls += 1

    def act(self, context: Tensor, gen: torch.Generator) -> int:
        if self.draw is None:  # before the first interaction: the untrained network
            return super().act(context, gen)
        return _greedy_action(self.posterior, self.draw(0, gen), context)


class _FitAgent:
    """Thompson sampling from :func:`bnnkit.fit` with its defaults, refitted on the whole buffer
    after ``default_first_fit`` interactions and again each time their number doubles (a batch
    fit at every interaction would cost thousands of fits); each action is the argmax of one
    draw's predicted rewards.  Before the first fit it acts greedily with the untrained network."""

    def __init__(self, net: torch.nn.Module, cfg: dict):
        self.net = net
        self.next_fit = cfg["default_first_fit"]
        self.seen = 0
        self.fit: Any = None
        self.fits: list[dict[str, Any]] = []  # each refit's rows, seconds and R-hat

    def update(self, buf: Buffer, cfg: dict, gen: torch.Generator) -> None:
        self.seen += 1
        if self.seen < self.next_fit:
            return
        import warnings

        from ...api import SamplerRecipe, fit
        from ...diagnostics import ConvergenceWarning

        seed = int(torch.randint(2**31 - 1, (), generator=gen))  # the fit's seed, from the agent's draws
        data = (buf.x[: buf.size].clone(), buf.y[: buf.size].clone())
        with warnings.catch_warnings():  # the R-hat of each refit is recorded, not printed
            warnings.simplefilter("ignore", ConvergenceWarning)
            short = cfg["default_recipe"]  # quick mode's short recipe
            recipe = None if short is None else SamplerRecipe(**short)
            self.fit = fit(self.net, data, likelihood="gaussian", seed=seed, progress=False, recipe=recipe)
        self.fits.append(
            {"rows": buf.size, "seconds": self.fit.seconds, "rhat": self.fit.diagnostics.get("rhat")}
        )
        self.next_fit *= 2

    def act(self, context: Tensor, gen: torch.Generator) -> int:
        rows = both_actions(context[None])
        if self.fit is None:
            with torch.no_grad():
                f = self.net(rows)
        else:
            f = self.fit.sample_functions(rows, 1, gen)[0]
        return int(f.reshape(-1).argmax())

    def finite(self) -> bool:
        return self.fit is None or bool(torch.isfinite(self.fit.draws.flat()).all())


def hmc_like(kind: Any, momentum_decay: float) -> Callable[[float], Any]:
    """``eps -> (f)SGHMC`` whose drift matches (f)SGLD's at step ``eps``.

    SGLD moves ``(eps / 2) g`` per step.  SGHMC in learning-rate form, ``v <- (1 - a) v + lr g +
    noise``, ``w <- w + v``, moves ``lr g / a`` per step once the momentum has settled, so
    ``lr = a eps / 2`` gives the same drift; the momentum carries the chain through ``1 / a``
    steps of one minibatch's noise instead of one.
    """
    return lambda eps: kind.from_learning_rate(momentum_decay * eps / 2, momentum_decay)


def _sg_algorithm(method: str, cfg: dict, lr: float, max_step: float) -> Callable[[int], Any]:
    """``n -> algorithm`` of an SG-MCMC ``method`` at buffer size ``n``.

    ``sg_recipe = "plain"`` (protocol 1): (f)SGLD at ``eps = min(2 lr sigma^2 / n, max_step)``, or
    (f)SGHMC with (f)SGLD's drift.  ``"adaptive"`` (protocol 2, the UCI bench's recipe):
    (f)SGLD is preconditioned SGLD at ``eps = psgld_step / n`` (RMSprop decay ``psgld_alpha``),
    (f)SGHMC scale-adapted SGHMC at ``asghmc_step`` (``asghmc_mdecay``), its mass adapted online.
    """
    recipe = cfg["sg_recipe"]
    if recipe == "adaptive":
        from ...sgmcmc import AdaptiveSGHMC, PreconditionedSGLD

        if method in MOMENTUM:
            alg = AdaptiveSGHMC(cfg["asghmc_step"], mdecay=cfg["asghmc_mdecay"])
            return lambda n: alg
        return lambda n: PreconditionedSGLD(cfg["psgld_step"] / n, alpha=cfg["psgld_alpha"])
    if recipe != "plain":
        raise BnnkitError(f"sg_recipe must be 'plain' or 'adaptive', got {recipe!r}.")
    kind = sg_algorithm(method)
    make = hmc_like(kind, cfg["sghmc_momentum_decay"]) if method in MOMENTUM else kind
    return lambda n: make(min(2 * lr * cfg["noise"] ** 2 / n, max_step))


def _sg_agent(method: str, post: Any, cfg: dict, lr: float, max_step: float) -> _SGMCMCAgent:
    return _SGMCMCAgent(post, _sg_algorithm(method, cfg, lr, max_step), post.initial_position("module"))


def make_agent(method: str, d: int, cfg: dict, seed: int, blocks: list[tuple[int, int]]) -> Any:
    from ...core.posterior import Posterior
    from ...likelihoods import Gaussian
    from ...priors import GaussianPrior

    with global_rng_seeded(seed):  # the same initial weights for every method of a seed
        net = mlp(d, cfg["hidden"], torch.nn.ReLU)
    if method in GREEDY_EPSILON:
        return _GreedyAgent(net, GREEDY_EPSILON[method], cfg)
    if method == "default":
        return _FitAgent(net, cfg)
    lik = Gaussian(cfg["noise"])
    scales = {k: v for k, v in cfg["prior_scales"].items() if k != "default"}
    prior = GaussianPrior(cfg["prior_scales"]["default"], scales=scales)
    if method == "laplace":
        return _LaplaceAgent(Posterior(net, lik, prior), net, cfg)
    if method == "bbb":
        return _BBBAgent(Posterior(net, lik, prior, num_data=1), cfg)
    if method in SG:
        post = Posterior(net, lik, prior, num_data=1)
        return _sg_agent(method, post, cfg, cfg["sgld_lr"], cfg["sgld_max_step"])
    if method in GP_PRIOR:
        from ...functional import FunctionalPosterior, GPPrior

        als = cfg["gp_action_lengthscale"]  # None: isotropic; else its own for the 2 action columns
        ls = cfg["gp_lengthscale"] if als is None else [cfg["gp_lengthscale"]] * (d - 2) + [als] * 2
        gp = GPPrior(
            "rbf",
            input_dim=d,
            ard=als is not None,
            lengthscale=ls,
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
        if cfg["fsgld_weight_term"] == "sgld":  # sgld's per-layer Gaussian as the weight term
            post.prior, post.bound_prior = prior, prior.bind(post.net_view)
        elif cfg["fsgld_weight_term"] != "isotropic":
            raise BnnkitError(
                f"fsgld_weight_term must be 'isotropic' or 'sgld', got {cfg['fsgld_weight_term']!r}."
            )
        if method == "fbnn":
            return _FBNNAgent(post, cfg)
        return _sg_agent(method, post, cfg, cfg["fsgld_lr"], cfg["fsgld_max_step"])
    raise BnnkitError(f"unknown method {method!r}; choose from {', '.join(METHODS)}.")
