"""``bnnkit.fit``: from your ``nn.Module`` and your data to a posterior you can use, in one call."""

from __future__ import annotations

import time
from typing import Any

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_finite_rows
from ..core.random import global_rng_seeded
from ..data.coerce import as_pair, is_loader
from .methods import GP_OPTIONS, METHODS, Problem, runner
from .recipe import DEFAULT_RECIPE, SamplerRecipe, capped_map_advice, noiseless_advice
from .result import Fit, diagnose, fingerprint
from .scaling import Scaling

LIKELIHOODS = ("auto", "gaussian", "categorical", "bernoulli")


def fit(
    module: torch.nn.Module,
    data: Any,
    *,
    method: str = "default",
    likelihood: str = "auto",
    seed: int = 0,
    progress: bool = True,
    output: str | None = None,
    standardize: bool = True,
    batch_size: int | None = None,
    recipe: SamplerRecipe | None = None,
    **options: Any,
) -> Fit:
    """Fit a posterior over ``module``'s weights to ``data`` and return a :class:`~bnnkit.api.Fit`.

    Args:
        module: your network; it is called as ``module(inputs)`` and never modified.  Chains run
            where its parameters are (move it to CUDA first to sample on a GPU).
        data: ``(inputs, targets)`` as tensors or NumPy arrays, or a ``torch.utils.data.DataLoader``
            yielding such pairs (its rows are read once; its ``batch_size`` becomes the minibatch).
        method: ``"default"`` (the benchmarks' default sampler recipe,
            :mod:`bnnkit.api.recipe`) or one of ``"sghmc"``, ``"fsgld"``, ``"fsghmc"`` (a GP prior
            on the outputs), ``"nuts"``, ``"hmc"``, ``"laplace"``, ``"mcdropout"``, ``"ensemble"``,
            ``"bbb"``.
        likelihood: ``"auto"`` (floating targets: Gaussian regression with the noise learned;
            integer targets: categorical when the module has several outputs, Bernoulli when it
            has one), or ``"gaussian"``, ``"categorical"``, ``"bernoulli"``.
        seed: every random draw of the fit comes from generators seeded by it.
        progress: progress bars for every phase.
        output: a folder to stream the draws to (sampling methods); rerunning the same call after
            an interruption resumes there.
        standardize: fit on standardised targets (regression) and, for tabular ``[N, d]``
            inputs, standardised features; predictions and metrics are always in your units.
        batch_size: minibatch rows (default 32, or the DataLoader's).
        recipe: the sampler recipe of ``"default"`` and ``"sghmc"`` (default
            :data:`~bnnkit.api.DEFAULT_RECIPE`); e.g. ``SamplerRecipe(chains=8)``.
        **options: method settings: ``prior_scale`` (weight prior sd, default 1), ``noise``
            (the fixed noise sd, standardised, of mcdropout / ensemble / bbb; default: a GP fit's),
            ``p`` (dropout rate), ``members`` (ensemble size), ``draws``, ``warmup`` (nuts / hmc),
            ``kernel`` (the GP prior of fsgld / fsghmc, a :func:`~bnnkit.functional.make_kernel` spec;
            default ``"rbf"``), ``box_points`` / ``box_margin`` (fsgld / fsghmc: measurement points
            added uniformly in the inputs' box, widened by ``box_margin`` of its range; default 0),
            ``edge_points`` (fsgld / fsghmc: measurement points a step, each a training row with
            one input moved past its range into that margin; default 0),
            ``gp_points`` (fsgld / fsghmc: at most this many training rows fit the GP prior's
            hyperparameters; default 500), ``prior_factors`` (fsgld / fsghmc: the Vecchia
            factors, of 9 network rows each, a step's prior term is estimated from; default 8),
            ``measure_at`` (fsgld / fsghmc: inputs where you will predict, in your units, added
            to the measurement points so that the GP prior reaches them; up to 1,000 training rows).
    """
    # over 80 lines only for the documented arguments above: the body is checks, then one Problem
    t0 = time.perf_counter()
    params = _checked_call(module, method, likelihood, output, options)
    if is_loader(data) and batch_size is None:
        batch_size = data.batch_size
    x, y = as_pair(data)
    if x.shape[0] != y.shape[0]:
        raise BnnkitError(f"{x.shape[0]} input rows but {y.shape[0]} targets; pass one target per row.")
    if x.shape[0] < 2:
        raise BnnkitError(f"fit needs at least 2 rows of data, got {x.shape[0]}.")
    check_finite_rows("inputs", x)
    check_finite_rows("targets", y)
    device, dtype = params[0].device, params[0].dtype
    kind = _kind(_first_rows_out(module, x[:2].to(device=device, dtype=dtype)), y, likelihood)
    if kind == "regression" and y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    scaling, xs, ys = _standardised(x, y, kind, standardize, device, dtype)
    if "measure_at" in options:  # inputs in the caller's units, standardised as the rows are
        options = {**options, "measure_at": _measure_at(options["measure_at"], x, scaling, device, dtype)}
    m = batch_size or DEFAULT_RECIPE.batch_size
    if not (isinstance(m, int) and m >= 1):
        raise BnnkitError(f"batch_size must be a positive integer, got {batch_size!r}.")
    if recipe is not None and not isinstance(recipe, SamplerRecipe):
        raise BnnkitError(f"recipe must be a bnnkit.api.SamplerRecipe, got {type(recipe).__name__}.")
    problem = Problem(
        module,
        kind,
        xs,
        ys,
        min(m, xs.shape[0]),
        seed,
        progress,
        output,
        dict(options),
        recipe or DEFAULT_RECIPE,
    )
    run, chains = runner(method)
    with global_rng_seeded(seed):  # modules built inside (dropout copies) draw from a seeded fork
        post, result = run(problem)
    from ..laplace import Laplace

    la = result if isinstance(result, Laplace) else None
    draws = None if la is not None else result
    check_x = xs[torch.linspace(0, xs.shape[0] - 1, min(100, xs.shape[0])).round().long()]
    diagnostics = diagnose(method, chains, post, draws, check_x)
    if method == "default" and draws is not None:  # measured for the default only
        conv = draws.config.get("convergence")
        advice = (
            noiseless_advice(problem.recipe, conv, ys)
            if kind == "regression"
            else capped_map_advice(problem.recipe, conv)
        )
        if advice is not None:
            diagnostics["advice"] = advice
    seconds = time.perf_counter() - t0
    out = Fit(
        method, kind, post, draws, la, scaling, diagnostics, fingerprint(module), dict(options), seconds
    )
    if progress:
        print(f"bnnkit.fit: {out.summary()}")
    return out


