"""What it takes for SG-MCMC chains to agree in function space on a UCI split.

Protocol 5's sgld cell (preconditioned SGLD at a constant step ``1e-3 / N`` from per-chain MAP warm
starts) has function-space R-hat 1.56-1.88 on Boston: each chain stays in the mode its MAP phase
found, and R-hat across chains measures the spread between modes.  A chain whose own draws cover
several modes gives R-hat near 1.  This script runs the same posterior, the same MAP warm starts and
the same convergence measure (``FunctionSpaceConvergence`` at the first 100 test inputs), with the
constant step replaced by cyclical pSGLD (Zhang et al. 2020): a cosine cycle of ``L`` steps whose
peak ``a_peak / N`` kicks the chain out of its mode, the first ``exploration`` share of each cycle
an optimiser (no noise, no draws), the rest sampling as the step decays towards 0::

    eps_t = (a_peak / N) / 2 * (cos(pi * (t mod L) / L) + 1)

pSGLD's drift ``(eps / 2) G g`` moves each coordinate by about ``a / 2`` per step (``G g`` is ``N``
times a unit-scale RMSprop direction), so ``a_peak`` is the peak RMSprop learning rate times 2.

``--sampler asghmc`` runs cyclical scale-adapted SGHMC instead (Zhang et al.'s cSGHMC with the bench
sghmc's mass, :class:`~bnnkit.sgmcmc.AdaptiveSGHMC` on a :class:`~bnnkit.sgmcmc.CosineCycle`): the
same cycle with ``eps_t = a_peak / 2 (cos(...) + 1)`` (no ``/ N``: its drift ``eps^2 M^-1 grad U`` is
scale free), the mass estimated in the first cycle, re-estimated in every exploration stage over
at most ``--explore-window`` steps and frozen in every sampling stage.  At terminal velocity a coordinate
moves about ``eps^2 / mdecay = 20 eps^2`` per step, so ``a_peak`` 0.022 / 0.035 / 0.05 kick about
as hard as pSGLD's 0.02 / 0.05 / 0.1.

``--functional`` samples fsgld's posterior instead: the split's RBF GP prior, fitted as the bench
fits it, at the measurement points in its Vecchia form, from fsgld's MAP warm starts (cyclical
functional SG-MCMC, which the bench does not run).

Each setting is one line of JSON (test RMSE / NLL in original units, R-hat, ESS, seconds) appended
to ``--out``.  Example (docs/sgmcmc_diagnosis.md, "Function-space R-hat: what it takes")::

    python -m experiments.uci_cyclical_rhat --dataset boston --split 0 --peak 5e-2 --cycle 2000 \\
        --exploration 0.9 --draws 160 --thin 50 --data ../shared/data --out runs.jsonl
    python -m experiments.uci_cyclical_rhat --out runs.jsonl --plot cyclical_rhat.png
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from bnnkit import sample
from bnnkit.bench.uci.inference import map_warm_start, predictive, sampler_posterior, test_scores
from bnnkit.bench.uci.runner import bench_config, fit_split_gp, gp_noise_sd
from bnnkit.core.random import global_rng_seeded
from bnnkit.data import Minibatches, load_uci
from bnnkit.diagnostics import FunctionSpaceConvergence
from bnnkit.predict.metrics import rmse
from bnnkit.sgmcmc import AdaptiveSGHMC, PreconditionedSGLD
from bnnkit.sgmcmc.schedules import CosineCycle


def run(args: argparse.Namespace) -> dict:
    cfg = bench_config(None, False, False)
    c = cfg["adaptive"]  # protocol 5's MAP phase and batch size
    data = load_uci(args.dataset, args.split, root=args.data)
    x, y = data.x_train, data.y_train
    n = x.shape[0]
    if args.batch_size is not None and args.batch_size < 0:
        raise SystemExit(f"--batch-size {args.batch_size}: give rows per minibatch, or 0 for every training row.")
    batch = n if args.batch_size == 0 else min(args.batch_size or cfg["batch_size"], n)
    t0 = time.perf_counter()
    gp = None
    if args.fixed_noise and not args.functional:
        raise SystemExit("--fixed-noise holds the GP fit's noise: use it with --functional.")
    if args.functional:  # the bench's fit of the split's GP (seed 0 + split, as its cells)
        from bnnkit.functional import GPPrior

        gp = GPPrior("rbf", input_dim=x.shape[1], jitter=1e-4)
        fitted = fit_split_gp(gp, data, cfg, args.split)
    with global_rng_seeded(args.split):  # the network's initial layout, as the bench's cells
        # --fixed-noise: the GP fit's noise sd, held fixed (the VI baselines' floor under it)
        sd = gp_noise_sd(fitted, cfg) if args.fixed_noise else None
        post = sampler_posterior(x, cfg, gp, functional=args.functional, vecchia=True, noise=sd)
        init = map_warm_start(post, x, y, cfg, functional=args.functional)
        rule = FunctionSpaceConvergence(
            post, data.x_test[: c["check_inputs"]], rhat=1.1, ess=100, min_draws=10
        )
        gibbs = {} if args.gibbs_every is None else {"gibbs_every": args.gibbs_every}
        if args.sampler == "asghmc":  # eps_t itself: the adapted mass makes the drift scale free
            step = CosineCycle(args.peak, args.cycle, args.exploration)
            algorithm = AdaptiveSGHMC(step, mdecay=c["mdecay"], explore_window=args.explore_window, **gibbs)
        else:
            step = CosineCycle(args.peak / n, args.cycle, args.exploration)
            algorithm = PreconditionedSGLD(step, alpha=c["sgld_alpha"], **gibbs)
        s = sample(
            algorithm,
            post,
            # --batch-size 0: full-batch gradients (no minibatch noise); the MAP phase keeps 32
            Minibatches(x, y, batch_size=batch),
            num_samples=args.draws,
            num_warmup=args.cycle,  # one whole cycle before the first draw
            thin=args.thin,
            num_chains=args.chains,
            # Gibbs draws need one chain at a time (a vectorised target has no conjugate updates)
            chain_method="vectorized" if args.gibbs_every is None else "sequential",
            init=init,
            seed=args.split,
            progress=False,
            chunk_size=10,
            # sequential chains cannot be compared as they run: run the budget, measure at the end
            stop_when=rule if args.gibbs_every is None else None,
        )
        if args.gibbs_every is not None:
            rule.update(s.positions)
    seconds = time.perf_counter() - t0
    test = test_scores(predictive(post, s, data.x_test), data)
    train = predictive(post, s, x)
    # the sampled noise sd (original units): a chain that explains the data by noise shows here
    if args.fixed_noise:
        noise_sd = data.unnormalise_std(post.likelihood.noise)
    else:
        noise_sd = data.unnormalise_std((-0.5 * s.params["likelihood.log_precision"].reshape(-1)).exp().median())
    return {
        "dataset": args.dataset,
        "split": args.split,
        "peak": args.peak,
        **(
            {}
            if args.sampler == "psgld"
            else {"sampler": args.sampler, "explore_window": args.explore_window}
        ),
        "cycle": args.cycle,
        "exploration": args.exploration,
        "draws_per_chain": args.draws,
        "thin": args.thin,
        "chains": args.chains,
        **({} if args.gibbs_every is None else {"gibbs_every": args.gibbs_every}),
        **({"functional": True} if args.functional else {}),
        **({"fixed_noise": True} if args.fixed_noise else {}),
        **({} if batch == cfg["batch_size"] else {"batch_size": batch}),
        "cycles": s.num_draws * args.thin / (args.cycle * (1 - args.exploration)),
        "rmse": test["rmse"],
        "train_rmse": rmse(data.unnormalise_y(train.mean), data.unnormalise_y(y)),
        "noise_sd_median": float(noise_sd),
        "nll": test["nll"],
        "rhat": rule.last.get("rhat"),
        "ess": rule.last.get("ess"),
        "seconds": seconds,
    }


# The bench's split-0 cells drawn beside the cyclical runs (docs/results/uci/<set>.jsonl).
REFERENCES = (("sgld", 5, "pSGLD, protocol 5", "s"), ("sghmc", 4, "SGHMC, protocol 4", "^"))
# beside runs with the GP prior: the bench's functional cells
GP_REFERENCES = (("fsgld", 5, "fSGLD, protocol 5", "s"), ("fsghmc", 4, "fSGHMC, protocol 4", "^"))
CELL_FILES = {
    "boston": "boston",
    "yacht": "yacht",
    "concrete": "concrete",
    "energy": "energy",
    "wine": "wine",
    "kin8nm": "kin8nm",
    "protein": "protein",
}


def plot(records: list[dict], cells_dir: Path, png: Path) -> None:
    """Test NLL against function-space R-hat on split 0, one panel per data set: each cyclical
    setting, and the bench's protocol 4 / 5 SG cells and protocol 6 NUTS cell of that split."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = [r for r in records if r["split"] == 0]
    sets = sorted({r["dataset"] for r in records}, key=list(CELL_FILES).index)
    cols = min(4, len(sets))
    rows = -(-len(sets) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.6 * rows), squeeze=False)
    for ax in list(axes.flat)[len(sets) :]:
        ax.axis("off")
    for ax, ds in zip(axes.flat, sets):
        mine = [r for r in records if r["dataset"] == ds]
        for sampler, label, colour in (("psgld", "cyclical pSGLD", "C0"), ("asghmc", "cyclical asghmc", "C2")):
            runs = [r for r in mine if r.get("sampler", "psgld") == sampler]
            if runs:
                ax.scatter([r["rhat"] for r in runs], [r["nll"] for r in runs], c=colour, label=label)
        for r in mine:
            ax.annotate(
                f"{r['peak']:g}/{r['cycle']}/{r['cycles']:.0f}"
                + (f" w{r['explore_window']}" if r.get("sampler") == "asghmc" else "")
                + ("x8" if r["chains"] == 8 else "")
                + (f" Gibbs/{r['gibbs_every']}" if r.get("gibbs_every") else "")
                + (" fGP" if r.get("functional") else "")
                + (" fixed noise" if r.get("fixed_noise") else "")
                + (f" B{r['batch_size']}" if r.get("batch_size") else ""),
                (r["rhat"], r["nll"]),
                fontsize=6,
                xytext=(3, 2),
                textcoords="offset points",
            )
        split = mine[0]["split"]
        cells = [json.loads(line) for line in (cells_dir / f"{CELL_FILES[ds]}.jsonl").open()]
        gp = all(r.get("functional") for r in mine)
        refs = [*(GP_REFERENCES if gp else REFERENCES), ("nuts", 6, "NUTS, 4 chains", "D")]
        for method, version, label, marker in refs:
            for c in cells:
                if c["split"] == split and c["method"] == method and c.get("protocol") == version:
                    ax.scatter([c["rhat"]], [c["nll"]], marker=marker, c="C3", label=label)
        ax.axvline(1.1, color="grey", lw=0.8, ls="--")
        ax.set_xlabel("function-space R-hat (max over 100 test inputs)")
        ax.set_ylabel("test NLL (original units)")
        ax.set_title(f"{ds}, split {split}")
        ax.legend(fontsize=6)
    fig.suptitle(
        "labels: peak a / cycle length L / cycles per chain (w: asghmc's exploration window; Gibbs/k: noise "
        "drawn every k steps; fGP: the split's fitted GP prior)",
        fontsize=8,
    )
    fig.tight_layout()
    fig.savefig(png, dpi=130)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="boston")
    p.add_argument("--split", type=int, default=0)
    p.add_argument("--peak", type=float, default=5e-2, help="a_peak in a_peak / N (asghmc: eps's peak)")
    p.add_argument(
        "--sampler",
        choices=("psgld", "asghmc"),
        default="psgld",
        help="cyclical pSGLD (csgld's) or cyclical scale-adapted SGHMC",
    )
    p.add_argument("--cycle", type=int, default=2000, help="steps per cycle (L)")
    p.add_argument("--exploration", type=float, default=0.9)
    p.add_argument("--draws", type=int, default=160, help="draws per chain")
    p.add_argument("--thin", type=int, default=50, help="sampling steps per draw")
    p.add_argument("--chains", type=int, default=4)
    p.add_argument(
        "--gibbs-every",
        type=int,
        default=None,
        metavar="K",
        help="every K steps draw the noise precision from its Gamma conditional (chains run one at a time)",
    )
    p.add_argument(
        "--explore-window",
        type=int,
        default=100,
        help="asghmc: the mass's averaging window in exploration steps (1000000000: uncapped)",
    )
    p.add_argument("--functional", action="store_true", help="fsgld's posterior: the split's fitted GP prior")
    p.add_argument(
        "--fixed-noise", action="store_true", help="with --functional: the noise sd fixed at the GP fit's, not sampled"
    )
    p.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="the sampler's minibatch (default: the protocol's 32; 0: every training row, full-batch gradients)",
    )
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--data", default=None)
    p.add_argument("--out", default="uci_cyclical_rhat.jsonl")
    p.add_argument("--plot", default=None, metavar="PNG", help="run nothing: plot --out's records into PNG")
    p.add_argument("--cells", default="docs/results/uci", help="the bench's cells, for --plot")
    args = p.parse_args()
    if args.plot:
        records = [json.loads(line) for line in Path(args.out).open()]
        plot(records, Path(args.cells), Path(args.plot))
        return
    torch.set_num_threads(args.threads)
    rec = run(args)
    with Path(args.out).open("a") as f:
        f.write(json.dumps(rec) + "\n")
    print(json.dumps(rec))


if __name__ == "__main__":
    main()
