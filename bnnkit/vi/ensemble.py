"""Deep ensembles (Lakshminarayanan et al. 2017) and anchored ensembles (Pearce et al. 2020).

A deep ensemble is ``K`` independent MAP fits of the posterior, each from its own random
initialisation and minibatch order.  Member ``k`` maximises, one minibatch ``B`` of ``M`` of the
``N`` rows at a time (Adam)::

    J_k(w) = (N / M) sum_{i in B} log p(y_i | f(x_i; w)) + log p(w)

The member parameter vectors are returned as a one-chain :class:`~bnnkit.Samples` (draws =
members), so :func:`bnnkit.predict.predict` gives the ensemble's predictive (an equally weighted
mixture).  On a convex problem every member reaches the same MAP: a plain ensemble then has no
spread at all, it only captures the multi-modality of a network's posterior.

``anchored=True``: randomise-then-optimise (Bardsley et al. 2014), the "anchored ensembles" of
Pearce et al. (2020).  For a Gaussian prior ``N(0, S)`` and a Gaussian likelihood with fixed noise
``sigma``, member ``k`` draws an anchor ``a_k ~ N(0, S)`` and perturbed targets
``y~_k = y + sigma * eps_k`` (``eps_k ~ N(0, I)``, drawn once), then maximises::

    J_k(w) = (N / M) sum_{i in B} log N(y~_ki; f(x_i; w), sigma^2) - 1/2 (w - a_k)^T S^-1 (w - a_k)

For a linear-Gaussian model ``f(x; w) = x^T w`` the optimum is
``w_k = H^-1 (X^T y~_k / sigma^2 + S^-1 a_k)`` with ``H = X^T X / sigma^2 + S^-1``: its mean is the
posterior mean and its covariance ``H^-1 (X^T X / sigma^2 + S^-1) H^-1 = H^-1`` the posterior
covariance, so every member is an exact posterior draw.  For a network it is an approximation.

All members are optimised together as one ``[K, D]`` tensor through ``torch.func.vmap`` (a plain
loop over members for modules vmap cannot trace); Adam's update is elementwise, so this is exactly
``K`` independent Adam runs.  Member ``k`` draws its initialisation, anchor, target noise and
minibatch order from its own generator ``make_generator(seed, k)``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least, check_positive, resolve_batch_size
from ..core.posterior import Posterior
from ..core.random import init_module_, make_generator
from ..core.samples import Samples
from ..likelihoods.gaussian import Gaussian
from ..priors.base import scale_vector
from ..priors.gaussian import GaussianPrior

INITS = ("module", "prior")


@dataclass(frozen=True)
class DeepEnsemble:
    """Ensemble of MAP fits; ``anchored=True`` for randomise-then-optimise (see the module doc).

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
        check_positive("lr", self.lr)
        check_int_at_least("num_epochs", self.num_epochs, 1)
        if self.batch_size is not None:
            check_int_at_least("batch_size", self.batch_size, 1)
        if self.init not in INITS:
            raise BnnkitError(f"init must be one of {INITS}, got {self.init!r}.")
        if self.lr_decay not in (None, "cosine"):
            raise BnnkitError(f"lr_decay must be None or 'cosine', got {self.lr_decay!r}.")

    def config(self) -> dict:
        return asdict(self)

    def fit(
        self,
        posterior: Posterior,
        data: tuple[Tensor, Tensor],
        *,
        seed: int = 0,
        progress: bool = True,
    ) -> Samples:
        """Train the members on ``data = (inputs, targets)``; returns them as one-chain Samples.

        ``N`` in the minibatch scaling is the number of rows of ``data`` (as in Bayes by Backprop;
        the posterior's ``num_data`` is not used).
        ``stats["log_density"]`` holds each member's final unnormalised log posterior on the full
        data; ``config["history"]["loss"]`` the members' mean objective ``-J_k / N`` per epoch.
        """
        posterior.check_data(data)
        if self.anchored:
            _check_anchorable(posterior)
        inputs, targets = data
        n = int(inputs.shape[0])
        bs = resolve_batch_size(self.batch_size, n)
        k_members = self.num_members
        gens = [make_generator(seed, k) for k in range(k_members)]
        anchors = noisy = inv_var = None
        if self.anchored:
            anchors = torch.stack([posterior.sample_prior(g) for g in gens])
            prior: GaussianPrior = posterior.prior  # type: ignore[assignment]
            s = scale_vector(posterior.view, prior.scale, prior.scales)
            inv_var = 1.0 / (s * s)
            noise = posterior.likelihood.noise  # type: ignore[attr-defined]
            noisy = torch.stack(
                [targets + noise * torch.randn(targets.shape, generator=g, dtype=targets.dtype) for g in gens]
            )
        w = self._initial(posterior, gens, anchors).requires_grad_(True)
        loss_fn = _MemberLoss(posterior, inv_var)
        opt = torch.optim.Adam([w], lr=self.lr)
        num_batches = math.ceil(n / bs)
        total = self.num_epochs * num_batches
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, total) if self.lr_decay == "cosine" else None
        rows = torch.arange(k_members).unsqueeze(-1)
        history: dict[str, list[float]] = {"loss": []}
        bar = _bar(self.num_epochs, progress, "deep-ensemble")
        for _ in range(self.num_epochs):
            perms = torch.stack([torch.randperm(n, generator=g) for g in gens]) if bs < n else None
            epoch = 0.0
            for i in range(num_batches):
                if perms is None:  # full batch: the members share the inputs, no copies
                    xb, yb, m = inputs, (targets if noisy is None else noisy), n
                    x_batched, y_batched = False, noisy is not None
                else:  # member k's own minibatch: [K, M, ...]
                    idx = perms[:, i * bs : (i + 1) * bs]
                    xb, m = inputs[idx], int(idx.shape[1])
                    yb = targets[idx] if noisy is None else noisy[rows, idx]
                    x_batched = y_batched = True
                losses = loss_fn(w, xb, yb, anchors, n / m, n, x_batched, y_batched)
                loss = losses.sum()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                if sched is not None:
                    sched.step()
                epoch += float(loss.detach()) / (k_members * num_batches)
            history["loss"].append(epoch)
            if not math.isfinite(epoch):
                raise BnnkitError(
                    "the ensemble's loss became non-finite; lower lr (e.g. by 10x) or check the data scale."
                )
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{epoch:.4g}", refresh=False)
        if bar is not None:
            bar.close()
        final = w.detach().clone()
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


def _bar(total: int, progress: bool, desc: str):
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="epoch", mininterval=0.25, dynamic_ncols=True)
