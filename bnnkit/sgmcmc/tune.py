"""Tuning SG-MCMC hyperparameters on short runs (``bnnkit.tune``).

SG-MCMC has no acceptance rate to adapt to: a step size that is too large biases the stationary
distribution (or diverges), one that is too small mixes slowly.  The practical recipe (Welling &
Teh; Chen et al.; the seed text on tuning) is a small grid of short runs, judged on

- the **held-out NLL** of the posterior predictive (what the user cares about),
- the **stationarity of the log-posterior trace** after burn-in: split R-hat across chains
  (ArviZ) and a Geweke z-score (first 10% against last 50% of each chain),
- the **ESS per second** of the predictions at held-out inputs (weight-space ESS is meaningless
  for over-parameterised networks; function-space ESS is not),

and then one long run at the chosen setting.  :func:`tune` runs the grid through the ordinary
driver and returns a :class:`TuneResult` with a table, the best setting and a plot.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..core.driver import sample
from ..core.errors import BnnkitError, DivergenceError, check_int_at_least
from ..core.posterior import Posterior
from ..diagnostics import ess, rhat
from ..predict import predict
from ..predict.predictive import network_outputs

RHAT_MAX = 1.1
GEWEKE_MAX = 2.0


def geweke_z(trace: np.ndarray, first: float = 0.1, last: float = 0.5) -> float:
    """Largest |z| over chains of Geweke's test: mean of the first 10% against the last 50%,
    standard errors from the ArviZ ESS of each segment.  |z| > 2 suggests the trace still drifts."""
    zs = []
    for chain in np.atleast_2d(trace):
        n = chain.size
        a, b = chain[: max(int(first * n), 4)], chain[n - max(int(last * n), 4) :]
        var = 0.0
        for seg in (a, b):
            e = float(ess(seg[None, :])) if np.std(seg) > 0 else float(seg.size)
            var += np.var(seg, ddof=1) / max(e, 1.0)
        zs.append(abs(a.mean() - b.mean()) / math.sqrt(var) if var > 0 else 0.0)
    return float(max(zs))


@dataclass
class TuneResult:
    """Per-setting results of :func:`tune`; ``rows[i]`` has the setting and its scores."""

    rows: list[dict[str, Any]]
    grid: dict[str, list[Any]]
    traces: list[np.ndarray] = field(repr=False)

    @property
    def best(self) -> dict[str, Any]:
        """The setting with the lowest held-out NLL among those that look stationary (all finite
        settings if none does)."""
        ok = [r for r in self.rows if r["finite"] and r["stationary"]] or [
            r for r in self.rows if r["finite"]
        ]
        if not ok:
            raise BnnkitError("every setting diverged (NaN or inf): try smaller step sizes.")
        return min(ok, key=lambda r: r["heldout_nll"])["setting"]

    def table(self) -> str:
        """A markdown table of the grid."""
        keys = list(self.grid)
        head = keys + [
            "held-out NLL",
            "split R-hat(log p)",
            "Geweke |z|",
            "ESS/s (f)",
            "stationary",
            "seconds",
        ]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        best = self.best
        for r in self.rows:
            cells = [
                f"{r['setting'][k]:g}" if isinstance(r["setting"][k], float) else str(r["setting"][k])
                for k in keys
            ]
            mark = " **best**" if r["setting"] == best else ""
            cells += [
                f"{r['heldout_nll']:.3f}{mark}",
                f"{r['rhat_logp']:.3f}",
                f"{r['geweke_z']:.2f}",
                f"{r['ess_per_second']:.1f}",
                "yes" if r["stationary"] else "no",
                f"{r['seconds']:.1f}",
            ]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def plot(self, path: str | None = None):
        """Three panels: held-out NLL and ESS/s against the first grid axis (one line per value of
        the others), and the log-posterior trace of chain 0 for every setting."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        keys = list(self.grid)
        xkey, others = keys[0], keys[1:]
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
        groups: dict[tuple, list[dict]] = {}
        for r in self.rows:
            groups.setdefault(tuple(r["setting"][k] for k in others), []).append(r)
        for gkey, rows in groups.items():
            label = ", ".join(
                f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in zip(others, gkey)
            )
            xs = [r["setting"][xkey] for r in rows]
            nll = [r["heldout_nll"] if r["finite"] else np.nan for r in rows]
            eps = [r["ess_per_second"] for r in rows]
            axes[0].plot(xs, nll, "o-", label=label or None)
            axes[1].plot(xs, eps, "o-", label=label or None)
            for x, r in zip(xs, rows):
                if not r["stationary"]:
                    axes[0].plot([x], [r["heldout_nll"]], "x", color="red", ms=10)
        for ax, title in zip(
            axes[:2], ["held-out NLL (x: trace not stationary)", "ESS per second of predictions"]
        ):
            ax.set_xscale("log") if all(
                isinstance(v, (int, float)) and v > 0 for v in self.grid[xkey]
            ) else None
            ax.set_xlabel(xkey)
            ax.set_title(title)
            if others:
                ax.legend(fontsize=8)
        axes[1].set_yscale("log")
        for r, tr in zip(self.rows, self.traces):
            if not r["finite"]:
                continue  # a diverged chain would swamp the axis
            lbl = ", ".join(
                f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in r["setting"].items()
            )
            axes[2].plot(tr[0], lw=0.7, label=lbl)
        axes[2].set_title("log-posterior trace after burn-in (chain 0)")
        axes[2].set_xlabel("draw")
        axes[2].set_yscale("symlog")
        axes[2].legend(fontsize=6, ncol=2)
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=110)
            plt.close(fig)
        return fig


