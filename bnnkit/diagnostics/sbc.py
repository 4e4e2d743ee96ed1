"""Simulation-based calibration (SBC; Talts, Betancourt, Simpson, Vehtari & Gelman 2018).

If ``theta ~ p(theta)``, ``y ~ p(y | theta)`` and ``theta_1..theta_L`` are independent draws from
the exact posterior ``p(theta | y)``, then ``theta`` and the ``theta_l`` are exchangeable, so the
rank of ``theta`` among them, ``#{l : f(theta_l) < f(theta)}`` for any scalar test quantity ``f``,
is uniform on ``{0, ..., L}``.  A sampler that is biased, too narrow or too wide shows up as a
sloped, U-shaped or hump-shaped rank histogram over many replications; a chi-square test of the
binned ranks against uniformity turns it into a p-value.

Usage::

    ranks = sbc_ranks(prior_draw, simulate, sampler_draws(bnnkit.NUTS(), log_density, init=...,
                      num_warmup=300, thin=3), num_replications=200, num_draws=99, seed=0)
    tests = sbc_uniformity(ranks, bins=20)   # {quantity: SBCTest(statistic, p_value, ...)}

Autocorrelation: the rank is uniform only if the ``L`` draws are (nearly) independent; correlated
draws cluster, and the histogram of ranks becomes U-shaped even for a correct sampler (Talts et
al., section 5.1).  :func:`sampler_draws` thins each chain by a fixed ``thin`` and
:func:`sbc_ranks` can record the effective sample size of the kept draws per replication
(``SBCRanks.ess``) so that a study can check that ``ESS / L`` stays near 1 instead of trusting
the thinning blindly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least
from ..core.random import chain_seed, make_generator

PriorDraw = Callable[[torch.Generator], Mapping[str, Tensor]]
Simulate = Callable[[Mapping[str, Tensor], torch.Generator], Any]
PosteriorDraws = Callable[[Any, int, int], Mapping[str, Tensor]]
Quantities = Callable[[Mapping[str, Tensor]], Mapping[str, Tensor]]


@dataclass
class SBCRanks:
    """Ranks of the prior draw among the posterior draws, per test quantity.

    Attributes:
        ranks: ``{quantity: LongTensor [num_replications]}``, each rank in ``0..num_draws``.
        num_draws: ``L``, the posterior draws per replication.
        ess: ``{quantity: [num_replications]}`` bulk ESS of the ``L`` kept draws (ArviZ), when
            requested; near ``L`` means the draws were nearly independent.
        seed: the study's seed.
    """

    ranks: dict[str, Tensor]
    num_draws: int
    ess: dict[str, Tensor] | None = None
    seed: int = 0

    @property
    def num_replications(self) -> int:
        return int(next(iter(self.ranks.values())).numel())


@dataclass
class SBCTest:
    """Chi-square test of binned ranks against the uniform distribution."""

    statistic: float
    p_value: float
    df: int
    counts: list[int]


def scalar_quantities(params: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """Every scalar element of every parameter: ``{name or "name[i]": [n]}`` from ``[n, *shape]``
    tensors (``i`` the flat index of the element)."""
    out: dict[str, Tensor] = {}
    for name, t in params.items():
        flat = t.reshape(t.shape[0], -1)
        if flat.shape[1] == 1:
            out[name] = flat[:, 0]
        else:
            for i in range(flat.shape[1]):
                out[f"{name}[{i}]"] = flat[:, i]
    return out


def _as_quantities(
    params: Mapping[str, Tensor], quantities: Quantities, n: int, what: str
) -> dict[str, Tensor]:
    q = quantities(params)
    if not isinstance(q, Mapping) or not q:
        raise BnnkitError(f"quantities must return a non-empty dict of tensors, got {type(q).__name__}.")
    out = {}
    for name, v in q.items():
        v = torch.as_tensor(v).detach().reshape(-1)
        if v.numel() != n:
            raise BnnkitError(
                f"test quantity {name!r} of the {what} has {v.numel()} values, expected {n} (one per draw): "
                "return one scalar per draw for each quantity."
            )
        if not bool(torch.isfinite(v).all()):
            raise BnnkitError(f"test quantity {name!r} of the {what} is not finite.")
        out[name] = v.double()
    return out


def _batched(draw: Mapping[str, Tensor], what: str) -> dict[str, Tensor]:
    if not isinstance(draw, Mapping) or not draw:
        raise BnnkitError(
            f"{what} must return a non-empty dict of parameter tensors, got {type(draw).__name__}."
        )
    for name, t in draw.items():
        if not isinstance(t, Tensor):
            raise BnnkitError(f"{what}[{name!r}] must be a torch.Tensor, got {type(t).__name__}.")
    return {k: v.detach() for k, v in draw.items()}


def sbc_ranks(
    prior_draw: PriorDraw,
    simulate: Simulate,
    posterior_draws: PosteriorDraws,
    *,
    num_replications: int,
    num_draws: int,
    seed: int = 0,
    quantities: Quantities | None = None,
    compute_ess: bool = False,
    progress: Callable[[int, dict[str, int]], None] | None = None,
) -> SBCRanks:
    """Run an SBC study: ``num_replications`` times draw, simulate, sample and rank.

    Args:
        prior_draw: ``prior_draw(generator) -> {name: tensor}``, one draw from the prior.
        simulate: ``simulate(params, generator) -> data``, data from the likelihood given ``params``.
        posterior_draws: ``posterior_draws(data, num_draws, seed) -> {name: [num_draws, *shape]}``,
            ``num_draws`` (nearly) independent posterior draws; :func:`sampler_draws` builds one
            from any bnnkit sampler.
        num_replications: how many (prior draw, data set, posterior run) triples.
        num_draws: ``L``; ranks lie in ``0..L``.  Pick ``L + 1`` divisible by the number of bins
            of :func:`sbc_uniformity` (e.g. ``L = 99`` for 10 or 20 bins).
        seed: replication ``i`` draws the prior and the data from a generator seeded from
            ``(seed, i)`` and gives the sampler a seed derived from it, so a study is reproducible
            and each replication independent of the others.
        quantities: ``quantities(params) -> {name: [n]}``, scalar test quantities of parameters with
            a leading batch dimension ``n``; default :func:`scalar_quantities` (every element).
        compute_ess: also record the bulk ESS of each quantity's ``L`` draws (ArviZ).
        progress: ``progress(i, ranks_of_i)`` called after each replication.

    Ties between the prior draw and posterior draws (a discrete quantity) are broken uniformly at
    random, which keeps the rank uniform under the null.
    """
    check_int_at_least("num_replications", num_replications, 1)
    check_int_at_least("num_draws", num_draws, 1)
    check_int_at_least("seed", seed, 0)
    for name, fn in (
        ("prior_draw", prior_draw),
        ("simulate", simulate),
        ("posterior_draws", posterior_draws),
    ):
        if not callable(fn):
            raise BnnkitError(f"{name} must be a callable, got {type(fn).__name__}.")
    qfn: Quantities = scalar_quantities if quantities is None else quantities

    ranks: dict[str, list[int]] = {}
    ess_out: dict[str, list[float]] = {}
    for i in range(num_replications):
        gen = make_generator(seed, i)
        q0, qs = _replicate(
            prior_draw, simulate, posterior_draws, qfn, num_draws, chain_seed(seed + 1, i), gen
        )
        this = _ranks(q0, qs, gen)
        for name, rank in this.items():
            ranks.setdefault(name, []).append(rank)
        if compute_ess:
            from .arviz_utils import ess

            names = list(qs)
            e = ess(torch.stack([qs[n] for n in names], -1).unsqueeze(0))
            for n, v in zip(names, e.reshape(-1).tolist()):
                ess_out.setdefault(n, []).append(float(v))
        if progress is not None:
            progress(i, this)
    return SBCRanks(
        ranks={k: torch.tensor(v, dtype=torch.long) for k, v in ranks.items()},
        num_draws=num_draws,
        ess={k: torch.tensor(v, dtype=torch.float64) for k, v in ess_out.items()} if compute_ess else None,
        seed=seed,
    )


def _replicate(
    prior_draw: PriorDraw,
    simulate: Simulate,
    posterior_draws: PosteriorDraws,
    qfn: Quantities,
    num_draws: int,
    sampler_seed: int,
    gen: torch.Generator,
) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """One replication: a prior draw and data from ``gen``, the sampler's draws from
    ``sampler_seed`` (independent of the prior/data stream); the test quantities of both."""
    theta = _batched(prior_draw(gen), "prior_draw")
    data = simulate(theta, gen)
    draws = _batched(posterior_draws(data, num_draws, sampler_seed), "posterior_draws")
    for name, t in draws.items():
        if t.shape[0] != num_draws:
            raise BnnkitError(
                f"posterior_draws returned {t.shape[0]} draws of {name!r}, expected num_draws = {num_draws}."
            )
    q0 = _as_quantities({k: v.unsqueeze(0) for k, v in theta.items()}, qfn, 1, "prior draw")
    qs = _as_quantities(draws, qfn, num_draws, "posterior draws")
    if set(q0) != set(qs):
        raise BnnkitError(
            f"quantities differ between prior and posterior draws: {sorted(q0)} vs {sorted(qs)}."
        )
    return q0, qs


def _ranks(q0: dict[str, Tensor], qs: dict[str, Tensor], gen: torch.Generator) -> dict[str, int]:
    """The rank of each prior quantity among the posterior draws', ties broken uniformly from ``gen``."""
    this: dict[str, int] = {}
    for name, v0 in q0.items():
        below = int((qs[name] < v0).sum())
        ties = int((qs[name] == v0).sum())
        extra = int(torch.randint(0, ties + 1, (), generator=gen)) if ties else 0
        this[name] = below + extra
    return this


