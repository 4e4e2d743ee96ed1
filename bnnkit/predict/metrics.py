"""Predictive metrics: RMSE, accuracy, ECE (with reliability-diagram data), Brier, entropy, OOD AUROC."""

from __future__ import annotations

import torch
from torch import Tensor

from ..core.errors import BnnkitError


def _check(name: str, a: Tensor, b: Tensor | None = None) -> None:
    if a.numel() == 0:
        raise BnnkitError(f"{name}: empty input.")
    if b is not None and a.shape[0] != b.shape[0]:
        raise BnnkitError(f"{name}: {a.shape[0]} predictions but {b.shape[0]} targets.")


def rmse(mean: Tensor, y: Tensor) -> float:
    _check("rmse", mean, y)
    return float(((mean.reshape(y.shape) - y) ** 2).mean().sqrt())


def accuracy(probs: Tensor, y: Tensor) -> float:
    _check("accuracy", probs, y)
    return float((probs.argmax(-1) == y).double().mean())


def expected_calibration_error(
    probs: Tensor, y: Tensor, num_bins: int = 15
) -> tuple[float, dict[str, Tensor]]:
    """ECE with equal-width confidence bins; returns ``(ece, reliability)`` where ``reliability``
    holds per-bin ``confidence``, ``accuracy`` and ``count`` (for a reliability diagram)."""
    _check("expected_calibration_error", probs, y)
    conf, pred = probs.max(-1)
    correct = (pred == y).double()
    edges = torch.linspace(0, 1, num_bins + 1, dtype=torch.float64)
    idx = torch.clamp(torch.bucketize(conf.double(), edges[1:-1], right=True), 0, num_bins - 1)
    count = torch.bincount(idx, minlength=num_bins).double()
    conf_sum = torch.bincount(idx, weights=conf.double(), minlength=num_bins)
    acc_sum = torch.bincount(idx, weights=correct, minlength=num_bins)
    nz = count > 0
    bin_conf = torch.where(nz, conf_sum / count.clamp_min(1), torch.nan)
    bin_acc = torch.where(nz, acc_sum / count.clamp_min(1), torch.nan)
    ece = float((count[nz] / count.sum() * (bin_conf[nz] - bin_acc[nz]).abs()).sum())
    return ece, {"confidence": bin_conf, "accuracy": bin_acc, "count": count, "edges": edges}


def brier_score(probs: Tensor, y: Tensor) -> float:
    """Multi-class Brier score: ``mean_i sum_c (p_ic - 1[y_i = c])^2``."""
    _check("brier_score", probs, y)
    onehot = torch.nn.functional.one_hot(y.long(), probs.shape[-1]).to(probs.dtype)
    return float(((probs - onehot) ** 2).sum(-1).mean())


def predictive_entropy(probs: Tensor) -> Tensor:
    """Entropy of the predictive class distribution per row (nats)."""
    return -(probs * probs.clamp_min(1e-40).log()).sum(-1)


def ood_auroc(score_in: Tensor, score_out: Tensor) -> float:
    """AUROC of separating OOD (positive) from in-distribution inputs by a score such as the
    predictive entropy (higher = more OOD); ties count one half (Mann-Whitney U)."""
    _check("ood_auroc (in-distribution scores)", score_in)
    _check("ood_auroc (OOD scores)", score_out)
    s = torch.cat([score_in.double().reshape(-1), score_out.double().reshape(-1)])
    # average ranks handle ties
    order = torch.argsort(s)
    ranks = torch.empty_like(s)
    ranks[order] = torch.arange(1, s.numel() + 1, dtype=torch.float64)
    uniq, inv, counts = torch.unique(s, return_inverse=True, return_counts=True)
    rank_sum = torch.zeros_like(uniq).index_add_(0, inv, ranks)
    ranks = (rank_sum / counts)[inv]
    n_in, n_out = score_in.numel(), score_out.numel()
    u = ranks[n_in:].sum() - n_out * (n_out + 1) / 2
    return float(u / (n_in * n_out))
