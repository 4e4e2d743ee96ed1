"""SGHMC on a UCI regression set (default: Boston housing, standard split 0), with tuning.

1. ``bnnkit.tune`` sweeps the step size (and friction) on short runs and writes a PNG;
2. one longer run at the chosen setting, 4 chains, minibatch 32, noise precision sampled
   with the weights;
3. trace plots of the log posterior, the noise standard deviation and the predictions at
   three test points (function-space quantities: weight-space traces of a BNN are not
   identifiable), split R-hat and ESS of the same, and test RMSE / NLL in the original units
   of the target (NLL = -mean log p(y*), the convention of the UCI benchmark tables).

Data are read from ``--data`` (default ``$BNNKIT_DATA``, else ``../shared/data`` if present,
else the user cache; pass ``--download`` to fetch from the canonical source).

Run:  python examples/sghmc_uci.py [--dataset boston] [--quick]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

import bnnkit
from bnnkit.data import Minibatches, load_uci
from bnnkit.diagnostics import ess, rhat
from bnnkit.nets import mlp
from bnnkit.predict import predict, rmse
from bnnkit.predict.predictive import network_outputs


def default_root() -> str | None:
    if os.environ.get("BNNKIT_DATA"):
        return None
    shared = Path(__file__).resolve().parents[2] / "shared" / "data"
    return str(shared) if shared.exists() else None


def trace_figure(samples: bnnkit.Samples, f_test: torch.Tensor, noise_std: torch.Tensor, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = [("log posterior (minibatch estimate)", samples.stats["log_density"]), ("noise std", noise_std)]
    series += [(f"prediction at test point {i}", f_test[..., i]) for i in range(f_test.shape[-1])]
    fig, axes = plt.subplots(
        len(series), 2, figsize=(11, 2.0 * len(series)), gridspec_kw={"width_ratios": [3, 1]}
    )
    for (title, v), (ax_t, ax_h) in zip(series, axes):
        v = v.double()
        for c in range(v.shape[0]):
            ax_t.plot(v[c].numpy(), lw=0.7, label=f"chain {c}")
            ax_h.hist(v[c].numpy(), bins=25, histtype="step")
        r, e = float(rhat(v)), float(ess(v))
        ax_t.set_title(f"{title}   R-hat {r:.3f}, ESS {e:.0f}", fontsize=9)
    axes[0, 0].legend(fontsize=7, ncol=4)
    axes[-1, 0].set_xlabel("draw (after burn-in and thinning)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="boston")
    ap.add_argument("--split", type=int, default=0)
    ap.add_argument("--data", default=default_root(), help="data directory (default: see module docstring)")
    ap.add_argument("--download", action="store_true")
    ap.add_argument("--out", default="sghmc_uci_out")
    ap.add_argument("--quick", action="store_true", help="short runs (a smoke test)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--threads", type=int, default=1, help="torch threads (1: small ops gain nothing from more)"
    )
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    data = load_uci(args.dataset, args.split, root=args.data, download=args.download)
    n, d = data.x_train.shape
    print(f"{data.name} split {data.split}: {n} training rows, {data.x_test.shape[0]} test rows, {d} inputs")
    net = mlp(d, 50)
    post = bnnkit.Posterior(
        net,
        bnnkit.Gaussian(0.5, learn_noise=True, precision_prior=(1.0, 0.1)),
        bnnkit.GaussianPrior(1.0),
        num_data=n,
    )
    stream = Minibatches(data.x_train, data.y_train, batch_size=32)
    # Held-out set for tuning: a slice of the training rows would be the honest choice for model
    # selection; the test split is used only for the final report.
    held = (data.x_train[-n // 5 :], data.y_train[-n // 5 :])

    q = args.quick
    t0 = time.perf_counter()
    result = bnnkit.tune(
        functools.partial(bnnkit.SGHMC, resample_momentum_every=None),
        {"step_size": [3e-4, 1e-3, 3e-3, 1e-2], "friction": [1.0, 10.0]}
        if not q
        else {"step_size": [1e-3, 3e-3]},
        post,
        stream,
        held,
        num_samples=30 if q else 100,
        num_warmup=200 if q else 1000,
        thin=5 if q else 10,
        num_chains=2,
        seed=args.seed,
        progress=False,
        plot=str(out / "tune.png"),
    )
    print(result.table())
    best = result.best
    print(f"tuning took {time.perf_counter() - t0:.0f} s; chosen {best}")

    t0 = time.perf_counter()
    samples = bnnkit.sample(
        bnnkit.SGHMC(**best),
        post,
        stream,
        num_samples=50 if q else 200,
        num_warmup=500 if q else 3000,
        thin=10 if q else 20,
        num_chains=2 if q else 4,
        seed=args.seed + 1,
        progress=not q,
        output=str(out / "run"),
    )
    seconds = time.perf_counter() - t0

    pred = predict(post, samples, data.x_test)
    test_rmse = rmse(data.unnormalise_y(pred.mean), data.unnormalise_y(data.y_test))
    test_nll = -float(data.unnormalise_log_density(pred.log_prob(data.y_test)).mean())
    log_tau = samples.params["likelihood.log_precision"].squeeze(-1)
    noise_std = data.unnormalise_std(torch.exp(-0.5 * log_tau))
    f = network_outputs(post, samples, data.x_test[:3]).reshape(samples.num_chains, samples.num_draws, 3)
    trace_figure(samples, data.unnormalise_y(f), noise_std, out / "traces.png")
    report = {
        "dataset": data.name,
        "split": data.split,
        "setting": best,
        "test_rmse": test_rmse,
        "test_nll": test_nll,
        "units": "original units of the target",
        "noise_std_mean": float(noise_std.mean()),
        "rhat_log_posterior": float(rhat(samples.stats["log_density"])),
        "seconds": seconds,
        "command": "python examples/sghmc_uci.py" + (" --quick" if q else ""),
    }
    (out / "report.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    print(f"wrote {out / 'tune.png'}, {out / 'traces.png'}, {out / 'report.json'}")
    if not np.isfinite(test_nll):
        raise SystemExit("the run diverged: choose a smaller step size")


if __name__ == "__main__":
    main()