def tune(
    make_algorithm: Callable[..., Any],
    grid: Mapping[str, Sequence[Any]],
    posterior: Posterior,
    data: Any,
    heldout: tuple[Tensor, Tensor],
    *,
    num_samples: int = 100,
    num_warmup: int = 500,
    thin: int = 10,
    num_chains: int = 2,
    seed: int = 0,
    progress: bool = True,
    plot: str | None = None,
    **sample_kwargs: Any,
) -> TuneResult:
    """Run a short chain for every combination in ``grid`` and score it.

    Args:
        make_algorithm: builds an algorithm from keyword arguments, e.g. ``bnnkit.SGHMC`` or
            ``functools.partial(bnnkit.SGHMC, noise_estimate="online")``.
        grid: values to try per keyword, e.g. ``{"step_size": [1e-4, 3e-4], "friction": [1, 10]}``;
            the first key is the x-axis of the plot.
        posterior: the posterior (with ``num_data`` set for minibatches).
        data: the training data or minibatch stream passed to :func:`bnnkit.sample`.
        heldout: ``(inputs, targets)`` for the held-out NLL and the function-space ESS.
        num_samples, num_warmup, thin, num_chains, seed: the short run (per setting).
        plot: path of a PNG to write (see :meth:`TuneResult.plot`).
    """
    if not grid:
        raise BnnkitError("grid is empty: give values to try, e.g. {'step_size': [1e-5, 1e-4, 1e-3]}.")
    for k, vals in grid.items():
        if isinstance(vals, (str, bytes)) or len(vals) == 0:
            raise BnnkitError(f"grid[{k!r}] must be a non-empty list of values, got {vals!r}.")
    check_int_at_least("num_chains", num_chains, 2)
    check_int_at_least("num_samples", num_samples, 20)
    keys = list(grid)
    rows, traces = [], []
    combos = list(itertools.product(*(grid[k] for k in keys)))
    for i, values in enumerate(combos):
        setting = dict(zip(keys, values))
        alg = make_algorithm(**setting)
        if progress:
            print(f"[tune {i + 1}/{len(combos)}] {setting}", flush=True)
        s, logp, seconds = _run_setting(
            alg, posterior, data, num_samples, num_warmup, thin, num_chains, seed, progress, sample_kwargs
        )
        row = _score(posterior, s, logp, seconds, setting, heldout, num_chains, num_samples)
        rows.append(row)
        traces.append(np.where(np.isfinite(logp), logp, np.nan))
    result = TuneResult(rows, {k: list(v) for k, v in grid.items()}, traces)
    if plot is not None:
        result.plot(plot)
    return result


def _run_setting(
    alg, posterior, data, num_samples, num_warmup, thin, num_chains, seed, progress, sample_kwargs
):
    """One setting's short run: its draws (``None`` if it diverged), log-density trace ``[chains,
    draws]`` (NaN past a divergence) and seconds."""
    t0 = time.perf_counter()
    try:
        s = sample(
            alg,
            posterior,
            data,
            num_samples=num_samples,
            num_warmup=num_warmup,
            thin=thin,
            num_chains=num_chains,
            seed=seed,
            progress=progress,
            **sample_kwargs,
        )
    except DivergenceError as err:  # a setting too large: scored as diverged, its trace kept
        s = None
        logp = np.full((num_chains, num_samples), np.nan)
        for c, (_, stats) in err.partial.items():
            kept = stats["log_density"].double().numpy()[:num_samples]
            logp[c, : len(kept)] = kept
    seconds = time.perf_counter() - t0
    if s is not None:
        logp = s.stats["log_density"].double().numpy()
    return s, logp, seconds


def _score(posterior, s, logp, seconds, setting, heldout, num_chains, num_samples) -> dict[str, Any]:
    """The table row of one setting: held-out NLL, stationarity (R-hat and Geweke of the log
    density) and the function-space ESS at the held-out inputs (per second)."""
    x_ho, y_ho = heldout
    finite = s is not None and bool(torch.isfinite(s.positions).all()) and bool(np.isfinite(logp).all())
    row: dict[str, Any] = {"setting": setting, "finite": finite, "seconds": seconds}
    if finite:
        pred = predict(posterior, s, x_ho)
        f = network_outputs(posterior, s, x_ho).reshape(num_chains, num_samples, -1).double()
        ess_f = float(np.median(ess(f)))
        row.update(
            heldout_nll=pred.nll(y_ho) if hasattr(pred, "nll") else float("nan"),
            rhat_logp=float(rhat(logp)),
            geweke_z=geweke_z(logp),
            ess_f=ess_f,
            ess_per_second=ess_f / seconds,
        )
        row["stationary"] = row["rhat_logp"] < RHAT_MAX and row["geweke_z"] < GEWEKE_MAX
    else:
        row.update(
            heldout_nll=float("inf"),
            rhat_logp=float("nan"),
            geweke_z=float("nan"),
            ess_f=0.0,
            ess_per_second=0.0,
            stationary=False,
        )
    return row
