"""Predictive metrics: RMSE, accuracy, ECE (with reliability-diagram data), Brier, entropy, OOD AUROC."""

from __future__ import annotations

import torch
from torch import Tensor

from ..core.errors import BnnkitError


def _tensor(name: str, value: object, attr: str | None = None) -> Tensor:
    """``value`` as a tensor: a tensor, a NumPy array / list, or a predictive's ``attr``."""
    if attr is not None and not isinstance(value, Tensor) and hasattr(value, attr):
        value = getattr(value, attr)  # a predictive passed whole: its mean / probs
    if isinstance(value, Tensor):
        t = value
    elif isinstance(value, (str, bytes)) or not (
        hasattr(value, "__array__")
        or hasattr(value, "to_numpy")
        or isinstance(value, (list, tuple, float, int))
    ):
        raise BnnkitError(f"{name} must be a torch.Tensor or a NumPy array, got {type(value).__name__}.")
    else:
        try:
            t = torch.as_tensor(value.to_numpy() if hasattr(value, "to_numpy") else value)
        except (TypeError, ValueError, RuntimeError) as err:
            raise BnnkitError(
                f"{name} could not be read as numbers ({type(value).__name__}: {err})."
            ) from err
    if t.dtype == torch.bool or t.is_complex():
        raise BnnkitError(f"{name} must hold real numbers, got dtype {t.dtype}.")
    if t.numel() == 0:
        raise BnnkitError(f"{name}: empty input (shape {tuple(t.shape)}).")
    return t.detach()


def nonfinite_rows(t: Tensor) -> str | None:
    """Where ``t`` holds NaN or inf, as ``"in K of N rows (rows i, j, ...)"`` (the first five
    named); None where it holds none (or is not floating point)."""
    if not t.is_floating_point():
        return None
    bad = ~torch.isfinite(t)
    if not bad.any():
        return None
    rows = bad.reshape(bad.shape[0], -1).any(dim=1) if bad.ndim else bad.reshape(1)
    idx = torch.nonzero(rows).flatten().tolist()
    shown = ", ".join(str(i) for i in idx[:5]) + (", ..." if len(idx) > 5 else "")
    return f"in {len(idx)} of {rows.numel()} rows (rows {shown})"


def _finite(metric: str, name: str, t: Tensor) -> None:
    where = nonfinite_rows(t)
    if where is not None:
        raise BnnkitError(
            f"{metric}: {name} contain NaN or inf {where}; remove those rows (or fix what produced them) first."
        )


def _check(name: str, a: Tensor, b: Tensor | None = None) -> None:
    if a.numel() == 0:
        raise BnnkitError(f"{name}: empty input.")
    if b is not None and a.shape[0] != b.shape[0]:
        raise BnnkitError(f"{name}: {a.shape[0]} predictions but {b.shape[0]} targets.")


def _regression(metric: str, mean: object, y: object) -> tuple[Tensor, Tensor]:
    m, t = _tensor(f"{metric}: the predictions", mean, "mean"), _tensor(f"{metric}: the targets", y)
    _check(metric, m.reshape(-1) if m.ndim == 0 else m, t.reshape(-1) if t.ndim == 0 else t)
    if m.numel() != t.numel():
        raise BnnkitError(
            f"{metric}: predictions of shape {tuple(m.shape)} and targets of shape {tuple(t.shape)} hold "
            f"{m.numel()} and {t.numel()} numbers; give one prediction per target."
        )
    _finite(metric, "the predictions", m.reshape(m.shape[0], -1) if m.ndim else m)
    _finite(metric, "the targets", t.reshape(t.shape[0], -1) if t.ndim else t)
    return m, t


def _classification(metric: str, probs: object, y: object, simplex: bool) -> tuple[Tensor, Tensor]:
    """Class probabilities ``[N, C]`` and labels ``[N]`` (integers, or floats holding integers)."""
    p, t = _tensor(f"{metric}: the probabilities", probs, "probs"), _tensor(f"{metric}: the labels", y)
    if p.ndim != 2:
        raise BnnkitError(
            f"{metric}: probabilities must be of shape [N, C] (one row of class probabilities per example); "
            f"got shape {tuple(p.shape)}."
        )
    if t.ndim == 2 and t.shape[1] == 1:
        t = t[:, 0]
    if t.ndim != 1:
        raise BnnkitError(
            f"{metric}: labels must be class indices of shape [N]; got shape {tuple(t.shape)}"
            + (" (one-hot? pass y.argmax(-1))." if t.ndim == 2 and t.shape[1] == p.shape[1] else ".")
        )
    _check(metric, p, t)
    _finite(metric, "the probabilities", p)
    _finite(metric, "the labels", t)
    if t.is_floating_point() and bool((t != t.round()).any()):
        i = int(torch.nonzero(t != t.round())[0])
        raise BnnkitError(
            f"{metric}: labels must be whole class indices; row {i} holds {float(t[i])!r}. Pass y.long()."
        )
    c = p.shape[1]
    out = (t < 0) | (t >= c)
    if out.any():
        idx = torch.nonzero(out).flatten().tolist()
        raise BnnkitError(
            f"{metric}: {len(idx)} labels lie outside the class range [0, {c - 1}] of probabilities with {c} "
            f"columns (rows {', '.join(str(i) for i in idx[:5])}{', ...' if len(idx) > 5 else ''}: "
            f"{t[idx[:3]].tolist()})."
        )
    if simplex:
        tol = 1e-3 if p.dtype != torch.float16 else 1e-2
        sums = p.sum(-1)
        bad = (p < -tol).any(-1) | (p > 1 + tol).any(-1) | ((sums - 1).abs() > tol)
        if bad.any():
            i = int(torch.nonzero(bad)[0])
            raise BnnkitError(
                f"{metric}: each row must be class probabilities (in [0, 1], summing to 1); row {i} sums to "
                f"{float(sums[i]):.4g}. Logits? pass torch.softmax(logits, -1)."
            )
    return p, t.long()


