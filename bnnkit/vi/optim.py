"""A lean Adam for the few flat tensors of a variational posterior.

``torch.optim.Adam(fused=True)`` spends most of a step, at BNN sizes, in Python: grouping the
tensors by device and dtype, checks, per-parameter state handling.  With one parameter group of a
couple of flat vectors (``mu`` and ``rho``) none of that is needed: :class:`FlatAdam` calls the same
fused kernel directly and gives bit-for-bit the updates of ``torch.optim.Adam(fused=True)``
(state laid out the same way, learning-rate schedulers and optimiser hooks work as usual).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least, check_positive


class FlatAdam(torch.optim.Optimizer):
    """Adam (Kingma & Ba 2015) without weight decay or amsgrad, one fused kernel per step."""

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ):
        check_positive("lr", lr)
        check_positive("eps", eps)
        if not all(0.0 <= b < 1.0 for b in betas):
            raise BnnkitError(f"betas must lie in [0, 1), got {betas!r}.")
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            states = [self.state[p] for p in params]
            for p, st in zip(params, states):
                if not st:
                    st["step"] = torch.tensor(0.0, dtype=torch.float32, device=p.device)
                    st["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    st["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            steps = [st["step"] for st in states]
            torch._foreach_add_(steps, 1.0)
            beta1, beta2 = group["betas"]
            torch._fused_adam_(
                params,
                [p.grad for p in params],
                [st["exp_avg"] for st in states],
                [st["exp_avg_sq"] for st in states],
                [],
                steps,
                amsgrad=False,
                lr=float(group["lr"]),
                beta1=beta1,
                beta2=beta2,
                weight_decay=0.0,
                eps=group["eps"],
                maximize=False,
            )
        return loss


def adam_update(
    params: Tensor,
    grad: Tensor,
    exp_avg: Tensor,
    exp_avg_sq: Tensor,
    step: Tensor,
    lr: float,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One Adam step (Kingma & Ba 2015) as a pure function of tensors, for minimising a loss.

    With ``g`` the gradient of the loss and ``t = step + 1``::

        m <- b1 m + (1 - b1) g,   v <- b2 v + (1 - b2) g^2
        params <- params - lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)

    Returns new ``(params, exp_avg, exp_avg_sq, step)``; the inputs are left as they were (the
    fused kernel works in place, so it runs on copies), which keeps a kernel's old state valid.
    The arithmetic is that of ``torch.optim.Adam(fused=True)`` and :class:`FlatAdam`.
    """
    p, m, v = params.clone(), exp_avg.clone(), exp_avg_sq.clone()
    t = step + 1
    torch._fused_adam_(
        [p],
        [grad],
        [m],
        [v],
        [],
        [t],
        amsgrad=False,
        lr=float(lr),
        beta1=betas[0],
        beta2=betas[1],
        weight_decay=0.0,
        eps=eps,
        maximize=False,
    )
    return p, m, v, t


def cosine_lr(lr: float, t: int, total: int) -> float:
    """``lr`` at step ``t`` of a cosine decay to 0 over ``total`` steps (``CosineAnnealingLR``'s
    closed form): ``lr (1 + cos(pi t / total)) / 2``."""
    return 0.5 * lr * (1.0 + math.cos(math.pi * min(t, total) / total))


def scheduled_lr(lr: float, lr_decay: str | None, t: int, total: int) -> float:
    """The learning rate of step ``t`` of ``total``: ``lr``, or with ``lr_decay="cosine"``
    :func:`cosine_lr`."""
    return lr if lr_decay is None else cosine_lr(lr, t, total)


def check_fit_options(lr: float, num_epochs: int, batch_size: int | None, lr_decay: str | None) -> None:
    """The checks of the options every Adam-trained VI method shares (its ``__post_init__``)."""
    check_positive("lr", lr)
    check_int_at_least("num_epochs", num_epochs, 1)
    if batch_size is not None:
        check_int_at_least("batch_size", batch_size, 1)
    if lr_decay not in (None, "cosine"):
        raise BnnkitError(f"lr_decay must be None or 'cosine', got {lr_decay!r}.")


def batches_per_epoch(batch_size: int | None, num_data: int | None) -> int:
    """Minibatches in an epoch of ``num_data`` rows: 1 for the full batch (``batch_size`` or
    ``num_data`` None), else ``ceil(num_data / min(batch_size, num_data))``."""
    if batch_size is None or num_data is None:
        return 1
    return math.ceil(num_data / min(batch_size, num_data))


def adam_start(params: Tensor, lr: float) -> dict[str, Tensor]:
    """The fields an Adam-trained kernel's state starts with, for the parameters ``params``:
    zero moments ``exp_avg`` and ``exp_avg_sq``, ``adam_step`` (float32 0-d) and ``iteration``
    (int64 0-d) at 0, and ``step_size`` ``lr``."""
    zeros = torch.zeros_like(params)
    return {
        "exp_avg": zeros,
        "exp_avg_sq": zeros.clone(),
        "adam_step": torch.zeros((), dtype=torch.float32, device=params.device),
        "iteration": torch.zeros((), dtype=torch.int64),
        "step_size": torch.tensor(lr, dtype=params.dtype),
    }


def loss_fit_start(params: Tensor, lr: float, num_epochs: int, columns: int) -> dict[str, Tensor]:
    """The fields of a point-estimate fit's state (MC dropout, Bayesian layers) at its start:
    :func:`adam_start`'s, the epoch's running mean loss and NLL ``sums`` at 0 and an empty
    ``[num_epochs, columns]`` ``history`` (NaN)."""
    return {
        **adam_start(params, lr),
        "sums": torch.zeros(2, dtype=params.dtype, device=params.device),
        "history": torch.full((num_epochs, columns), math.nan, dtype=params.dtype, device=params.device),
    }


def loss_fit_step(
    state: Any,
    params: Tensor,
    grad: Tensor,
    loss: Tensor,
    nll: Tensor,
    t: int,
    schedule: tuple[float, str | None, int, int],
    extra: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Step ``t`` of a point-estimate fit whose state has :func:`loss_fit_start`'s fields: one
    Adam step of ``params`` on ``grad`` at :func:`scheduled_lr`, with ``schedule = (lr, lr_decay,
    total steps, steps per epoch)``, and the step's ``loss`` and ``nll`` added to the epoch's
    means; at an epoch's end they (and the ``extra`` columns) become its row of the history.
    Returns the new parameters and the state's new fields."""
    lr, lr_decay, total, per_epoch = schedule
    lr_t = scheduled_lr(lr, lr_decay, t, total)
    x, m, v, s = adam_update(params, grad, state.exp_avg, state.exp_avg_sq, state.adam_step, lr_t)
    sums = state.sums + torch.stack([loss.detach(), nll.detach()]) / per_epoch
    history = state.history
    if (t + 1) % per_epoch == 0:
        history = history.clone()
        history[t // per_epoch] = sums if extra is None else torch.cat([sums, extra])
        sums = torch.zeros_like(sums)
    fields = {
        "exp_avg": m,
        "exp_avg_sq": v,
        "adam_step": s,
        "iteration": state.iteration + 1,
        "step_size": torch.tensor(lr_t, dtype=x.dtype),
        "sums": sums,
        "history": history,
    }
    return x, fields