def _checked_call(
    module: Any, method: str, likelihood: str, output: str | None, options: dict[str, Any]
) -> list[torch.nn.Parameter]:
    """``module``'s parameters, after checking the arguments that need no data."""
    if not isinstance(module, torch.nn.Module):
        raise BnnkitError(f"module must be a torch.nn.Module, got {type(module).__name__}.")
    params = list(module.parameters())
    if not params:
        raise BnnkitError("the module has no parameters to put a posterior on.")
    if method not in METHODS:
        raise BnnkitError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}.")
    if likelihood not in LIKELIHOODS:
        raise BnnkitError(f"likelihood must be one of {', '.join(LIKELIHOODS)}, got {likelihood!r}.")
    if output is not None and method in ("laplace", "mcdropout", "ensemble", "bbb"):
        raise BnnkitError(
            f"output= streams the draws of the sampling methods (default, sghmc, fsgld, fsghmc, nuts, hmc) "
            f"so that an interrupted run resumes; {method!r} is fitted in memory: drop output= and save the "
            "result with fit.save(path)."
        )
    known = {"prior_scale", "noise", "p", "members", "draws", "warmup"} | GP_OPTIONS
    unknown = sorted(set(options) - known)
    if unknown:
        raise BnnkitError(f"unknown option(s) {unknown}; fit takes {sorted(known)}.")
    gp_only = sorted(GP_OPTIONS & set(options))
    if gp_only and method not in ("fsgld", "fsghmc"):
        raise BnnkitError(
            f"{', '.join(gp_only)} set the GP prior of fsgld / fsghmc; method {method!r} has none."
        )
    if not isinstance(options.get("widen", True), bool):  # a string such as "no" would be truthy
        raise BnnkitError(f"widen must be True or False, got {options['widen']!r}.")
    return params


