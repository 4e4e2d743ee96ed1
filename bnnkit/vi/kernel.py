"""Variational inference as a kernel on the samplers' contract, run by :func:`bnnkit.sample`.

A mean-field Gaussian ``q(w) = N(mu, diag(softplus(rho)^2))`` is fitted by Adam on a stochastic
objective, one minibatch per step, and then drawn from.  The state is a NamedTuple of tensors
(:class:`VIState`): the variational parameters, Adam's moments and step count, the epoch's
running sums and the per-epoch history, so the driver checkpoints and resumes a fit bit for bit
as it does a chain.  With ``T = num_epochs * B`` (``B`` minibatches per epoch) the kernel's step
``t`` is:

- ``t < T`` (fit): the objective returns the gradient ``g`` of the loss ``-L_t`` in ``(mu, rho)``,
  then one Adam step (:func:`~bnnkit.vi.optim.adam_update`) with learning rate ``lr_t``
  (constant, or ``lr (1 + cos(pi t / T)) / 2``)::

      m <- b1 m + (1 - b1) g,   v <- b2 v + (1 - b2) g^2,
      (mu, rho) <- (mu, rho) - lr_t m^ / (sqrt(v^) + eps)      (m^, v^ bias-corrected)

  ``position`` is ``mu`` and ``info.collect`` is false: the driver keeps no draw.  At the end of
  each epoch the running sums become a row of the history and, with a validation set, the
  validation NLL decides early stopping (``patience``); the best parameters are restored at the
  end of the fit.
- ``t >= T`` (draws): ``position = mu + softplus(rho) * eps``, ``eps ~ N(0, I)`` from the chain's
  generator, and ``info.collect`` is true: the driver keeps (and streams) these draws, which
  :func:`bnnkit.predict.predict` takes like posterior samples.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least
from ..core.types import Batch, Kernel
from .meanfield import inverse_softplus
from .optim import adam_start, adam_update, scheduled_lr

_TRUE, _FALSE = torch.tensor(True), torch.tensor(False)


class VIState(NamedTuple):
    position: Tensor  # mu while fitting; the last draw from q afterwards
    params: Tensor  # [2, D]: row 0 mu, row 1 rho (sigma = softplus(rho))
    exp_avg: Tensor  # Adam's first moments [2, D]
    exp_avg_sq: Tensor  # Adam's second moments [2, D]
    adam_step: Tensor  # float32 0-d: Adam's step count (its bias correction)
    iteration: Tensor  # int64 0-d: steps taken, fit and draws
    step_size: Tensor  # the learning rate of the last fit step (shown by the progress bar)
    epoch_sums: Tensor  # the running sums of this epoch's per-step records
    history: Tensor  # [num_epochs, columns]: one row per finished epoch, NaN after
    best_params: Tensor  # [2, D]: the parameters of the best validation NLL (early stopping)
    best_val: Tensor  # 0-d: that NLL (inf before the first validation)
    bad_epochs: Tensor  # int64 0-d: epochs since the validation NLL last improved
    stopped: Tensor  # bool 0-d: early stopping ended the fit
    elbo: Tensor  # 0-d: the last finished epoch's objective (the progress bar, the draws' stats)


class VIInfo(NamedTuple):
    """What a step of a fitting kernel reports (mean-field VI, MC dropout, Bayesian layers)."""

    elbo: Tensor  # the step's objective estimate (fit) or the fitted one (draws)
    step_size: Tensor
    collect: Tensor  # bool (_TRUE, _FALSE): a draw the driver keeps


Objective = Callable[[Tensor, Tensor, Batch, torch.Generator, int], tuple[Tensor, Tensor, Tensor, Tensor]]
"""``(mu, rho, batch, generator, t) -> (grad_mu, grad_rho, record, elbo)``: the gradient of the
step's loss, this step's record (a 1-d tensor summed over the epoch) and its ELBO estimate."""


def mean_field_kernel(
    *,
    objective: Objective,
    summarise: Callable[[Tensor], Tensor],
    num_columns: int,
    num_records: int,
    num_epochs: int,
    batches_per_epoch: int,
    lr: float,
    lr_decay: str | None,
    init_sigma: float,
    validation: Callable[[Tensor, Tensor, torch.Generator], Tensor] | None = None,
    patience: int | None = None,
    check_batch: Callable[[Batch], None] | None = None,
) -> Kernel:
    """The kernel described in the module doc.

    ``summarise(sums) -> row`` turns an epoch's summed records into its history row
    (``num_columns`` values; with ``validation`` one more column, the validation NLL, is added).
    ``check_batch`` checks the first batch (e.g. its size against the algorithm's ``batch_size``).
    """
    total = num_epochs * batches_per_epoch
    cols = num_columns + (validation is not None)

    def init(position: Tensor, batch: Batch) -> VIState:
        if check_batch is not None:
            check_batch(batch)
        mu = position.detach().clone()
        params = torch.stack([mu, torch.full_like(mu, inverse_softplus(init_sigma))])
        return VIState(
            position=params[0],
            params=params,
            **adam_start(params, lr),
            epoch_sums=torch.zeros(num_records, dtype=mu.dtype, device=mu.device),
            history=torch.full((num_epochs, cols), math.nan, dtype=mu.dtype, device=mu.device),
            best_params=params.clone(),
            best_val=torch.tensor(math.inf, dtype=mu.dtype, device=mu.device),
            bad_epochs=torch.zeros((), dtype=torch.int64),
            stopped=_FALSE,
            elbo=torch.zeros((), dtype=mu.dtype, device=mu.device),
        )

    def step(state: VIState, batch: Batch, gen: torch.Generator) -> tuple[VIState, VIInfo]:
        t = int(state.iteration)
        if t >= total:
            return _draw(state, gen)
        if patience is not None and bool(state.stopped):  # early-stopped: the fit's last steps idle
            return state._replace(iteration=state.iteration + 1), VIInfo(state.elbo, state.step_size, _FALSE)
        params = state.params
        mu = params[0].detach().requires_grad_(True)
        rho = params[1].detach().requires_grad_(True)
        g_mu, g_rho, record, elbo = objective(mu, rho, batch, gen, t)
        lr_t = scheduled_lr(lr, lr_decay, t, total)
        p, m, v, s = adam_update(
            params, torch.stack([g_mu, g_rho]), state.exp_avg, state.exp_avg_sq, state.adam_step, lr_t
        )
        sums = state.epoch_sums + record.detach()
        new = state._replace(
            position=p[0],
            params=p,
            exp_avg=m,
            exp_avg_sq=v,
            adam_step=s,
            iteration=state.iteration + 1,
            step_size=state.step_size if lr_decay is None else torch.tensor(lr_t, dtype=p.dtype),
            epoch_sums=sums,
        )
        if (t + 1) % batches_per_epoch == 0:
            new = _end_epoch(
                new, t // batches_per_epoch, gen, summarise, num_columns, validation, patience, num_epochs
            )
        return new, VIInfo(elbo.detach(), new.step_size, _FALSE)

    return Kernel(init, step, fit_steps=total)


def _draw(state: VIState, gen: torch.Generator) -> tuple[VIState, VIInfo]:
    """A draw step: ``position = mu + softplus(rho) * eps``, ``eps ~ N(0, I)`` from ``gen``."""
    mu, rho = state.params[0], state.params[1]
    eps = torch.randn(mu.shape, generator=gen, dtype=mu.dtype, device=mu.device)
    w = torch.addcmul(mu, F.softplus(rho), eps)
    new = state._replace(position=w, iteration=state.iteration + 1)
    return new, VIInfo(state.elbo, state.step_size, _TRUE)


def _end_epoch(
    state: VIState,
    epoch: int,
    gen: torch.Generator,
    summarise: Callable[[Tensor], Tensor],
    num_columns: int,
    validation: Callable[[Tensor, Tensor, torch.Generator], Tensor] | None,
    patience: int | None,
    num_epochs: int,
) -> VIState:
    """The epoch's summed records into its history row, then the validation NLL's early stopping;
    the best parameters restored after the fit's last epoch."""
    row = summarise(state.epoch_sums)
    history = state.history.clone()
    history[epoch, :num_columns] = row
    new = state._replace(history=history, epoch_sums=torch.zeros_like(state.epoch_sums), elbo=row[0])
    if not math.isfinite(float(row[0])):  # the driver stops on it; say so in the history too
        return new
    if validation is not None:
        with torch.no_grad():
            val = validation(new.params[0], new.params[1], gen)
        history[epoch, num_columns] = val
        if float(val) < float(new.best_val) - 1e-6:
            new = new._replace(best_val=val, best_params=new.params.clone(), bad_epochs=new.bad_epochs * 0)
        else:
            new = new._replace(bad_epochs=new.bad_epochs + 1)
        if patience is not None and int(new.bad_epochs) >= patience:
            new = new._replace(stopped=_TRUE)
    last = epoch == num_epochs - 1 or bool(new.stopped)
    if last and patience is not None and math.isfinite(float(new.best_val)):
        new = new._replace(params=new.best_params.clone(), position=new.best_params[0].clone())
    return new


def elbo_kernel(
    algorithm: Any,
    objective: Objective,
    summarise: Callable[[Tensor], Tensor],
    num_batches: int,
    num_data: int | None,
    **options: Any,
) -> Kernel:
    """:func:`mean_field_kernel` with the hyperparameters of a mean-field ELBO ``algorithm``
    (Bayes by Backprop, FBNN: its ``num_epochs``, ``lr``, ``lr_decay`` and ``init_sigma``), three
    records per step summarised into three history columns, epochs of ``num_batches`` steps, and
    the data's batches checked against its ``batch_size`` and ``num_data``; ``options`` are the
    other keywords of :func:`mean_field_kernel` (``validation``, ``patience``)."""
    return mean_field_kernel(
        objective=objective,
        summarise=summarise,
        num_columns=3,
        num_records=3,
        num_epochs=algorithm.num_epochs,
        batches_per_epoch=num_batches,
        lr=algorithm.lr,
        lr_decay=algorithm.lr_decay,
        init_sigma=algorithm.init_sigma,
        check_batch=check_stream_batch(type(algorithm).__name__, algorithm.batch_size, num_data),
        **options,
    )


def history_dict(state: VIState, names: list[str]) -> dict[str, list[float]]:
    """The per-epoch history of a finished fit as ``{name: [value per epoch]}`` (epochs run)."""
    rows = state.history
    done = int(torch.isfinite(rows[:, 0]).sum()) if rows.numel() else 0
    out = {name: [float(v) for v in rows[:done, i]] for i, name in enumerate(names) if i < rows.shape[1]}
    return out


def draws_from_state(state: VIState, num: int, gen: torch.Generator) -> Tensor:
    """``num`` draws ``[num, D]`` from the fitted ``q`` of a state: ``mu + softplus(rho) * eps``."""
    check_int_at_least("num", num, 1)
    mu, rho = state.params[0], state.params[1]
    eps = torch.randn((num, mu.numel()), generator=gen, dtype=mu.dtype, device=mu.device)
    return mu + F.softplus(rho) * eps


def check_stream_batch(name: str, batch_size: int | None, num_data: int | None) -> Callable[[Batch], None]:
    """A check that the data stream's batches have the rows the algorithm's epochs assume."""

    def check(batch: Batch) -> None:
        rows = int(batch[0].shape[0])
        want = batch_size if batch_size is not None else num_data
        if want is not None and rows != min(want, num_data or want):
            raise BnnkitError(
                f"{name} was built for minibatches of {want} rows (batch_size={batch_size}, num_data={num_data}) "
                f"but the data gives {rows}; pass the same batch_size to the algorithm and to "
                "bnnkit.data.Minibatches, and the posterior's num_data = the data size."
            )

    return check