def rmse(mean: Tensor, y: Tensor) -> float:
    """Root mean squared error of ``mean`` (a tensor, an array or a predictive) against ``y``."""
    m, t = _regression("rmse", mean, y)
    return float(((m.reshape(t.shape).to(torch.promote_types(m.dtype, t.dtype)) - t) ** 2).mean().sqrt())


def accuracy(probs: Tensor, y: Tensor) -> float:
    """Share of rows whose most probable class is the label (``probs`` may be logits)."""
    p, t = _classification("accuracy", probs, y, simplex=False)
    return float((p.argmax(-1) == t).double().mean())


def expected_calibration_error(
    probs: Tensor, y: Tensor, num_bins: int = 15
) -> tuple[float, dict[str, Tensor]]:
    """ECE with equal-width confidence bins; returns ``(ece, reliability)`` where ``reliability``
    holds per-bin ``confidence``, ``accuracy`` and ``count`` (for a reliability diagram)."""
    if not isinstance(num_bins, int) or isinstance(num_bins, bool) or num_bins < 1:
        raise BnnkitError(f"expected_calibration_error: num_bins must be an integer >= 1, got {num_bins!r}.")
    probs, y = _classification("expected_calibration_error", probs, y, simplex=True)
    conf, pred = probs.max(-1)
    correct = (pred == y).double()
    edges = torch.linspace(0, 1, num_bins + 1, dtype=torch.float64, device=conf.device)
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
    probs, y = _classification("brier_score", probs, y, simplex=True)
    onehot = torch.nn.functional.one_hot(y.long(), probs.shape[-1]).to(probs.dtype)
    return float(((probs - onehot) ** 2).sum(-1).mean())


def predictive_entropy(probs: Tensor) -> Tensor:
    """Entropy of the predictive class distribution per row (nats)."""
    probs = _tensor("predictive_entropy: the probabilities", probs, "probs")
    _finite(
        "predictive_entropy", "the probabilities", probs.reshape(probs.shape[0], -1) if probs.ndim else probs
    )
    return -(probs * probs.clamp_min(1e-40).log()).sum(-1)


def ood_auroc(score_in: Tensor, score_out: Tensor) -> float:
    """AUROC of separating OOD (positive) from in-distribution inputs by a score such as the
    predictive entropy (higher = more OOD); ties count one half (Mann-Whitney U)."""
    score_in = _tensor("ood_auroc: the in-distribution scores", score_in)
    score_out = _tensor("ood_auroc: the OOD scores", score_out)
    for name, t in (("in-distribution scores", score_in), ("OOD scores", score_out)):
        if t.ndim > 1 and t.numel() != t.shape[0]:
            raise BnnkitError(
                f"ood_auroc: the {name} must be one score per example (shape [N]); got shape {tuple(t.shape)}. "
                "Reduce class probabilities to a score first, e.g. predictive_entropy(probs)."
            )
        _finite("ood_auroc", f"the {name}", t.reshape(-1))
    s = torch.cat([score_in.double().reshape(-1), score_out.double().reshape(-1)])
    # average ranks handle ties
    order = torch.argsort(s)
    ranks = torch.empty_like(s)
    ranks[order] = torch.arange(1, s.numel() + 1, dtype=torch.float64, device=s.device)
    uniq, inv, counts = torch.unique(s, return_inverse=True, return_counts=True)
    rank_sum = torch.zeros_like(uniq).index_add_(0, inv, ranks)
    ranks = (rank_sum / counts)[inv]
    n_in, n_out = score_in.numel(), score_out.numel()
    u = ranks[n_in:].sum() - n_out * (n_out + 1) / 2
    return float(u / (n_in * n_out))


def interval_coverage(pred: object, y: Tensor, level: float = 0.95) -> float | None:
    """The share of targets ``y`` inside the central ``level`` interval of the predictive ``pred``
    (its ``interval(level)``: e.g. a Gaussian with its mean and total variance); None where ``pred``
    offers no interval, nan where its bounds are not finite (a diverged chain)."""
    interval = getattr(pred, "interval", None)
    if not callable(interval):
        return None
    lo, hi = interval(level)
    if not (bool(torch.isfinite(lo).all()) and bool(torch.isfinite(hi).all())):
        return float("nan")
    y = y.to(lo.dtype)
    return float(((y >= lo) & (y <= hi)).to(torch.float64).mean())
