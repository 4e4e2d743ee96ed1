"""Stan-style windowed warm-up: dual-averaging step size and a windowed diagonal metric.

Dual averaging (Hoffman & Gelman 2014, after Nesterov 2009), for the accept statistic ``a_t``
and target ``delta``::

    H_t      = (1 - 1/(t + t0)) H_{t-1} + (delta - a_t) / (t + t0)
    log e_t  = mu - sqrt(t) / gamma * H_t
    log eb_t = t^-kappa log e_t + (1 - t^-kappa) log eb_{t-1}

with ``mu = log(b e_0)``; ``b = 10`` (Stan's bias towards larger steps) suits HMC, ``b = 1`` a
random walk, whose acceptance falls slowly with the scale.  The diagonal metric (inverse mass, or the random-walk proposal
variance) is the regularised variance of the positions seen in "slow" windows that double in size
(Stan's 75 / 25-doubling / 50 schedule, scaled down for short warm-ups)::

    var_reg = n/(n+5) var + 1e-3 * 5/(n+5)

At the end of each window the metric is updated and dual averaging restarts.  Everything is a
NamedTuple of tensors, so a warm-up interrupted half way resumes bit-for-bit.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch
from torch import Tensor

from ..core.types import Adaptation


class WindowState(NamedTuple):
    iteration: Tensor
    num_warmup: Tensor
    log_step: Tensor
    log_step_bar: Tensor
    h_bar: Tensor
    mu: Tensor
    da_count: Tensor
    w_count: Tensor
    w_mean: Tensor
    w_m2: Tensor


def window_schedule(
    num_warmup: int, init_buffer: int = 75, term_buffer: int = 50, base: int = 25
) -> tuple[int, list[int]]:
    """Start of the first slow window and the iteration counts at which slow windows end."""
    if num_warmup < 20:
        return num_warmup, []
    if init_buffer + term_buffer + base > num_warmup:
        init_buffer = int(0.15 * num_warmup)
        term_buffer = int(0.1 * num_warmup)
        base = num_warmup - init_buffer - term_buffer
    ends: list[int] = []
    start, size = init_buffer, base
    last = num_warmup - term_buffer
    while True:
        end = start + size
        if end + 2 * size > last:
            ends.append(last)
            break
        ends.append(end)
        start, size = end, 2 * size
    return init_buffer, ends


def window_adaptation(
    target_accept: float = 0.8,
    adapt_metric: bool = True,
    adapt_step: bool = True,
    initial_bias: float = 10.0,
    gamma: float = 0.05,
    t0: float = 10.0,
    kappa: float = 0.75,
) -> Adaptation:
    """Adaptation for any state with ``position``, ``step_size`` and ``inv_mass`` fields."""

    def init(state: Any, num_warmup: int) -> WindowState:
        x = state.position
        z = torch.zeros((), dtype=torch.float64)
        log_e = torch.log(state.step_size.double())
        return WindowState(
            iteration=torch.zeros((), dtype=torch.int64),
            num_warmup=torch.tensor(num_warmup, dtype=torch.int64),
            log_step=log_e,
            log_step_bar=z.clone(),
            h_bar=z.clone(),
            mu=log_e + math.log(initial_bias),
            da_count=z.clone(),
            w_count=z.clone(),
            w_mean=torch.zeros_like(x, dtype=torch.float64),
            w_m2=torch.zeros_like(x, dtype=torch.float64),
        )

    def update(a: WindowState, state: Any, info: Any) -> tuple[WindowState, Any]:
        t = int(a.iteration) + 1
        # dual averaging on log step size
        n = a.da_count + 1
        eta = 1.0 / (n + t0)
        accept = torch.nan_to_num(info.accept_prob.double(), nan=0.0)
        h_bar = (1 - eta) * a.h_bar + eta * (target_accept - accept)
        log_step = a.mu - torch.sqrt(n) / gamma * h_bar
        w = n ** (-kappa)
        log_step_bar = w * log_step + (1 - w) * a.log_step_bar
        a = a._replace(
            iteration=a.iteration + 1, log_step=log_step, log_step_bar=log_step_bar, h_bar=h_bar, da_count=n
        )
        inv_mass = state.inv_mass
        if adapt_metric:
            start, ends = window_schedule(int(a.num_warmup))
            if ends and start < t <= ends[-1]:
                x = state.position.double()
                c = a.w_count + 1
                delta = x - a.w_mean
                mean = a.w_mean + delta / c
                m2 = a.w_m2 + delta * (x - mean)
                a = a._replace(w_count=c, w_mean=mean, w_m2=m2)
                if t in ends:
                    var = a.w_m2 / (c - 1).clamp(min=1)
                    var = (c / (c + 5)) * var + 1e-3 * (5 / (c + 5))
                    inv_mass = var.to(state.inv_mass.dtype)
                    z = torch.zeros((), dtype=torch.float64)
                    a = a._replace(
                        w_count=z.clone(),
                        w_mean=torch.zeros_like(a.w_mean),
                        w_m2=torch.zeros_like(a.w_m2),
                        mu=log_step + math.log(initial_bias),
                        h_bar=z.clone(),
                        da_count=z.clone(),
                        log_step_bar=z.clone(),
                    )
        if adapt_step:
            state = state._replace(step_size=log_step.exp().to(state.step_size.dtype))
        return a, state._replace(inv_mass=inv_mass)

    def finalize(a: WindowState, state: Any) -> Any:
        if not adapt_step:
            return state
        log_e = a.log_step_bar if float(a.da_count) > 0 else a.log_step
        return state._replace(step_size=log_e.exp().to(state.step_size.dtype))

    return Adaptation(init, update, finalize)
