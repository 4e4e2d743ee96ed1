"""Thompson sampling agents for contextual bandits, each over its own approximate posterior of a
reward network ``f(x, a)`` on a context ``x`` and a one-hot action ``a``.

At each decision an agent draws weights ``theta ~ q_t`` and acts ``a_t = argmax_a f_theta(x_t, a)``
(Thompson sampling); ``update(buffer, gen)`` moves ``q_t`` towards the posterior given the buffer's
rows.  The agents differ in ``q_t``: the current state of an SG-MCMC chain (:class:`ChainAgent`), a
mean-field Gaussian trained online (:class:`VariationalAgent`, :class:`FunctionalVariationalAgent`),
a last-layer Laplace around a MAP network (:class:`LaplaceAgent`), :func:`bnnkit.fit`'s posterior
refitted as the data double (:class:`RefitAgent`); :class:`GreedyAgent` is the epsilon-greedy MAP
baseline.  Every agent has ``act(context, gen) -> int``, ``update(buffer, gen)`` and ``finite()``;
all their random numbers come from the generator passed in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..core.errors import BnnkitError
from .inputs import ReplayBuffer, action_inputs


def _best_action(posterior: Any, params: Any, context: Tensor, num_actions: int) -> int:
    """The action whose reward ``posterior``'s network predicts highest at the weights ``params``."""
    with torch.no_grad():
        return int(posterior.forward(params, action_inputs(context[None], num_actions)).reshape(-1).argmax())


class ChainAgent:
    """Thompson sampling with the current state of an SG-MCMC chain on ``posterior`` (SGLD, SGHMC,
    their functional forms, ...): ``updates`` steps per interaction, each on ``batch_size`` rows
    drawn from the buffer, and each action at the chain's current weights.

    ``algorithm`` is the algorithm, or ``n -> algorithm`` at buffer size ``n`` (its step may depend
    on ``n``), rebuilt whenever ``n`` changes, as is the posterior's ``N`` of the ``N / M``
    minibatch scaling; the chain's state carries over.  A state's ``adapting`` flag (scale-adapted
    SGHMC) is set after ``init`` and never cleared: the target moves with every interaction, so
    there is no end of warm-up to freeze the mass at.
    """

    def __init__(
        self,
        posterior: Any,
        algorithm: Any,
        x0: Tensor | None = None,
        updates: int = 2,
        batch_size: int = 64,
        num_actions: int = 2,
    ):
        self.posterior = posterior
        if hasattr(algorithm, "build"):
            self.algorithm: Callable[[int], Any] = lambda n: algorithm
        elif callable(algorithm):
            self.algorithm = algorithm
        else:
            raise BnnkitError(
                f"algorithm must be an SG-MCMC algorithm such as SGLD(1e-4), or a function of the buffer "
                f"size n returning one, got {type(algorithm).__name__}."
            )
        self.x0 = posterior.initial_position("module") if x0 is None else x0
        self.updates, self.batch_size, self.num_actions = updates, batch_size, num_actions
        self.state: Any = None
        self._n = -1
        self._kernel: Any = None

    def update(self, buf: ReplayBuffer, gen: torch.Generator) -> None:
        n = buf.size
        if n != self._n:  # rebuild the (cheap) kernel while n grows
            self.posterior = self.posterior.with_num_data(n)
            self._kernel = self.algorithm(n).build(self.posterior.target())
            self._n = n
        for _ in range(self.updates):
            batch = buf.sample(self.batch_size, gen)
            if self.state is None:
                self.state = self._kernel.init(self.x0, batch)
                if hasattr(self.state, "adapting"):
                    self.state = self.state._replace(adapting=torch.tensor(True))
            self.state, _ = self._kernel.step(self.state, batch, gen)

    def position(self) -> Tensor:
        return self.x0 if self.state is None else self.state.position

    def act(self, context: Tensor, gen: torch.Generator) -> int:
        return _best_action(
            self.posterior, self.posterior.split(self.position())[0], context, self.num_actions
        )

    def finite(self) -> bool:
        return bool(torch.isfinite(self.position()).all())


