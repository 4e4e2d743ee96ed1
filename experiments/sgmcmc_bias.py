"""How far are the SG samplers' predictives from the posterior's?  Measured against long NUTS.

Izmailov et al. (2021, "What are Bayesian neural network posteriors really like?") judge an
approximate posterior by how close its *predictive* is to that of long full-batch HMC: top-1
agreement and the total variation between predictive distributions, per test input.  Here the
same question on a problem where the reference is affordable on a CPU:

- data: 1,000 training rows and 500 test rows of kin8nm split 0 (standardised as the bench does);
- model: the bench's 2 x ``hidden`` tanh MLP, N(0, 1) prior, Gaussian noise *fixed* at
  ``sigma`` (standardised units), so every method targets one and the same posterior;
- reference: NUTS, ``ref_chains`` chains run twice with different seeds.  The distance between
  the two references is the floor below which no method can be told apart from the posterior;
- methods: SGLD, SGHMC and the adaptive (scale-adapted) SGHMC, minibatch 32, four vectorised
  chains of 100 draws, each at three step sizes.

For regression the predictive at a test input is the mixture ``(1/S) sum_s N(f_s(x), sigma^2)``.
Reported, averaged over the test inputs:

- ``tv``: total variation ``(1/2) int |p(y) - q(y)| dy`` between the method's and the
  reference's predictive (numerical integration on a grid; 0 = identical, 1 = disjoint);
- ``mean_shift``: ``|E_q[y] - E_p[y]| / sd_p[y]``, the predictive-mean error in units of the
  reference's predictive standard deviation;
- ``sd_ratio``: ``sd_q[y] / sd_p[y]`` (below 1: the method is over-confident);
- ``epistemic_ratio``: the ratio of the spreads of ``f(x)`` alone (no noise), which the fixed
  noise otherwise hides;
- the method's test RMSE and NLL in original units, and its seconds.

Run:  python -m experiments.sgmcmc_bias [--quick] [--out docs/results/bias]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch

import bnnkit
from bnnkit.core.errors import DivergenceError
from bnnkit.core.warm_start import map_init
from bnnkit.data import Minibatches, load_uci
from bnnkit.nets import mlp
from bnnkit.predict.predictive import network_outputs

METHODS = {
    "sgld": (lambda eps: bnnkit.SGLD(eps), (3e-5, 1e-4, 3e-4)),
    "sghmc": (lambda eps: bnnkit.SGHMC(eps, friction=10.0), (1e-3, 3e-3, 1e-2)),
    "asghmc": (lambda eps: bnnkit.AdaptiveSGHMC(step_size=eps), (3e-3, 1e-2, 3e-2)),
    # the same sampler from per-chain MAP warm starts (300 epochs of Adam from PyTorch's default
    # initialisation; the UCI bench's protocol 4 stops its MAP phase early on held-out rows
    # instead), a 1,000-step burn-in
    "asghmc-map": (lambda eps: bnnkit.AdaptiveSGHMC(step_size=eps), (3e-3, 1e-2)),
}
# settings of the sampling phase that differ from the shared ``sg_cfg`` (full runs only)
WARM = {"asghmc-map": {"burn_in": 1000, "map_epochs": 300, "map_max_steps": 20_000}}


def default_data() -> str | None:
    shared = Path(__file__).resolve().parents[2] / "shared" / "data"
    return str(shared) if shared.exists() else None


def problem(root: str | None, rows: int, test_rows: int, hidden: int, sigma: float):
    data = load_uci("kin8nm", 0, root=root)
    g = torch.Generator().manual_seed(0)
    tr = torch.randperm(data.x_train.shape[0], generator=g)[:rows]
    te = torch.randperm(data.x_test.shape[0], generator=g)[:test_rows]
    x, y = data.x_train[tr], data.y_train[tr]
    xt, yt = data.x_test[te], data.y_test[te]
    post = bnnkit.Posterior(
        mlp(x.shape[1], hidden), bnnkit.Gaussian(sigma), bnnkit.GaussianPrior(1.0), num_data=rows
    )
    return data, post, (x, y), (xt, yt)


def outputs(post, samples, xt) -> torch.Tensor:
    return network_outputs(post, samples, xt).reshape(-1, xt.shape[0]).double()  # [S, T]


def predictive_distance(f: torch.Tensor, ref: torch.Tensor, sigma: float, grid: int = 400) -> dict:
    """Per test input distances between the mixtures ``N(f_s, sigma^2)`` and ``N(ref_s, sigma^2)``."""
    lo = torch.minimum(f.min(0).values, ref.min(0).values) - 6 * sigma
    hi = torch.maximum(f.max(0).values, ref.max(0).values) + 6 * sigma
    t = torch.linspace(0, 1, grid, dtype=torch.float64)
    ys = lo[:, None] + (hi - lo)[:, None] * t[None, :]  # [T, G]
    dy = (hi - lo) / (grid - 1)

    def density(draws: torch.Tensor) -> torch.Tensor:  # [T, G]
        out = torch.zeros_like(ys)
        for chunk in draws.split(256):
            z = (ys[None] - chunk[:, :, None]) / sigma
            out += torch.exp(-0.5 * z**2).sum(0)
        return out / (draws.shape[0] * sigma * math.sqrt(2 * math.pi))

    p, q = density(ref), density(f)
    tv = 0.5 * ((p - q).abs().sum(1) * dy)  # Riemann sum; the grid spans both mixtures
    sd_p = (ref.var(0) + sigma**2).sqrt()
    sd_q = (f.var(0) + sigma**2).sqrt()
    return {
        "tv": float(tv.mean()),
        "mean_shift": float(((f.mean(0) - ref.mean(0)).abs() / sd_p).mean()),
        "sd_ratio": float((sd_q / sd_p).mean()),
        "epistemic_ratio": float((f.std(0) / ref.std(0)).mean()),
    }


def test_scores(f: torch.Tensor, data, yt: torch.Tensor, sigma: float) -> dict:
    y = yt.double()[None]
    lp = -0.5 * math.log(2 * math.pi * sigma**2) - 0.5 * ((y - f) / sigma) ** 2
    mix = torch.logsumexp(lp, 0) - math.log(f.shape[0])
    rmse = ((data.unnormalise_y(f.mean(0)) - data.unnormalise_y(yt.double())) ** 2).mean().sqrt()
    return {"rmse": float(rmse), "nll": -float(data.unnormalise_log_density(mix).mean())}


def reference(post, train, xt, chains: int, warmup: int, draws: int, seed: int, depth: int):
    t0 = time.perf_counter()
    s = bnnkit.sample(
        bnnkit.NUTS(max_tree_depth=depth),
        post,
        train,
        num_samples=draws,
        num_warmup=warmup,
        num_chains=chains,
        seed=seed,
        progress=False,
    )
    return outputs(post, s, xt), time.perf_counter() - t0, s


def run_sg(method: str, eps: float, post, train, xt, cfg: dict, seed: int, quick: bool = False):
    make, _ = METHODS[method]
    x, y = train
    t0 = time.perf_counter()
    init = None
    if method in WARM:
        w = WARM[method]
        if not quick:
            cfg = {**cfg, "burn_in": w["burn_in"]}
        steps = min(w["map_epochs"] * math.ceil(x.shape[0] / 32), w["map_max_steps"]) if not quick else 50
        init = map_init(post, (x, y), steps=steps, lr=1e-2, batch_size=32, start="fan_in")
    s = bnnkit.sample(
        make(eps),
        post,
        Minibatches(x, y, batch_size=32),
        num_samples=cfg["draws"],
        num_warmup=cfg["burn_in"],
        thin=cfg["thin"],
        num_chains=4,
        chain_method="vectorized",
        seed=seed,
        progress=False,
        on_divergence="warn",
        init=init,
    )
    return outputs(post, s, xt), time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=default_data())
    ap.add_argument("--quick", action="store_true", help="tiny settings: checks the script runs")
    ap.add_argument("--hidden", type=int, default=20)
    ap.add_argument("--sigma", type=float, default=0.3, help="fixed noise sd, standardised units")
    ap.add_argument("--out", default="docs/results/bias")
    ap.add_argument(
        "--methods",
        default=",".join(METHODS),
        help=f"comma-separated subset of {', '.join(METHODS)}; rows of the others are kept from the "
        "existing bias.json",
    )
    a = ap.parse_args()
    torch.set_num_threads(1)
    q = a.quick
    rows, test_rows = (200, 100) if q else (1000, 500)
    ref_cfg = {
        "chains": 2 if q else 4,
        "warmup": 30 if q else 500,
        "draws": 30 if q else 500,
        "depth": 6 if q else 8,
    }
    sg_cfg = {"burn_in": 200 if q else 4000, "draws": 10 if q else 100, "thin": 5 if q else 50}
    data, post, train, (xt, yt) = problem(a.data, rows, test_rows, a.hidden, a.sigma)

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    # The reference takes most of the run (about 40 min on one core): its test outputs are kept,
    # keyed by its settings, so a rerun (other SG settings) reuses them.
    key = {"rows": rows, "test_rows": test_rows, "hidden": a.hidden, "sigma": a.sigma, **ref_cfg}
    cache = out / ("reference_quick.pt" if q else "reference.pt")
    saved = torch.load(cache, weights_only=True) if cache.is_file() else None
    if saved is not None and saved.get("key") == json.dumps(key, sort_keys=True):
        ref_a, ref_b, sec_a, sec_b = saved["a"], saved["b"], float(saved["sec_a"]), float(saved["sec_b"])
    else:
        args = (post, train, xt, ref_cfg["chains"], ref_cfg["warmup"], ref_cfg["draws"])
        ref_a, sec_a, _ = reference(*args, 0, ref_cfg["depth"])
        ref_b, sec_b, _ = reference(*args, 1, ref_cfg["depth"])
        torch.save(
            {"key": json.dumps(key, sort_keys=True), "a": ref_a, "b": ref_b, "sec_a": sec_a, "sec_b": sec_b},
            cache,
        )
    ref = torch.cat([ref_a, ref_b])
    fk = ref_a.reshape(ref_cfg["chains"], -1, ref_a.shape[-1])
    from bnnkit.diagnostics import rhat

    floor = predictive_distance(ref_b, ref_a, a.sigma)
    rows_out = [
        {
            "method": "nuts (second reference)",
            "step_size": None,
            "seconds": sec_b,
            **floor,
            **test_scores(ref_b, data, yt, a.sigma),
        }
    ]
    print(
        f"reference: NUTS {ref_cfg['chains']} chains x {ref_cfg['draws']} draws, twice: {sec_a:.0f} s + {sec_b:.0f} s;"
        f" function R-hat (first reference) max {float(rhat(fk).max()):.3f};"
        f" floor TV {floor['tv']:.4f}"
    )
    chosen = [m for m in a.methods.split(",") if m]
    unknown = sorted(set(chosen) - set(METHODS))
    if unknown:
        raise SystemExit(f"unknown method(s) {unknown}; choose from {', '.join(METHODS)}")
    old_json = out / ("bias_quick.json" if q else "bias.json")
    if set(chosen) != set(METHODS) and old_json.is_file():  # keep the rows of the methods not rerun
        rows_out += [
            r
            for r in json.loads(old_json.read_text())["rows_out"]
            if r["method"] in set(METHODS) - set(chosen)
        ]
    for method in chosen:
        for eps in METHODS[method][1]:
            try:
                f, sec = run_sg(method, eps, post, train, xt, sg_cfg, seed=0, quick=q)
            except DivergenceError:  # every chain of the vectorised group stopped
                f, sec = torch.full((1,), float("nan")), float("nan")
            ok = bool(torch.isfinite(f).all())
            row = {"method": method, "step_size": eps, "seconds": sec, "diverged": not ok}
            if ok:
                row |= predictive_distance(f, ref, a.sigma) | test_scores(f, data, yt, a.sigma)
            rows_out.append(row)
            print(
                f"{method:7s} eps={eps:<8g} "
                + (
                    f"TV {row['tv']:.3f}  mean-shift {row['mean_shift']:.3f}  sd-ratio {row['sd_ratio']:.3f}"
                    f"  epistemic-ratio {row['epistemic_ratio']:.3f}  RMSE {row['rmse']:.4f}  NLL {row['nll']:.3f}"
                    if ok
                    else "diverged"
                )
                + f"  {sec:.0f} s"
            )
    ref_scores = test_scores(ref, data, yt, a.sigma)
    report = {
        "dataset": "kin8nm",
        "split": 0,
        "rows": rows,
        "test_rows": test_rows,
        "hidden": a.hidden,
        "sigma": a.sigma,
        "reference": {
            **ref_cfg,
            "seconds": [sec_a, sec_b],
            "function_rhat_max": float(rhat(fk).max()),
            **ref_scores,
        },
        "sg": sg_cfg,
        "warm": WARM,
        "rows_out": rows_out,
        "quick": q,
    }
    (out / ("bias_quick.json" if q else "bias.json")).write_text(json.dumps(report, indent=1))
    print(f"reference RMSE {ref_scores['rmse']:.4f} NLL {ref_scores['nll']:.3f}; wrote {out}")


if __name__ == "__main__":
    main()