def _standardised(
    x: Tensor, y: Tensor, kind: str, standardize: bool, device: torch.device, dtype: torch.dtype
) -> tuple[Scaling, Tensor, Tensor]:
    """The scaling and the inputs / targets the method sees (on the module's device and dtype)."""
    # the statistics and the standardisation in float64 from the data as given, then the
    # module's dtype: the same numbers as the UCI loader's standardised splits
    scaling = Scaling.from_data(
        x, y, inputs=standardize and x.ndim == 2, targets=standardize and kind == "regression"
    )
    xs = scaling.inputs(x if x.is_floating_point() else x.to(torch.float64)).to(device=device, dtype=dtype)
    if kind == "regression":
        ys = scaling.targets(y if y.is_floating_point() else y.to(torch.float64)).to(
            device=device, dtype=dtype
        )
    elif kind == "bernoulli":
        ys = y.to(device=device, dtype=dtype).reshape(-1)
    else:
        ys = y.to(device=device).long().reshape(-1)
    return scaling, xs, ys


def _measure_at(value: Any, x: Tensor, scaling: Scaling, device: torch.device, dtype: torch.dtype) -> Tensor:
    """fsgld / fsghmc's ``measure_at`` inputs checked against the rows' shape and standardised."""
    from ..data.coerce import as_tensor

    m = as_tensor(value, "measure_at")
    if m.ndim != x.ndim or m.shape[1:] != x.shape[1:] or m.shape[0] < 1:
        raise BnnkitError(
            f"measure_at must hold rows shaped as the inputs' ({tuple(x.shape[1:])}), got shape {tuple(m.shape)}."
        )
    check_finite_rows("measure_at", m)
    return scaling.inputs(m if m.is_floating_point() else m.to(torch.float64)).to(device=device, dtype=dtype)


def _first_rows_out(module: torch.nn.Module, x: Tensor) -> Tensor:
    """The module's output on the first two rows, refusing a forward that fails on them or does
    not give one output row per input row (before any work, with what to change)."""
    # in eval mode, each submodule's mode restored after: no dropout draw from the caller's random
    # state and no batch-norm statistics updated by this check
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        with torch.no_grad():
            out = module(x[:2])
    except Exception as err:  # noqa: BLE001 - any failure of the user's forward gets the same help
        hint = (
            " A 1-D input is one row per value: for one feature pass x.reshape(-1, 1)."
            if x.ndim == 1
            else f" Each row has shape {tuple(x.shape[1:])}: does the module's first layer take that?"
        )
        raise BnnkitError(f"the module failed on inputs of shape {tuple(x[:2].shape)}: {err}.{hint}") from err
    finally:
        for m, mode in modes:
            m.training = mode
    if out.ndim == 0 or out.shape[0] != 2:
        raise BnnkitError(
            f"the module returned shape {tuple(out.shape)} for inputs of shape {tuple(x[:2].shape)}; "
            "it must return one output row per input row."
        )
    return out


def _kind(out: Tensor, y: Tensor, likelihood: str) -> str:
    """The task (regression, categorical or bernoulli) from the likelihood asked for, the targets
    and the module's output ``out`` on two rows; class labels are checked against its width."""
    if likelihood == "gaussian":
        return "regression"
    if likelihood not in ("categorical", "bernoulli") and y.is_floating_point():
        return "regression"
    width = int(out.shape[-1]) if out.ndim > 1 else 1
    kind = (
        likelihood
        if likelihood in ("categorical", "bernoulli")
        else ("categorical" if width > 1 else "bernoulli")
    )
    if kind == "categorical" and y.numel():
        lo, hi = int(y.min()), int(y.max())
        if lo < 0 or hi >= width:
            raise BnnkitError(
                f"class labels must be 0 .. {width - 1} for a module with {width} outputs; the targets "
                f"run from {lo} to {hi}. Encode the classes as 0 .. C-1 and give the last layer C outputs."
            )
    return kind