class VariationalAgent:
    """Thompson sampling with one draw from a mean-field Gaussian ``q`` trained online by Bayes by
    Backprop: ``updates`` Adam steps (rate ``lr``) per interaction on
    ``-(n / M) sum_batch E_q log p(y | x, w) + KL(q || prior)``, divided by ``n``, the buffer's size;
    ``q`` starts at the posterior's initial weights with standard deviation ``init_sigma``."""

    def __init__(
        self,
        posterior: Any,
        lr: float = 3e-3,
        updates: int = 8,
        batch_size: int = 64,
        init_sigma: float = 0.01,
        estimator: str = "local",
        num_actions: int = 2,
    ):
        from ..vi.meanfield import MeanFieldGaussian

        self.posterior, self.estimator = posterior, estimator
        self._objective(lr)
        self.q = MeanFieldGaussian(posterior, init_sigma)
        self.opt = torch.optim.Adam(self.q.parameters(), lr=lr)
        self.updates, self.batch_size, self.num_actions = updates, batch_size, num_actions

    def _objective(self, lr: float) -> None:
        from ..vi.bbb import BayesByBackprop

        self.bbb = BayesByBackprop(lr=lr, estimator=self.estimator, kl="closed")
        self.plan = self.bbb.plan(self.posterior)

    def _elbo_terms(
        self, batch: tuple[Tensor, Tensor], n: int, gen: torch.Generator
    ) -> tuple[Tensor, Tensor]:
        """The minibatch estimate of the full-data expected log likelihood, and the KL term."""
        ll, kl = self.bbb.terms(self.plan, self.q, batch, gen)
        return ll * (n / batch[0].shape[0]), kl

    def update(self, buf: ReplayBuffer, gen: torch.Generator) -> None:
        n = buf.size  # the data size, passed to the ELBO terms (the posterior's num_data is not read)
        for _ in range(self.updates):
            ll, kl = self._elbo_terms(buf.sample(self.batch_size, gen), n, gen)
            loss = -(ll - kl) / n
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()

    def act(self, context: Tensor, gen: torch.Generator) -> int:
        with torch.no_grad():  # one draw of q, no graph through its parameters
            w = self.q.sample(1, gen)[0]
        return _best_action(self.posterior, self.posterior.split(w)[0], context, self.num_actions)

    def finite(self) -> bool:
        return bool(torch.isfinite(self.q.mu).all() and torch.isfinite(self.q.rho).all())


class FunctionalVariationalAgent(VariationalAgent):
    """:class:`VariationalAgent` with the functional ELBO of FBNN (:meth:`~bnnkit.vi.FBNN.terms`):
    ``posterior`` is a :class:`~bnnkit.functional.FunctionalPosterior`, whose GP prior and
    measurement points give the KL term, estimated from ``function_samples`` draws; the other
    arguments are :class:`VariationalAgent`'s."""

    def __init__(self, posterior: Any, function_samples: int = 10, **kwargs: Any):
        self.function_samples = function_samples
        super().__init__(posterior, **kwargs)

    def _objective(self, lr: float) -> None:
        from ..vi.fbnn import FBNN

        # include_batch=False: measurement points such as OneHotContextPoints already hold each
        # minibatch context with every action, so the batch rows would repeat points of K.
        self.fbnn = FBNN(lr=lr, num_function_samples=self.function_samples, include_batch=False)

    def _elbo_terms(
        self, batch: tuple[Tensor, Tensor], n: int, gen: torch.Generator
    ) -> tuple[Tensor, Tensor]:
        return self.fbnn.terms(self.posterior, self.q, batch, n, gen)


