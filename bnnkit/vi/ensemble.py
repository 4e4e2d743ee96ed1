"""Deep ensembles (Lakshminarayanan et al. 2017) and anchored ensembles (Pearce et al. 2020).

A deep ensemble is ``K`` independent MAP fits of the posterior, each from its own random
initialisation and minibatch order.  Member ``k`` maximises, one minibatch ``B`` of ``M`` of the
``N`` rows at a time (Adam)::

    J_k(w) = (N / M) sum_{i in B} log p(y_i | f(x_i; w)) + log p(w)

The member parameter vectors are returned as a one-chain :class:`~bnnkit.Samples` (draws =
members), so :func:`bnnkit.predict.predict` gives the ensemble's predictive (an equally weighted
mixture).  On a convex problem every member reaches the same MAP: a plain ensemble then has no
spread at all, it only captures the multi-modality of a network's posterior.

``anchored=True``: randomise-then-optimise (Bardsley et al. 2014; Pearce et al. 2020), whose
members are exact posterior draws for a linear-Gaussian model (:class:`DeepEnsemble`).

The members are the chains of a kernel (:meth:`DeepEnsemble.build`) that the driver runs as ``K``
vectorised chains: one ``[K, D]`` state, the losses through ``torch.func.vmap`` (a plain loop over
members for modules vmap cannot trace), each member on its own minibatches; Adam's update
(:func:`~bnnkit.vi.optim.adam_update`) is elementwise, so this is exactly ``K`` independent Adam
runs, with the driver's progress bar, ``output=`` streaming and bit-identical resume.  Member ``k``
draws its initialisation, anchor and target noise from its own generator ``make_generator(seed,
k)``; the minibatch orders come from the vectorised group's generator.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, NamedTuple

import torch
from torch import Tensor

from ..core.errors import BnnkitError, DivergenceError, check_int_at_least, resolve_batch_size
from ..core.posterior import Posterior
from ..core.random import init_module_, make_generator
from ..core.samples import Samples
from ..core.types import Kernel
from ..likelihoods.gaussian import Gaussian
from ..priors.base import scale_vector
from ..priors.gaussian import GaussianPrior
from .kernel import _FALSE, _TRUE
from .optim import adam_start, adam_update, batches_per_epoch, check_fit_options, scheduled_lr

INITS = ("module", "prior")


@dataclass(frozen=True)
class DeepEnsemble:
    """Ensemble of MAP fits; ``anchored=True`` for randomise-then-optimise.

    ``anchored=True``: randomise-then-optimise (Bardsley et al. 2014), the "anchored ensembles" of
    Pearce et al. (2020).  For a Gaussian prior ``N(0, S)`` and a Gaussian likelihood with fixed noise
    ``sigma``, member ``k`` draws an anchor ``a_k ~ N(0, S)`` and perturbed targets
    ``y~_k = y + sigma * eps_k`` (``eps_k ~ N(0, I)``, drawn once), then maximises::

        J_k(w) = (N / M) sum_{i in B} log N(y~_ki; f(x_i; w), sigma^2) - 1/2 (w - a_k)^T S^-1 (w - a_k)

    For a linear-Gaussian model ``f(x; w) = x^T w`` the optimum is
    ``w_k = H^-1 (X^T y~_k / sigma^2 + S^-1 a_k)`` with ``H = X^T X / sigma^2 + S^-1``: its mean is the
    posterior mean and its covariance ``H^-1 (X^T X / sigma^2 + S^-1) H^-1 = H^-1`` the posterior
    covariance, so every member is an exact posterior draw.  For a network it is an approximation.

    Args:
        num_members: K, the number of members.
        lr: Adam learning rate.
        num_epochs: passes over the data per member.
        batch_size: minibatch size M (``None``: full batch).
        anchored: anchor each member at a prior draw and perturb the targets (Gaussian prior
            with fixed scales and Gaussian likelihood with fixed noise only).
        init: ``"module"`` re-randomises the module's own initialisation per member (each
            submodule's ``reset_parameters`` under a member seed; parameters of submodules
            without one keep the module's values); ``"prior"`` starts from a prior draw, for an
            anchored ensemble from the member's anchor itself.
        lr_decay: ``None`` or ``"cosine"`` (cosine decay to zero over the run: converges to the
            optimum rather than hovering around it).
    """

    num_members: int = 5
    lr: float = 1e-2
    num_epochs: int = 100
    batch_size: int | None = None
    anchored: bool = False
    init: str = "module"
    lr_decay: str | None = None
    name: str = "deep-ensemble"

    def __post_init__(self) -> None:
        check_int_at_least("num_members", self.num_members, 1)
        check_fit_options(self.lr, self.num_epochs, self.batch_size, self.lr_decay)
        if self.init not in INITS:
            raise BnnkitError(f"init must be one of {INITS}, got {self.init!r}.")

    def config(self) -> dict:
        return asdict(self)

    # What the driver reads (see bnnkit.core.types.Algorithm): members are chains, and K members
    # are one vectorised computation (chain_method="vectorized").
    needs_model: ClassVar[bool] = True
    vectorizable: ClassVar[bool] = True

    def build(
        self,
        target: Any,
        model: Posterior | None = None,
        *,
        anchors: Tensor | None = None,
        noisy: Tensor | None = None,
    ) -> Kernel:
        """The kernel of ``K`` MAP fits (the members as chains, stacked ``[K, D]`` when vectorised).

        Step ``t < T = num_epochs * ceil(N / M)`` is one Adam step (:func:`~bnnkit.vi.optim.adam_update`)
        of every member on the gradient of its own loss ``-J_k(w) / N`` (module doc) on its
        minibatch; ``position`` is the members' current weights and no draw is kept.  Step ``T``
        and after keep the fitted members as draws (one per chain).  ``N`` is the posterior's
        ``num_data`` (the rows of the data without it).  Anchored ensembles take their anchors
        ``[K, D]`` and perturbed targets ``[K, N]`` from :meth:`fit`, which draws them; their data
        rows carry their row index as a third tensor.  Through :func:`bnnkit.sample` the members
        start from its ``init=`` (default: a prior draw per chain); :meth:`fit` starts them as
        this ensemble's ``init`` says.
        """
        from .run import _require_posterior

        posterior = _require_posterior(model, type(self).__name__)
        if self.anchored and anchors is None:
            raise BnnkitError(
                "an anchored ensemble's anchors and perturbed targets are part of its objective: run it with "
                "DeepEnsemble(anchored=True).fit(posterior, data), which draws them from the seed."
            )
        loss_fn = _MemberLoss(posterior, None if anchors is None else _prior_precision(posterior))
        num_data = posterior.num_data
        per_epoch = batches_per_epoch(self.batch_size, num_data)
        total = self.num_epochs * per_epoch
        lr, decay = self.lr, self.lr_decay

        def init(position: Tensor, batch: Any) -> EnsembleState:
            return _start(position, lr, self.num_epochs)

        def step(
            state: EnsembleState, batch: Any, gen: torch.Generator
        ) -> tuple[EnsembleState, EnsembleInfo]:
            t = int(state.iteration)
            stacked = state.position.ndim == 2
            k = state.position.shape[0] if stacked else 1
            if t >= total:  # the fitted members are the draws
                info = EnsembleInfo(-state.loss.expand(k) if stacked else -state.loss, state.step_size, _TRUE)
                return state._replace(iteration=state.iteration + 1), info
            w = state.position if stacked else state.position[None]
            xb, yb = _member_batch(batch, stacked, k, noisy)
            m = int(xb.shape[1])
            n = num_data if num_data is not None else m
            member_anchors = None if anchors is None else (anchors if stacked else anchors[:1])
            with torch.enable_grad():
                wg = w.detach().requires_grad_(True)
                losses = loss_fn(wg, xb, yb, member_anchors, n / m, n, True, True)
                (g,) = torch.autograd.grad(losses.sum(), wg)
            lr_t = scheduled_lr(lr, decay, t, total)
            moments = _stacked(state.exp_avg, stacked), _stacked(state.exp_avg_sq, stacked)
            x, mo, v, s = adam_update(w, g, *moments, state.adam_step, lr_t)
            if not stacked:
                x, mo, v = x[0], mo[0], v[0]
            history, running = _epoch_loss(state, losses, t, per_epoch, total)
            new = EnsembleState(
                position=x,
                exp_avg=mo,
                exp_avg_sq=v,
                adam_step=s,
                iteration=state.iteration + 1,
                step_size=torch.tensor(lr_t, dtype=x.dtype, device=x.device),
                loss=running,
                history=history,
            )
            lp = -losses.detach() if stacked else -losses.detach()[0]
            return new, EnsembleInfo(lp, new.step_size, _FALSE)

        return Kernel(init, step, fit_steps=total)

    def fit(
        self,
        posterior: Posterior,
        data: tuple[Tensor, Tensor],
        *,
        seed: int = 0,
        progress: bool = True,
        output: str | None = None,
    ) -> Samples:
        """Train the members on ``data = (inputs, targets)``; returns them as one-chain Samples.

        The members run through :func:`bnnkit.sample` as ``K`` vectorised chains of the kernel
        of :meth:`build` (their own minibatches; ``output=`` streams, checkpoints and resumes).
        ``N`` in the minibatch scaling is the number of rows of ``data`` (as in Bayes by Backprop;
        the posterior's ``num_data`` is not used).
        ``stats["log_density"]`` holds each member's final unnormalised log posterior on the full
        data; ``config["history"]["loss"]`` the members' mean objective ``-J_k / N`` per epoch.
        """
        from ..core.driver import sample
        from ..data.minibatch import Minibatches

        data = posterior.as_data(data)
        if self.anchored:
            _check_anchorable(posterior)
        inputs, targets = data
        n = int(inputs.shape[0])
        bs = resolve_batch_size(self.batch_size, n)
        k_members = self.num_members
        gens = [make_generator(seed, k) for k in range(k_members)]
        anchors = noisy = None
        if self.anchored:
            anchors = torch.stack([posterior.sample_prior(g) for g in gens])
            noise = posterior.likelihood.noise  # type: ignore[attr-defined]
            noisy = torch.stack(
                [targets + noise * torch.randn(targets.shape, generator=g, dtype=targets.dtype) for g in gens]
            )
        starts = self._initial(posterior, gens, anchors)
        view = posterior.view
        algo: Any = self if anchors is None else _Anchored(self, anchors, noisy)
        tensors = (
            (inputs, targets) if anchors is None else (inputs, targets, torch.arange(n, device=inputs.device))
        )
        stream = Minibatches(*tensors, batch_size=bs)
        try:
            s = sample(
                algo,
                posterior.with_num_data(n),
                stream,
                num_samples=1,
                num_chains=k_members,
                chain_method="vectorized",
                init=lambda c, gen: view.unravel(starts[c]),
                seed=seed,
                progress=progress,
                output=output,
                validate=anchors is None,
            )
        except DivergenceError as err:
            raise BnnkitError(
                "the ensemble's loss became non-finite; lower lr (e.g. by 10x) or check the data scale."
            ) from err
        state = s.final_states[0]
        final = s.positions[:, 0].clone()
        history = {"loss": [float(v) for v in state.history if math.isfinite(float(v))]}
        loss_fn = _MemberLoss(posterior, None)
        log_density = _log_posterior(posterior, loss_fn, final, inputs, targets, bs)
        stats = {"log_density": log_density.unsqueeze(0)}
        config = {"ensemble": self.config(), "history": history}
        return Samples(final.unsqueeze(0), stats, posterior.view, config)

    def _initial(self, posterior: Posterior, gens: list[torch.Generator], anchors: Tensor | None) -> Tensor:
        if self.init == "prior":
            if anchors is not None:
                return anchors.clone()
            return torch.stack([posterior.sample_prior(g) for g in gens])
        module = copy.deepcopy(posterior.module)  # re-initialised in turn for each member
        return torch.stack([_reinitialised(posterior, module, g) for g in gens])


def _check_anchorable(posterior: Posterior) -> None:
    prior, lik = posterior.prior, posterior.likelihood
    why = (
        "anchored ensembles (randomise-then-optimise) turn each member's optimum into a posterior draw "
        "only for a Gaussian prior with fixed scales and a Gaussian likelihood with fixed noise"
    )
    if not isinstance(prior, GaussianPrior) or prior.learn_precision:
        raise BnnkitError(
            f"{why}; this posterior has a {type(prior).__name__}"
            f"{' with a learnt precision' if isinstance(prior, GaussianPrior) else ''}. Use a "
            "GaussianPrior(scale) with learn_precision=False, or anchored=False."
        )
    if not isinstance(lik, Gaussian) or lik.learn_noise:
        raise BnnkitError(
            f"{why}; this posterior has a {type(lik).__name__} likelihood"
            f"{' with a learnt noise' if isinstance(lik, Gaussian) else ''}. Use Gaussian(noise) with "
            "learn_noise=False, or anchored=False (a plain deep ensemble)."
        )


def _reinitialised(posterior: Posterior, module: torch.nn.Module, gen: torch.Generator) -> Tensor:
    """``module`` (a copy of the posterior's) re-initialised under a seed taken from ``gen``.

    Every submodule's ``reset_parameters`` draws from a generator seeded with that seed
    (:func:`~bnnkit.core.random.init_module_`): the weights a reset gives after seeding the global
    RNG with that seed, but with the caller's global random state left alone.
    """
    member_seed = int(torch.randint(0, 2**62, (1,), generator=gen))
    init_module_(module, torch.Generator().manual_seed(member_seed))
    named = dict(module.named_parameters())
    net = {n: named[n].detach() for n in posterior.net_names}
    return posterior.view.ravel({**net, **posterior.initial_extras}).to(posterior.view.dtype)


class _MemberLoss:
    """Per-member objective ``-J_k(w) / N`` for a stack of members ``[K, D]`` (vmap, else a loop)."""

    def __init__(self, posterior: Posterior, anchor_inv_var: Tensor | None):
        self.posterior = posterior
        self.inv_var = anchor_inv_var
        self.use_vmap = True

    def one(self, w: Tensor, xb: Tensor, yb: Tensor, anchor: Tensor | None, scale: float, n: int) -> Tensor:
        post = self.posterior
        net, lik, _ = post.split(w)
        ll = post.likelihood.log_prob(post.forward(net, xb), yb, lik)
        if anchor is None:
            lp = post.log_prior_flat(w)
        else:
            d = w - anchor
            lp = -0.5 * torch.dot(d * d, self.inv_var)
        return -(scale * ll + lp) / n

    def __call__(
        self,
        w: Tensor,
        xb: Tensor,
        yb: Tensor,
        anchors: Tensor | None,
        scale: float,
        n: int,
        x_batched: bool,
        y_batched: bool,
    ) -> Tensor:
        dims = (0, 0 if x_batched else None, 0 if y_batched else None, None if anchors is None else 0)
        if self.use_vmap:
            fn: Callable[..., Tensor] = torch.func.vmap(self.one, in_dims=(*dims, None, None))
            try:
                return fn(w, xb, yb, anchors, scale, n)
            except (RuntimeError, ValueError):  # a module vmap cannot trace: loop over members
                self.use_vmap = False
        out = []
        for k in range(w.shape[0]):
            args = [a[k] if d == 0 else a for a, d in zip((w, xb, yb, anchors), dims)]
            out.append(self.one(*args, scale, n))
        return torch.stack(out)


def _log_posterior(
    posterior: Posterior, loss_fn: _MemberLoss, w: Tensor, inputs: Tensor, targets: Tensor, chunk: int
) -> Tensor:
    """Each member's unnormalised full-data log posterior (the real prior, original targets)."""
    plain = _MemberLoss(posterior, None)
    plain.use_vmap = loss_fn.use_vmap
    n = int(inputs.shape[0])
    with torch.no_grad():
        log_prior = torch.stack([posterior.log_prior_flat(x) for x in w])
        total = log_prior.clone()
        for i in range(0, n, chunk):
            # plain() with scale 1 and n = 1 is -(log-likelihood of the chunk + log prior)
            neg = plain(w, inputs[i : i + chunk], targets[i : i + chunk], None, 1.0, 1, False, False)
            total += -neg - log_prior
    return total


class EnsembleState(NamedTuple):
    position: Tensor  # the members' weights: [K, D] (vectorised) or [D] (one member)
    exp_avg: Tensor  # Adam's first moments, like position
    exp_avg_sq: Tensor  # Adam's second moments, like position
    adam_step: Tensor  # float32 0-d: Adam's step count
    iteration: Tensor  # int64 0-d
    step_size: Tensor  # the learning rate of the last step
    loss: Tensor  # 0-d: this epoch's running mean loss (the final epoch's once fitted)
    history: Tensor  # [num_epochs]: the members' mean loss -J_k / N per epoch, NaN after


class EnsembleInfo(NamedTuple):
    log_density: Tensor  # each member's minibatch objective J_k / N (its final one for the draws)
    step_size: Tensor
    collect: Tensor


class _Anchored:
    """A DeepEnsemble with the anchors and perturbed targets :meth:`DeepEnsemble.fit` drew."""

    needs_model = True
    vectorizable = True

    def __init__(self, ensemble: DeepEnsemble, anchors: Tensor, noisy: Tensor):
        self.ensemble, self.anchors, self.noisy = ensemble, anchors, noisy
        self.name = ensemble.name

    def config(self) -> dict:
        return self.ensemble.config()

    def build(self, target: Any, model: Any = None) -> Kernel:
        return self.ensemble.build(target, model, anchors=self.anchors, noisy=self.noisy)


def _start(position: Tensor, lr: float, num_epochs: int) -> EnsembleState:
    """The members' state before their first step: at ``position``, Adam's moments at 0."""
    x = position.detach().clone()
    return EnsembleState(
        position=x,
        **adam_start(x, lr),
        loss=torch.zeros((), dtype=x.dtype, device=x.device),
        history=torch.full((num_epochs,), math.nan, dtype=x.dtype, device=x.device),
    )


def _prior_precision(posterior: Posterior) -> Tensor:
    """The Gaussian prior's precision per parameter, ``1 / s^2`` (an anchored ensemble's penalty)."""
    prior: GaussianPrior = posterior.prior  # type: ignore[assignment]
    s = scale_vector(posterior.view, prior.scale, prior.scales)
    return 1.0 / (s * s)


def _stacked(t: Tensor, stacked: bool) -> Tensor:
    return t if stacked else t[None]


def _member_batch(batch: Any, stacked: bool, k: int, noisy: Tensor | None) -> tuple[Tensor, Tensor]:
    """Each member's inputs and targets ``[K, M, ...]``: its own minibatch, or the shared batch
    given a chain axis; an anchored ensemble's targets are its perturbed ones at the batch's rows."""
    xb, yb = batch[0], batch[1]
    x_batched = stacked and _chain_batched(xb, yb, k)
    if not x_batched:  # one member, or members sharing a full batch: give them a chain axis
        xb, yb = xb.expand(k, *xb.shape), yb.expand(k, *yb.shape)
        rows_idx = batch[2].expand(k, *batch[2].shape) if len(batch) > 2 else None
    else:
        rows_idx = batch[2] if len(batch) > 2 else None
    if noisy is not None:
        if rows_idx is None:
            raise BnnkitError("an anchored ensemble's data must carry each row's index (see fit).")
        mine = noisy if stacked else noisy[:1]
        yb = mine.gather(1, rows_idx)
    return xb, yb


def _epoch_loss(
    state: EnsembleState, losses: Tensor, t: int, per_epoch: int, total: int
) -> tuple[Tensor, Tensor]:
    """The loss history and the epoch's running mean loss after step ``t``: at an epoch's end its
    mean loss goes into the history and the next epoch's starts at 0 (the last epoch's stays:
    the draws report it)."""
    epoch_loss = state.loss + losses.detach().mean() / per_epoch
    history, running = state.history, epoch_loss
    if (t + 1) % per_epoch == 0:
        history = history.clone()
        history[t // per_epoch] = epoch_loss
        if t + 1 < total:
            running = torch.zeros_like(epoch_loss)
    return history, running


def _chain_batched(xb: Tensor, yb: Tensor, k: int) -> bool:
    """Whether a vectorised run's batch has a chain axis (``[K, M, ...]``, bnnkit.data.Minibatches)
    rather than being one batch shared by the members (plain ``(inputs, targets)`` data)."""
    return xb.ndim >= 2 and xb.shape[0] == k and yb.ndim >= 2 and yb.shape[0] == k