def sbc_uniformity(
    ranks: SBCRanks | Mapping[str, Tensor], num_draws: int | None = None, bins: int = 20
) -> dict[str, SBCTest]:
    """Chi-square test of uniformity of the ranks, per quantity.

    The ``L + 1`` possible ranks are grouped into ``bins`` bins of ``(L + 1) / bins`` ranks each
    (``bins`` must divide ``L + 1``, so that every bin has the same probability); with ``N``
    replications the statistic is ``sum_b (n_b - N / bins)^2 / (N / bins)`` with ``bins - 1``
    degrees of freedom.  Keep ``N / bins`` at 5 or more for the chi-square approximation.
    """
    if isinstance(ranks, SBCRanks):
        num_draws = ranks.num_draws if num_draws is None else num_draws
        table = ranks.ranks
    elif isinstance(ranks, Mapping):
        table = dict(ranks)
        if num_draws is None:
            raise BnnkitError("pass num_draws (L, the posterior draws per replication) with a dict of ranks.")
    else:
        raise BnnkitError(f"ranks must be an SBCRanks or a dict of rank tensors, got {type(ranks).__name__}.")
    check_int_at_least("num_draws", num_draws, 1)
    check_int_at_least("bins", bins, 2)
    if (num_draws + 1) % bins:
        raise BnnkitError(
            f"bins = {bins} does not divide num_draws + 1 = {num_draws + 1}: the bins would have unequal "
            f"probabilities. Use a divisor of {num_draws + 1} (or L = 99 with 10 or 20 bins)."
        )
    if not table:
        raise BnnkitError("no ranks to test.")
    from scipy.stats import chi2

    width = (num_draws + 1) // bins
    out: dict[str, SBCTest] = {}
    for name, r in table.items():
        r = torch.as_tensor(r).reshape(-1)
        if r.numel() < bins:
            raise BnnkitError(f"{name!r} has {r.numel()} ranks for {bins} bins; run more replications.")
        if r.is_floating_point() or int(r.min()) < 0 or int(r.max()) > num_draws:
            raise BnnkitError(f"ranks of {name!r} must be integers in 0..{num_draws}.")
        counts = torch.bincount(r // width, minlength=bins).double()
        expected = r.numel() / bins
        stat = float(((counts - expected) ** 2).sum() / expected)
        p = float(chi2.sf(stat, bins - 1))
        out[name] = SBCTest(stat, p if math.isfinite(p) else 0.0, bins - 1, [int(c) for c in counts])
    return out


def sampler_draws(
    algorithm: Any,
    log_density: Any,
    *,
    num_warmup: int,
    thin: int,
    init: Any = None,
    **sample_kwargs: Any,
) -> PosteriorDraws:
    """``posterior_draws`` for :func:`sbc_ranks` from a bnnkit sampler.

    Runs ``bnnkit.sample(algorithm, log_density, data, num_samples=L, num_warmup=num_warmup,
    thin=thin, seed=seed, init=init)`` on one chain and returns the ``L`` kept draws.  Choose
    ``thin`` so that the kept draws are nearly independent (check ``SBCRanks.ess``).  Weighted
    draws (importance sampling) are run with ``L * thin`` proposals and resampled to ``L`` draws
    in proportion to their weights (sampling-importance-resampling, with replacement).

    Args:
        log_density: a :class:`~bnnkit.Posterior` or a log density ``f(params, batch)``; the
            simulated data are passed as the batch.
        sample_kwargs: passed on to :func:`bnnkit.sample` (not ``num_samples``, ``thin``,
            ``seed``, ``num_chains``).
    """
    check_int_at_least("num_warmup", num_warmup, 0)
    check_int_at_least("thin", thin, 1)
    clash = {"num_samples", "thin", "seed", "num_chains", "num_warmup"} & set(sample_kwargs)
    if clash:
        raise BnnkitError(f"sampler_draws sets {sorted(clash)} itself; pass them as its own arguments.")

    def draws(data: Any, num_draws: int, seed: int) -> dict[str, Tensor]:
        from ..core.driver import sample

        kw = {"progress": False, **sample_kwargs}
        s = sample(
            algorithm,
            log_density,
            data,
            num_samples=num_draws * thin,
            num_warmup=num_warmup,
            thin=1,
            seed=seed,
            init=init,
            **kw,
        )
        if s.log_weights is not None:
            w = torch.softmax(s.log_weights.reshape(-1).double(), 0)
            idx = torch.multinomial(w, num_draws, replacement=True, generator=make_generator(seed, 1))
            pos = s.flat()[idx].unsqueeze(0)
        else:
            pos = s.positions[:, thin - 1 :: thin]  # every thin-th state after warm-up
        return {k: v.reshape(num_draws, *v.shape[2:]) for k, v in s.view.unravel(pos).items()}

    return draws