class GreedyAgent:
    """The MAP network (Adam with weight decay on the squared error, ``updates`` steps per
    interaction), acting on its best predicted reward, or uniformly at random with probability
    ``epsilon``."""

    def __init__(
        self,
        net: torch.nn.Module,
        epsilon: float = 0.0,
        lr: float = 3e-3,
        weight_decay: float = 1e-4,
        updates: int = 2,
        batch_size: int = 64,
        num_actions: int = 2,
    ):
        self.net = net
        self.epsilon = epsilon
        self.opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay)
        self.updates, self.batch_size, self.num_actions = updates, batch_size, num_actions

    def update(self, buf: ReplayBuffer, gen: torch.Generator) -> None:
        for _ in range(self.updates):
            xb, yb = buf.sample(self.batch_size, gen)
            loss = ((self.net(xb).squeeze(-1) - yb) ** 2).mean()
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()

    def act(self, context: Tensor, gen: torch.Generator) -> int:
        if self.epsilon > 0:  # draw only when exploring can happen: epsilon 0 uses no random numbers
            u = float(torch.rand((), generator=gen))
            if u < self.epsilon:
                return int(torch.randint(self.num_actions, (), generator=gen))
        with torch.no_grad():
            f = self.net(action_inputs(context[None], self.num_actions))
        return int(f.reshape(-1).argmax())

    def finite(self) -> bool:
        return all(bool(torch.isfinite(p).all()) for p in self.net.parameters())


class LaplaceAgent(GreedyAgent):
    """Thompson sampling from a last-layer Laplace posterior around :class:`GreedyAgent`'s network
    (no exploration of its own): every ``every`` interactions a :class:`~bnnkit.Laplace` (last layer,
    full GGN, no evidence tuning: a refit must stay cheap) is fitted around its weights on the whole
    buffer; each action uses one draw of the last layer from it."""

    def __init__(self, posterior: Any, net: torch.nn.Module, every: int = 50, **greedy: Any):
        super().__init__(net, 0.0, **greedy)
        self.posterior = posterior
        self.every = every
        self.calls = 0
        self.draw: Callable[[int, torch.Generator], dict[str, Tensor]] | None = None

    def update(self, buf: ReplayBuffer, gen: torch.Generator) -> None:
        super().update(buf, gen)
        if self.calls % self.every == 0:
            from ..laplace import Laplace

            la = Laplace(self.posterior, subset="last_layer", structure="full")
            self.draw = la.fit((buf.x[: buf.size], buf.y[: buf.size]), map="module").init(draw=True)
        self.calls += 1

    def act(self, context: Tensor, gen: torch.Generator) -> int:
        if self.draw is None:  # before the first interaction: the untrained network
            return super().act(context, gen)
        return _best_action(self.posterior, self.draw(0, gen), context, self.num_actions)


class RefitAgent:
    """Thompson sampling from :func:`bnnkit.fit` (Gaussian likelihood, ``recipe``: None is the
    default recipe), refitted on the whole buffer after ``first_fit`` interactions and again each
    time their number doubles (a batch fit at every interaction would cost thousands of fits);
    each action is the argmax of one draw's predicted rewards.  Before the first fit it acts
    greedily with the untrained network.  ``fits`` lists each refit's rows, seconds and R-hat."""

    def __init__(self, net: torch.nn.Module, first_fit: int = 32, recipe: Any = None, num_actions: int = 2):
        self.net = net
        self.next_fit = first_fit
        self.recipe = recipe
        self.num_actions = num_actions
        self.seen = 0
        self.fit: Any = None
        self.fits: list[dict[str, Any]] = []

    def update(self, buf: ReplayBuffer, gen: torch.Generator) -> None:
        self.seen += 1
        if self.seen < self.next_fit:
            return
        import warnings

        from ..api import fit
        from ..diagnostics import ConvergenceWarning

        seed = int(torch.randint(2**31 - 1, (), generator=gen))  # the fit's seed, from the agent's draws
        with warnings.catch_warnings():  # the R-hat of each refit is recorded, not printed
            warnings.simplefilter("ignore", ConvergenceWarning)
            self.fit = fit(
                self.net, buf.data(), likelihood="gaussian", seed=seed, progress=False, recipe=self.recipe
            )
        self.fits.append(
            {"rows": buf.size, "seconds": self.fit.seconds, "rhat": self.fit.diagnostics.get("rhat")}
        )
        self.next_fit *= 2

    def act(self, context: Tensor, gen: torch.Generator) -> int:
        rows = action_inputs(context[None], self.num_actions)
        if self.fit is None:
            with torch.no_grad():
                f = self.net(rows)
        else:
            f = self.fit.sample_functions(rows, 1, gen)[0]
        return int(f.reshape(-1).argmax())

    def finite(self) -> bool:
        return self.fit is None or bool(torch.isfinite(self.fit.draws.flat()).all())
