"""The bandit's agents, one per method: :mod:`bnnkit.decisions`' agents built from the protocol's
configuration, and the step rules of its SG-MCMC agents."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ...core.errors import BnnkitError
from ...core.random import global_rng_seeded
from ...decisions import (
    ChainAgent,
    FunctionalVariationalAgent,
    GreedyAgent,
    LaplaceAgent,
    OneHotContextPoints,
    RefitAgent,
    VariationalAgent,
)
from ...nets import mlp
from ..methods import GP_PRIOR, MOMENTUM, SG, sg_algorithm
from .protocol import GREEDY_EPSILON, METHODS


def hmc_like(kind: Any, momentum_decay: float) -> Callable[[float], Any]:
    """``eps -> (f)SGHMC`` whose drift matches (f)SGLD's at step ``eps``.

    SGLD moves ``(eps / 2) g`` per step.  SGHMC in learning-rate form, ``v <- (1 - a) v + lr g +
    noise``, ``w <- w + v``, moves ``lr g / a`` per step once the momentum has settled, so
    ``lr = a eps / 2`` gives the same drift; the momentum carries the chain through ``1 / a``
    steps of one minibatch's noise instead of one.
    """
    return lambda eps: kind.from_learning_rate(momentum_decay * eps / 2, momentum_decay)


def _sg_algorithm(method: str, cfg: dict, lr: float, max_step: float) -> Callable[[int], Any]:
    """``n -> algorithm`` of an SG-MCMC ``method`` at buffer size ``n``: (f)SGLD at
    ``eps = min(2 lr sigma^2 / n, max_step)``, or (f)SGHMC with (f)SGLD's drift (:func:`hmc_like`)."""
    kind = sg_algorithm(method)
    make = hmc_like(kind, cfg["sghmc_momentum_decay"]) if method in MOMENTUM else kind
    return lambda n: make(min(2 * lr * cfg["noise"] ** 2 / n, max_step))


def make_agent(method: str, d: int, cfg: dict, seed: int, blocks: list[tuple[int, int]]) -> Any:
    """The agent of ``method`` on inputs of width ``d`` (context and the two actions' one-hot code);
    ``blocks``: the context's one-hot attribute blocks (:func:`bnnkit.decisions.one_hot_blocks`)."""
    from ...core.posterior import Posterior
    from ...likelihoods import Gaussian
    from ...priors import GaussianPrior

    with global_rng_seeded(seed):  # the same initial weights for every method of a seed
        net = mlp(d, cfg["hidden"], torch.nn.ReLU)
    greedy = {
        "lr": cfg["greedy_lr"],
        "weight_decay": cfg["greedy_weight_decay"],
        "updates": cfg["updates"],
        "batch_size": cfg["batch_size"],
    }
    if method in GREEDY_EPSILON:
        return GreedyAgent(net, GREEDY_EPSILON[method], **greedy)
    if method == "default":
        from ...api import SamplerRecipe

        short = cfg["default_recipe"]  # quick mode's short recipe
        return RefitAgent(net, cfg["default_first_fit"], None if short is None else SamplerRecipe(**short))
    lik = Gaussian(cfg["noise"])
    scales = {k: v for k, v in cfg["prior_scales"].items() if k != "default"}
    prior = GaussianPrior(cfg["prior_scales"]["default"], scales=scales)
    chain = {"updates": cfg["updates"], "batch_size": cfg["batch_size"]}
    vi = {
        "lr": cfg["bbb_lr"],
        "updates": cfg["bbb_updates"],
        "batch_size": cfg["batch_size"],
        "init_sigma": cfg["bbb_init_sigma"],
    }
    if method == "laplace":
        return LaplaceAgent(Posterior(net, lik, prior), net, cfg["laplace_every"], **greedy)
    if method == "bbb":
        return VariationalAgent(Posterior(net, lik, prior, num_data=1), estimator=cfg["bbb_estimator"], **vi)
    if method in SG:
        post = Posterior(net, lik, prior, num_data=1)
        return ChainAgent(post, _sg_algorithm(method, cfg, cfg["sgld_lr"], cfg["sgld_max_step"]), **chain)
    if method in GP_PRIOR:
        post = _functional_posterior(net, lik, d, cfg, blocks)
        if method == "fbnn":
            return FunctionalVariationalAgent(post, function_samples=cfg["fbnn_function_samples"], **vi)
        return ChainAgent(post, _sg_algorithm(method, cfg, cfg["fsgld_lr"], cfg["fsgld_max_step"]), **chain)
    raise BnnkitError(f"unknown method {method!r}; choose from {', '.join(METHODS)}.")


def _functional_posterior(net, lik, d: int, cfg: dict, blocks: list[tuple[int, int]]) -> Any:
    """The functional agents' posterior: the fixed isotropic RBF GP prior over (context, action)
    inputs, measured at :class:`~bnnkit.decisions.OneHotContextPoints`, with the isotropic
    Gaussian weight term ``N(0, fsgld_weight_scale^2)``."""
    from ...functional import FunctionalPosterior, GPPrior

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
    # the bandit never evaluates (SG-MCMC steps draw the points from each minibatch).
    return FunctionalPosterior(
        net,
        lik,
        gp,
        OneHotContextPoints(blocks, cfg["gp_points"], cfg["gp_random_points"]),
        torch.zeros(1, d),
        num_data=1,
        weight_scale=cfg["fsgld_weight_scale"],
    )
