"""A 2-parameter Bayesian logistic regression with its posterior computed by grid quadrature."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

import bnnkit

PRIOR_SCALE = 1.5


@dataclass
class LogisticReference:
    X: Tensor
    y: Tensor
    mean: Tensor  # [2]: (weight, bias)
    cov: Tensor
    x_test: Tensor
    p_test: Tensor  # exact predictive P(y=1 | x_test)

    def posterior(self) -> bnnkit.Posterior:
        module = torch.nn.Linear(1, 1).double()
        return bnnkit.Posterior(module, bnnkit.Bernoulli(), bnnkit.GaussianPrior(PRIOR_SCALE))


def logistic_reference(n: int = 30, grid: int = 401, seed: int = 0) -> LogisticReference:
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 1, generator=g, dtype=torch.float64)
    y = (torch.rand(n, generator=g, dtype=torch.float64) < torch.sigmoid(1.5 * X[:, 0] - 0.5)).double()

    def log_post(w: Tensor, b: Tensor) -> Tensor:  # w, b: [G, G]
        logits = w[..., None] * X[:, 0] + b[..., None]
        ll = -torch.nn.functional.binary_cross_entropy_with_logits(
            logits, y.expand_as(logits), reduction="none"
        ).sum(-1)
        return ll - 0.5 * (w**2 + b**2) / PRIOR_SCALE**2

    # locate the mass on a coarse grid, then integrate on a fine grid over +-7 sd around the mean
    lin = torch.linspace(-8, 8, 201, dtype=torch.float64)
    W, B = torch.meshgrid(lin, lin, indexing="ij")
    p = torch.softmax(log_post(W, B).reshape(-1), 0).reshape(W.shape)
    m = torch.stack([(p * W).sum(), (p * B).sum()])
    sd = torch.stack([((p * (W - m[0]) ** 2).sum()).sqrt(), ((p * (B - m[1]) ** 2).sum()).sqrt()])
    w_lin = torch.linspace(float(m[0] - 7 * sd[0]), float(m[0] + 7 * sd[0]), grid, dtype=torch.float64)
    b_lin = torch.linspace(float(m[1] - 7 * sd[1]), float(m[1] + 7 * sd[1]), grid, dtype=torch.float64)
    W, B = torch.meshgrid(w_lin, b_lin, indexing="ij")
    p = torch.softmax(log_post(W, B).reshape(-1), 0).reshape(W.shape)
    mean = torch.stack([(p * W).sum(), (p * B).sum()])
    dw, db = W - mean[0], B - mean[1]
    cov = torch.stack(
        [
            torch.stack([(p * dw * dw).sum(), (p * dw * db).sum()]),
            torch.stack([(p * dw * db).sum(), (p * db * db).sum()]),
        ]
    )
    x_test = torch.tensor([-2.0, 0.0, 1.0, 3.0], dtype=torch.float64)
    p_test = torch.stack([(p * torch.sigmoid(W * xt + B)).sum() for xt in x_test])
    return LogisticReference(X, y, mean, cov, x_test, p_test)
