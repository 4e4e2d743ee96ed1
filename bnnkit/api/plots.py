"""The plots users expect from a fitted posterior, one call each; each returns the matplotlib
``Figure`` (save it with ``fig.savefig(path)``)."""

from __future__ import annotations

from typing import Any

import torch

from ..core.errors import BnnkitError
from ..data.coerce import as_tensor


def _axes(ax: Any, figsize: tuple[float, float] = (6, 4)):
    if ax is not None:
        return ax.figure, ax
    from matplotlib.figure import Figure  # no pyplot state: nothing to close, any backend

    fig = Figure(figsize=figsize)
    return fig, fig.subplots()


def _finish(fig: Any, ax: Any):
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    return fig


def predictive_plot(fit: Any, x: Any, y: Any = None, level: float = 0.95, ax: Any = None):
    """Regression.  One input feature: the predictive mean and its ``level`` band (total, and its
    epistemic part alone) on a grid reaching 20 % beyond the range of ``x``, with the points
    ``(x, y)``.  Several features: predicted against observed ``y`` with ``level`` intervals and the
    diagonal, the share of targets inside the intervals in the title."""
    if fit.kind != "regression":
        raise BnnkitError("predictive_plot is for regression fits; use reliability_plot for classification.")
    x = as_tensor(x, "x")
    fig, ax = _axes(ax)
    if x.ndim == 1 or (x.ndim == 2 and x.shape[1] == 1):
        xv = x.reshape(-1).double().cpu()
        span = float(xv.max() - xv.min()) or 1.0
        grid = torch.linspace(float(xv.min()) - 0.2 * span, float(xv.max()) + 0.2 * span, 300).reshape(-1, 1)
        pred = fit.predict(grid)
        mean, sd = pred.mean.detach().cpu(), pred.stddev.detach().cpu()
        lo, hi = (t.detach().cpu() for t in pred.interval(level))
        z = float(((hi - mean) / sd).mean())
        epi = pred.epistemic_variance.detach().cpu().sqrt()
        g = grid.reshape(-1)
        g, mean, lo, hi, epi = (t.numpy() for t in (g, mean, lo, hi, epi))
        ax.fill_between(g, lo, hi, alpha=0.25, color="C0", label=f"{level:.0%} predictive")
        ax.fill_between(g, mean - z * epi, mean + z * epi, alpha=0.35, color="C1", label="epistemic part")
        ax.plot(g, mean, color="C0", label="predictive mean")
        if y is not None:
            ax.scatter(xv, as_tensor(y, "y").reshape(-1).cpu(), s=10, color="k", label="data", zorder=3)
        ax.set_xlabel("x")
        ax.set_ylabel("y")
    else:
        if y is None:
            raise BnnkitError("with several input features the plot is predicted against observed: pass y.")
        pred = fit.predict(x)
        mean = pred.mean.detach().cpu()
        lo, hi = (t.detach().cpu() for t in pred.interval(level))
        yv = as_tensor(y, "y").reshape(-1).cpu().to(mean.dtype)
        ax.errorbar(
            yv, mean, yerr=torch.stack([mean - lo, hi - mean]), fmt="o", ms=3, alpha=0.6, elinewidth=0.8
        )
        lim = [float(min(yv.min(), lo.min())), float(max(yv.max(), hi.max()))]
        ax.plot(lim, lim, "k--", lw=1, label="prediction = observed")
        inside = float(((yv >= lo) & (yv <= hi)).double().mean())
        ax.set_title(f"{inside:.0%} of targets inside the {level:.0%} intervals")
        ax.set_xlabel("observed")
        ax.set_ylabel("predicted")
    return _finish(fig, ax)


def reliability_plot(fit: Any, x: Any, y: Any, num_bins: int = 15, ax: Any = None):
    """Classification: accuracy against confidence per bin (the diagonal is perfect calibration),
    with the expected calibration error in the title."""
    from ..predict.metrics import expected_calibration_error

    if fit.kind == "regression":
        raise BnnkitError("reliability_plot is for classification fits; use predictive_plot for regression.")
    probs = fit.predict(x).probs.detach().cpu()
    ece, rel = expected_calibration_error(probs, as_tensor(y, "y").long().reshape(-1).cpu(), num_bins)
    fig, ax = _axes(ax, (4.5, 4.5))
    draw_reliability(ax, rel, f"reliability (ECE {ece:.3f})")
    return _finish(fig, ax)


def draw_reliability(ax: Any, rel: dict[str, Any], title: str) -> None:
    """Accuracy per confidence bin as bars on ``ax`` (``rel``: the bins of
    :func:`~bnnkit.predict.expected_calibration_error`), with the diagonal of perfect calibration."""
    edges = rel["edges"].cpu()
    centers = (edges[1:] + edges[:-1]) / 2
    acc = rel["accuracy"].cpu().nan_to_num(0.0)
    ax.bar(centers, acc, width=float(edges[1] - edges[0]), edgecolor="k", alpha=0.7, label="accuracy")
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="perfect calibration")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("confidence")
    ax.set_ylabel("accuracy")
    ax.set_title(title)


def entropy_plot(fit: Any, x_in: Any, x_out: Any, bins: int = 30, ax: Any = None):
    """Classification: histograms of the predictive entropy on in-distribution inputs ``x_in`` and
    out-of-distribution inputs ``x_out``, with the AUROC of entropy as an OOD score."""
    from ..predict.metrics import ood_auroc

    if fit.kind == "regression":
        raise BnnkitError("entropy_plot is for classification fits.")
    h_in = fit.predict(x_in).entropy().detach().cpu()
    h_out = fit.predict(x_out).entropy().detach().cpu()
    fig, ax = _axes(ax)
    top = float(max(h_in.max(), h_out.max(), 1e-6))
    edges = torch.linspace(0, top, bins + 1)
    ax.hist(h_in, bins=edges, alpha=0.6, density=True, label="in-distribution")
    ax.hist(h_out, bins=edges, alpha=0.6, density=True, label="out-of-distribution")
    ax.set_xlabel("predictive entropy (nats)")
    ax.set_ylabel("density")
    ax.set_title(f"OOD AUROC of entropy {ood_auroc(h_in, h_out):.3f}")
    return _finish(fig, ax)


def rhat_plot(fit: Any, threshold: float = 1.1, ax: Any = None):
    """Max function-space R-hat over the first n draws of every chain, against n."""
    trace = fit.diagnostics.get("rhat_trace")
    if not trace:
        raise BnnkitError(
            f"no R-hat trace: method {fit.method!r} has no Markov chains (or too few draws) to compare."
        )
    fig, ax = _axes(ax)
    ax.plot(trace["draws"], trace["rhat"], "o-", label="max R-hat of the outputs")
    ax.axhline(threshold, color="k", ls="--", lw=1, label=f"{threshold}")
    ax.set_xlabel("draws per chain")
    ax.set_ylabel("function-space R-hat")
    ax.set_title(f"{fit.method}: {fit.diagnostics.get('chains')} chains")
    return _finish(fig, ax)
