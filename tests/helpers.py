"""Closed-form reference posteriors and Monte-Carlo tolerance checks shared by the tests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

import bnnkit
from bnnkit.diagnostics import ess


@dataclass
class LinearProblem:
    """Conjugate Bayesian linear regression written as an ``nn.Linear`` (no bias)."""

    X: Tensor
    y: Tensor
    sigma: float
    prior_scale: float
    mean: Tensor
    cov: Tensor
    module: torch.nn.Module

    def posterior(self, **kw) -> bnnkit.Posterior:
        return bnnkit.Posterior(
            self.module, bnnkit.Gaussian(self.sigma), bnnkit.GaussianPrior(self.prior_scale), **kw
        )

    def predictive(self, Xs: Tensor) -> tuple[Tensor, Tensor]:
        """Exact posterior predictive mean and variance (incl. noise) at ``Xs``."""
        m = Xs @ self.mean
        v = ((Xs @ self.cov) * Xs).sum(-1) + self.sigma**2
        return m, v


def linear_problem(
    n: int = 30, d: int = 2, sigma: float = 0.5, prior_scale: float = 1.0, seed: int = 0
) -> LinearProblem:
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    w = torch.linspace(-1, 1, d, dtype=torch.float64)
    y = X @ w + sigma * torch.randn(n, generator=g, dtype=torch.float64)
    prec = X.T @ X / sigma**2 + torch.eye(d, dtype=torch.float64) / prior_scale**2
    cov = torch.linalg.inv(prec)
    mean = cov @ X.T @ y / sigma**2
    module = torch.nn.Linear(d, 1, bias=False).double()
    return LinearProblem(X, y, sigma, prior_scale, mean, cov, module)


def mlp_regression(n: int = 40, num_data: int | None = None):
    """A small float64 MLP regression posterior (3 inputs, tanh 6-6-1, noise 0.3, N(0, 1) prior)
    and its data ``(post, X, y)``: a nonlinear target for comparing two sampler paths."""
    from bnnkit.nets import mlp

    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, 3, generator=g, dtype=torch.float64)
    y = torch.sin(X[:, 0]) + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    torch.manual_seed(0)
    post = bnnkit.Posterior(
        mlp(3, 6).double(), bnnkit.Gaussian(0.3), bnnkit.GaussianPrior(1.0), num_data=num_data
    )
    return post, X, y


def assert_gaussian_matches(
    draws: Tensor,
    mean: Tensor,
    cov: Tensor,
    k_mean: float = 4.0,
    k_cov: float = 5.0,
    ess_values: np.ndarray | None = None,
    weights: Tensor | None = None,
) -> None:
    """Check draws ``[chain, draw, d]`` against N(mean, cov) within Monte-Carlo error.

    Mean: each coordinate within ``k_mean`` standard errors ``sqrt(var_i / ESS_i)``.
    Covariance: for Gaussian draws the sample covariance entry ``S_ij`` has variance
    ``(C_ii C_jj + C_ij^2) / n_eff``; each entry must lie within ``k_cov`` such standard errors.
    ``n_eff`` is the smallest ESS of the centred products ``(x_i - m_i)(x_j - m_j)`` themselves:
    an antithetic sampler (HMC with a fixed trajectory on a Gaussian) can have a mean ESS far
    above the number of draws while its second moments mix no better than independent draws.
    For weighted draws ``n_eff`` is the weight ESS.
    """
    d = mean.numel()
    if weights is None:
        e = ess(draws) if ess_values is None else ess_values
        flat = draws.reshape(-1, d).double()
        m = flat.mean(0)
        S = torch.cov(flat.T).reshape(d, d)
    else:
        w = (weights / weights.sum()).double()
        flat = draws.reshape(-1, d).double()
        m = (w[:, None] * flat).sum(0)
        c = flat - m
        S = (w[:, None] * c).T @ c
        e = np.full(d, float(1.0 / (w**2).sum())) if ess_values is None else ess_values
    e = torch.as_tensor(np.asarray(e), dtype=torch.float64).reshape(-1)
    se_mean = (cov.diag() / e).sqrt()
    z = (m - mean).abs() / se_mean
    assert bool((z < k_mean).all()), f"mean off by {z.tolist()} standard errors (ESS {e.tolist()})"
    if weights is None:
        c = draws.double() - m
        prods = (c[..., :, None] * c[..., None, :]).reshape(*draws.shape[:2], -1)
        n_eff = float(min(ess(prods).min(), e.min()))
    else:
        n_eff = float(e.min())
    se_cov = ((cov.diag()[:, None] * cov.diag()[None, :] + cov**2) / n_eff).sqrt()
    zc = (S - cov).abs() / se_cov
    assert bool((zc < k_cov).all()), f"covariance off by {zc.max().item():.2f} SE: sample\n{S}\nexact\n{cov}"


def sg_errors(draws: Tensor, mean: Tensor, cov: Tensor) -> tuple[float, float]:
    """Discretisation error of an SG-MCMC run: (largest |mean error| in posterior standard
    deviations, relative Frobenius error of the sample covariance)."""
    x = draws.reshape(-1, mean.numel()).double()
    z = ((x.mean(0) - mean) / cov.diag().sqrt()).abs().max()
    rel = (torch.cov(x.T).reshape(cov.shape) - cov).norm() / cov.norm()
    return float(z), float(rel)


class Interrupted:
    """Wraps an algorithm so its step raises KeyboardInterrupt after ``stop_after`` steps (a
    simulated crash); name and configuration are the wrapped algorithm's, so a resumed run with
    the plain algorithm accepts the output directory."""

    def __init__(self, inner, stop_after: int):
        self.inner, self.stop_after = inner, stop_after
        self.name = inner.name
        self.sampling_fraction = getattr(inner, "sampling_fraction", 1.0)
        self.vectorizable = getattr(inner, "vectorizable", False)

    def config(self) -> dict:
        return self.inner.config()

    def build(self, target):
        kernel = self.inner.build(target)
        calls = {"n": 0}

        def step(state, batch, gen):
            calls["n"] += 1
            if calls["n"] > self.stop_after:
                raise KeyboardInterrupt
            return kernel.step(state, batch, gen)

        return kernel._replace(step=step)


def whitened_cov_error(draws: Tensor, cov: Tensor) -> float:
    """Largest relative error of the sample covariance along any direction:
    ``max |eig(L^-1 S L^-T) - 1|`` with ``cov = L L^T`` (sensitive to the stiff directions that a
    Frobenius norm hides)."""
    x = draws.reshape(-1, cov.shape[0]).double()
    S = torch.cov(x.T).reshape(cov.shape)
    L = torch.linalg.cholesky(cov)
    W = torch.linalg.solve_triangular(L, torch.linalg.solve_triangular(L, S, upper=False).T, upper=False)
    return float((torch.linalg.eigvalsh(0.5 * (W + W.T)) - 1).abs().max())


def write_uci_folder(root: Path, name: str = "toyset", n: int = 60, splits: int = 2, seed: int = 0) -> Path:
    """A small regression set in the standard layout: 3 inputs, the target in the last column."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    y = x @ np.array([1.0, -2.0, 0.5]) + 10.0 + 0.1 * rng.normal(size=n)
    folder = root / "uci" / name
    folder.mkdir(parents=True)
    np.savetxt(folder / "data.txt", np.column_stack([x, y]))
    (folder / "index_features.txt").write_text("0\n1\n2\n")
    (folder / "index_target.txt").write_text("3\n")
    (folder / "n_splits.txt").write_text(f"{splits}\n")
    for i in range(splits):
        perm = rng.permutation(n)
        k = n - n // 10
        np.savetxt(folder / f"index_train_{i}.txt", perm[:k], fmt="%d")
        np.savetxt(folder / f"index_test_{i}.txt", perm[k:], fmt="%d")
    return folder
