"""Stacking chains that sit in different modes (Yao, Vehtari and Gelman 2022, "Stacking for
non-mixing Bayesian computations: the curse and blessing of multimodal posteriors").

Each chain ``k`` gets the leave-one-out log predictive density of every row ``n`` from its own
draws, by Pareto-smoothed importance sampling (ArviZ ``psislw``, as its ``loo``), and the chains are weighted by

    w = argmax_{w in simplex} sum_n log sum_k w_k exp(elpd_loo_{k,n})

so a chain whose mode predicts left-out rows worse loses weight, where equal weights would
average it in.  The weights read only the rows the chains were fitted to.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch import Tensor


def loo_per_chain(log_lik: Tensor | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pointwise PSIS-LOO ``[K, N]`` of each chain's draws ``log_lik [K, S, N]`` (``log p(y_n |
    theta_{k,s})``), and each chain's Pareto k ``[K, N]`` (above 0.7 a row's estimate is
    unreliable)."""
    arr = (
        log_lik.detach().double().cpu().numpy() if isinstance(log_lik, Tensor) else np.asarray(log_lik, float)
    )
    if arr.ndim != 3 or arr.shape[1] < 2 or not np.isfinite(arr).all():
        raise ValueError(f"log_lik must be finite and shaped [chain, draw >= 2, N], got shape {arr.shape}.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ArviZ warns on high k: returned to the caller
        import arviz as az
        from scipy.special import logsumexp

        loo, k = [], []
        for chain in arr:  # [S, N]: ArviZ smooths the weights of each row over its last axis
            lw, kc = az.psislw(-chain.T)
            loo.append(logsumexp(lw + chain.T, axis=-1))
            k.append(np.asarray(kc))
    return np.stack(loo), np.stack(k)


def stacking_weights(loo: np.ndarray) -> np.ndarray:
    """The simplex weights ``[K]`` maximising ``sum_n log sum_k w_k exp(loo[k, n])`` (softmax
    parametrisation, Nelder-Mead from equal weights: K is a handful)."""
    from scipy.optimize import minimize

    e = np.exp(loo - loo.max(0))

    def objective(z: np.ndarray) -> float:
        w = np.exp(z - z.max())
        return -float(np.log(e.T @ (w / w.sum())).sum())

    z = minimize(objective, np.zeros(loo.shape[0]), method="Nelder-Mead",
                 options={"xatol": 1e-6, "fatol": 1e-8, "maxiter": 4000}).x  # fmt: skip
    w = np.exp(z - z.max())
    return w / w.sum()


def stacked_log_weights(log_lik: Tensor) -> tuple[Tensor, dict]:
    """Per-draw log weights ``[K, S]`` (``log w_k - log S``) stacking the chains of ``log_lik [K,
    S, N]``, and a report (the chain weights, each chain's mean LOO density and share of rows with
    Pareto k > 0.7)."""
    loo, k = loo_per_chain(log_lik)
    w = stacking_weights(loo)
    s = log_lik.shape[1]
    with np.errstate(divide="ignore"):
        lw = torch.tensor(np.log(w) - np.log(s), dtype=torch.float64)
    report = {
        "chain_weights": w.tolist(),
        "loo_mean": loo.mean(1).tolist(),
        "bad_k_share": (k > 0.7).mean(1).tolist(),
        "rows": int(loo.shape[1]),
    }
    return lw[:, None].expand(-1, s).clone(), report
