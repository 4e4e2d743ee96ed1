"""Why bnnkit's SG-MCMC cells lose on UCI: one factor at a time, measured.

On one UCI split, the bench's network (2 x ``hidden`` tanh, minibatch 32, N(0, 1) prior, noise
precision sampled) is sampled by SGHMC under a ladder of variants, each changing one thing of the
protocol-3 cell (``bnnkit bench uci``: one chain, 4,000 burn-in steps, 15 draws thinned by 50,
eps 3e-3, friction 10, noise moved by the gradient):

- ``p3``: the protocol-3 cell itself;
- ``p3-long``: the same chain run 20x longer (4,000 + 90,250 steps; 95 draws thinned by 950);
- ``4chains``: four vectorised chains with the protocol-3 length each;
- ``4chains-100``: four chains, 100 draws each (thin 50 after 4,000 burn-in);
- ``map``: as ``4chains-100``, each chain from 300 Adam steps of MAP begun at its prior draw;
- ``step-x0.3`` / ``step-x3``: ``4chains-100`` at 0.3x and 3x the step size;
- ``step-x0.3-long`` / ``step-x0.1-long``: 0.3x / 0.1x the step, 8,000 burn-in steps and 200
  draws per chain (18,000 steps);
- ``adaptive``: scale-adapted SGHMC (``bnnkit.AdaptiveSGHMC``, eps 1e-2), four chains, 100 draws;
  ``adaptive-x0.3`` / ``adaptive-x3`` at eps 3e-3 / 3e-2, ``adaptive-long`` /
  ``adaptive-x3-long`` with 8,000 burn-in steps and 200 draws;
- ``gibbs-noise``: ``4chains-100`` with the noise precision drawn by Gibbs every 50 steps.

For every variant: test RMSE and NLL in original units, the function-space R-hat (max over the
test inputs' predictive means; ArviZ rank-normalised split R-hat) for runs of several chains,
the seconds, and the test NLL of the predictive built from the first k draws of every chain as k
grows (the NLL-against-steps curve).  Writes JSON, a Markdown table and a PNG.

Run:  python -m experiments.sgmcmc_diagnosis [--datasets boston] [--quick] [--out docs/results/diagnosis]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch

import bnnkit
from bnnkit.core.warm_start import map_init
from bnnkit.data import Minibatches, load_uci
from bnnkit.diagnostics import rhat
from bnnkit.nets import mlp
from bnnkit.predict.predictive import network_outputs

BASE = {"chains": 1, "burn_in": 4000, "draws": 15, "thin": 50, "step_size": 3e-3, "friction": 10.0}
VARIANTS = {
    "p3": {},
    "p3-long": {"draws": 95, "thin": 950},  # 4,000 + 90,250 steps: ~20x the protocol-3 cell
    "4chains": {"chains": 4},
    "4chains-100": {"chains": 4, "draws": 100},
    "map": {"chains": 4, "draws": 100, "map": 300},
    "step-x0.3": {"chains": 4, "draws": 100, "step_size": 1e-3},
    "step-x3": {"chains": 4, "draws": 100, "step_size": 1e-2},
    "step-x0.3-long": {"chains": 4, "burn_in": 8000, "draws": 200, "step_size": 1e-3},
    "step-x0.1-long": {"chains": 4, "burn_in": 8000, "draws": 200, "step_size": 3e-4},
    "adaptive": {"chains": 4, "draws": 100, "algorithm": "adaptive"},
    "adaptive-x0.3": {"chains": 4, "draws": 100, "algorithm": "adaptive", "adaptive_step": 3e-3},
    "adaptive-x3": {"chains": 4, "draws": 100, "algorithm": "adaptive", "adaptive_step": 3e-2},
    "adaptive-long": {"chains": 4, "burn_in": 8000, "draws": 200, "algorithm": "adaptive"},
    "adaptive-x3-long": {
        "chains": 4,
        "burn_in": 8000,
        "draws": 200,
        "algorithm": "adaptive",
        "adaptive_step": 3e-2,
    },
    "gibbs-noise": {"chains": 4, "draws": 100, "gibbs_every": 50},
}


def default_data() -> str | None:
    shared = Path(__file__).resolve().parents[2] / "shared" / "data"
    return str(shared) if shared.exists() else None


def algorithm(cfg: dict):
    if cfg.get("algorithm") == "adaptive":
        cls = getattr(bnnkit, "AdaptiveSGHMC", None)
        if cls is None:
            return None
        return cls(step_size=cfg.get("adaptive_step", 1e-2))
    # The bench's rule for plain SGHMC (bnnkit.bench.uci.default_step_size): steps chosen on
    # Boston's 455 rows shrink as sqrt(455 / N) on larger sets, friction grows as its inverse.
    r = min(1.0, 455 / cfg["rows"])
    kw = {"friction": cfg["friction"] / math.sqrt(r)}
    if cfg.get("gibbs_every"):
        kw["gibbs_every"] = cfg["gibbs_every"]
    try:
        return bnnkit.SGHMC(cfg["step_size"] * math.sqrt(r), **kw)
    except TypeError:  # this bnnkit has no Gibbs option
        return None


def run_variant(name: str, cfg: dict, data, hidden: int, seed: int) -> dict | None:
    cfg = {**cfg, "rows": int(data.x_train.shape[0])}
    alg = algorithm(cfg)
    if alg is None:
        return None
    n, d = data.x_train.shape
    net = mlp(d, hidden)
    post = bnnkit.Posterior(
        net,
        bnnkit.Gaussian(0.5, learn_noise=True, precision_prior=(1.0, 0.1)),
        bnnkit.GaussianPrior(1.0),
        num_data=n,
    )
    stream = Minibatches(data.x_train, data.y_train, batch_size=32)
    init = (
        map_init(post, (data.x_train, data.y_train), steps=cfg["map"], lr=1e-2, batch_size=32)
        if cfg.get("map")
        else None
    )
    t0 = time.perf_counter()
    s = bnnkit.sample(
        alg,
        post,
        stream,
        num_samples=cfg["draws"],
        num_warmup=cfg["burn_in"],
        thin=cfg["thin"],
        num_chains=cfg["chains"],
        chain_method="vectorized"
        if cfg["chains"] > 1 and getattr(alg, "vectorizable", False)
        else "sequential",
        seed=seed,
        progress=False,
        init=init,
        on_divergence="warn",
    )
    seconds = time.perf_counter() - t0
    f = network_outputs(post, s, data.x_test).reshape(s.num_chains, s.num_draws, -1).double()  # [K, S, T]
    log_tau = s.params["likelihood.log_precision"].reshape(s.num_chains, s.num_draws, 1).double()
    y = data.y_test.double().reshape(1, 1, -1)
    # per-draw log p(y*) in standardised units, then the mixture of the first k draws of every chain
    lp = 0.5 * log_tau - 0.5 * math.log(2 * math.pi) - 0.5 * log_tau.exp() * (y - f) ** 2
    curve = []
    for k in sorted({max(1, int(round(s.num_draws * q))) for q in (0.1, 0.2, 0.4, 0.6, 0.8, 1.0)}):
        part = lp[:, :k].reshape(-1, lp.shape[-1])
        mix = torch.logsumexp(part, 0) - math.log(part.shape[0])
        nll = -float(data.unnormalise_log_density(mix).mean())
        curve.append({"steps": cfg["burn_in"] + k * cfg["thin"], "nll": nll})
    mean = f.mean(dim=(0, 1))
    rmse = float(((data.unnormalise_y(mean) - data.unnormalise_y(data.y_test.double())) ** 2).mean().sqrt())
    r = float(rhat(f).max()) if s.num_chains > 1 else float("nan")
    return {
        "variant": name,
        "config": cfg,
        "rmse": rmse,
        "nll": curve[-1]["nll"],
        "function_rhat_max": r,
        "seconds": seconds,
        "draws": s.num_chains * s.num_draws,
        "diverged": s.config.get("diverged_chains", []),
        "curve": curve,
    }


def bench_cells(dataset: str, split: int) -> dict[str, dict]:
    """The latest ``bnnkit bench uci`` cells of ``dataset`` / ``split`` in docs/results/uci (MC
    dropout, the ensemble, NUTS and the rest, with their seconds), for the comparison."""
    from bnnkit.data.uci import resolve_uci_name

    cells: dict[str, dict] = {}
    root = Path(__file__).resolve().parents[1] / "docs" / "results" / "uci"
    for f in sorted(root.glob("*.jsonl")):
        for line in f.read_text().splitlines():
            try:
                c = json.loads(line)
            except ValueError:
                continue
            if c.get("split") == split and resolve_uci_name(c.get("dataset", "")) == dataset:
                cells[c["method"]] = c  # later lines are later protocols
    return cells


def plot(records: list[dict], path: Path, title: str, cells: dict[str, dict] | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 4.6))
    colours = plt.cm.tab20.colors
    for i, r in enumerate(records):
        xs = [c["steps"] for c in r["curve"]]
        style = "-" if r["variant"].startswith("adaptive") else "--"
        a.plot(
            xs,
            [c["nll"] for c in r["curve"]],
            style,
            marker="o",
            ms=3,
            color=colours[i % 20],
            label=r["variant"],
        )
        b.scatter(r["seconds"], r["nll"], s=25, color=colours[i % 20])
        b.annotate(
            r["variant"], (r["seconds"], r["nll"]), fontsize=7, xytext=(3, 3), textcoords="offset points"
        )
    a.set_xscale("log")
    for m, c in (cells or {}).items():
        if m in ("mcdropout", "ensemble", "nuts", "sghmc") and math.isfinite(c.get("nll", math.nan)):
            b.scatter(c["seconds"], c["nll"], marker="s", s=30, color="black")
            b.annotate(
                f"bench {m}", (c["seconds"], c["nll"]), fontsize=7, xytext=(3, -9), textcoords="offset points"
            )
            if m != "sghmc":
                a.axhline(c["nll"], color="black", lw=0.7, ls=":")
                a.annotate(
                    f"bench {m}",
                    (a.get_xlim()[0], c["nll"]),
                    fontsize=7,
                    xytext=(2, 2),
                    textcoords="offset points",
                )
    a.set_xlabel("SGHMC steps per chain")
    a.set_ylabel("test NLL (original units)")
    a.set_title(f"{title}: test NLL of the predictive so far")
    a.legend(fontsize=6, ncol=2)
    b.set_xscale("log")
    b.set_xlabel("seconds (whole run; squares: the bench's cells of the same split)")
    b.set_ylabel("test NLL")
    b.set_title("accuracy against compute")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="boston")
    ap.add_argument("--split", type=int, default=0)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--hidden", type=int, default=100)
    ap.add_argument("--data", default=default_data())
    ap.add_argument("--out", default="docs/results/diagnosis")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="100x shorter runs (a smoke test)")
    ap.add_argument("--plot-only", action="store_true", help="redraw the plots from the JSON in --out")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in args.datasets.split(","):
        data = load_uci(name, args.split, root=args.data)
        records = []
        if args.plot_only:
            records = json.loads((out / f"{data.name}.json").read_text())
        for v in [] if args.plot_only else args.variants.split(","):
            cfg = {**BASE, **VARIANTS[v]}
            if args.quick:
                cfg = {
                    **cfg,
                    "burn_in": 40,
                    "thin": max(1, cfg["thin"] // 50),
                    "draws": min(cfg["draws"], 10),
                }
            rec = run_variant(v, cfg, data, args.hidden, args.seed)
            if rec is None:
                print(f"{name} {v}: not available in this bnnkit, skipped")
                continue
            rec.update(
                dataset=data.name,
                split=args.split,
                command="python -m experiments.sgmcmc_diagnosis "
                + " ".join(f"--{k} {getattr(args, k)}" for k in ("datasets", "split", "hidden", "seed"))
                + (" --quick" if args.quick else ""),
            )
            records.append(rec)
            print(
                f"{name} {v:12s} RMSE {rec['rmse']:.3f}  NLL {rec['nll']:.3f}  R-hat(f) {rec['function_rhat_max']:.2f}  "
                f"{rec['seconds']:.0f} s",
                flush=True,
            )
        path = out / f"{data.name}.json"
        if path.exists():  # keep the variants not run this time
            ran = {r["variant"] for r in records}
            old = [r for r in json.loads(path.read_text()) if r["variant"] not in ran]
            order = list(VARIANTS)
            records = sorted(old + records, key=lambda r: order.index(r["variant"]))
        path.write_text(json.dumps(records, indent=1))
        cells = bench_cells(data.name, args.split)
        plot(records, out / f"{data.name}.png", f"{data.name} split {args.split}", cells)
        for m in ("mcdropout", "ensemble", "nuts", "sghmc"):
            if m in cells:
                c = cells[m]
                print(f"{name} bench {m:9s} RMSE {c['rmse']:.3f}  NLL {c['nll']:.3f}  {c['seconds']:.0f} s")
        print(f"wrote {out / (data.name + '.json')} and {out / (data.name + '.png')}")


if __name__ == "__main__":
    main()
