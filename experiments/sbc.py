"""Simulation-based calibration (Talts et al. 2018) of bnnkit's exact samplers.

- Eight schools, non-centred (``mu ~ N(0, 5)``, ``tau ~ HalfCauchy(5)`` sampled as ``log tau``
  with its Jacobian, ``theta_tilde_j ~ N(0, 1)``, ``y_j ~ N(mu + tau theta_tilde_j, sigma_j)``),
  a plain log density: NUTS and HMC (10 leapfrog steps), step size and diagonal metric tuned
  by the driver's windowed warm-up.  Quantities: ``mu``, ``log_tau`` (ranks are invariant under
  the monotone map to ``tau``), the eight ``theta_tilde_j`` and the first school effect
  ``theta_1 = mu + tau theta_tilde_1``.
- Bayesian linear regression with two coefficients (an ``nn.Linear(2, 1)`` without bias,
  ``N(0, 1)`` prior, Gaussian noise 1, 5 fixed inputs): random-walk MH (adaptive), MH with a
  fixed Gaussian random walk, Metropolis-within-Gibbs (one block per coefficient), rejection
  sampling (prior proposal, likelihood bound) and importance sampling (prior proposal, then
  resampled to ``L`` draws).
- Negative controls, which SBC should reject: ULA (no Metropolis correction, step 0.3) on the
  regression, and HMC on eight schools with the ``log tau`` Jacobian left out of the density.

Each replication: a prior draw, a simulated data set, one chain of ``L * thin`` kept states after
warm-up, thinned to ``L`` draws; the rank of the prior draw among them per quantity; ranks binned
into ``bins`` bins and tested for uniformity by a chi-square test.  The bulk ESS of the ``L`` kept
draws is recorded per replication (correlated draws make a correct sampler's ranks U-shaped).

Run:  python -m experiments.sbc [--only nuts,hmc] [--reps N] [--out docs/results/sbc]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch

import bnnkit
from bnnkit.diagnostics import sampler_draws, sbc_ranks, sbc_uniformity
from bnnkit.samplers import (
    ULA,
    ImportanceSampler,
    MetropolisHastings,
    MetropolisWithinGibbs,
    RejectionSampler,
)
from bnnkit.samplers.metropolis import GaussianRandomWalk

DT = torch.float64
SIGMA = torch.tensor([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0], dtype=DT)
LOG_2PI = math.log(2 * math.pi)


# ---------------------------------------------------------------- eight schools, non-centred
def _normal_lp(x, mean, sd):
    z = (x - mean) / sd
    return -0.5 * z * z - torch.log(torch.as_tensor(sd, dtype=DT)) - 0.5 * LOG_2PI


def schools_log_density(p, y):
    mu, log_tau, tt = p["mu"], p["log_tau"], p["theta_tilde"]
    tau = log_tau.exp()
    lp = _normal_lp(mu, 0.0, 5.0).sum()
    lp = (
        lp + (math.log(2 / (math.pi * 5.0)) - torch.log1p((tau / 5.0) ** 2)).sum() + log_tau.sum()
    )  # HalfCauchy + Jacobian
    lp = lp + _normal_lp(tt, 0.0, 1.0).sum()
    return lp + _normal_lp(y, mu + tau * tt, SIGMA).sum()


def schools_log_density_no_jacobian(p, y):
    """A deliberate bug, for a negative control: the ``log tau`` Jacobian left out."""
    return schools_log_density(p, y) - p["log_tau"].sum()


def schools_prior(gen):
    mu = 5.0 * torch.randn((), generator=gen, dtype=DT)
    u = torch.rand((), generator=gen, dtype=DT)
    tau = 5.0 * torch.tan(0.5 * math.pi * u)  # |Cauchy(0, 5)|
    return {"mu": mu, "log_tau": tau.log(), "theta_tilde": torch.randn(8, generator=gen, dtype=DT)}


def schools_simulate(p, gen):
    return p["mu"] + p["log_tau"].exp() * p["theta_tilde"] + SIGMA * torch.randn(8, generator=gen, dtype=DT)


def schools_quantities(p):
    q = {"mu": p["mu"].reshape(-1), "log_tau": p["log_tau"].reshape(-1)}
    tt = p["theta_tilde"].reshape(-1, 8)
    for j in range(8):
        q[f"theta_tilde[{j}]"] = tt[:, j]
    q["theta[0]"] = q["mu"] + q["log_tau"].exp() * tt[:, 0]
    return q


SCHOOLS_INIT = {
    "mu": torch.zeros((), dtype=DT),
    "log_tau": torch.zeros((), dtype=DT),
    "theta_tilde": torch.zeros(8, dtype=DT),
}

# ---------------------------------------------------------------- Bayesian linear regression
_g = torch.Generator().manual_seed(2018)
X_LIN = torch.randn(5, 2, generator=_g, dtype=DT)


def linreg_posterior():
    module = torch.nn.Linear(2, 1, bias=False).double()
    return bnnkit.Posterior(module, bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0))


def linreg_prior(gen):
    return {"weight": torch.randn(1, 2, generator=gen, dtype=DT)}


def linreg_simulate(p, gen):
    y = X_LIN @ p["weight"].reshape(2) + torch.randn(X_LIN.shape[0], generator=gen, dtype=DT)
    return (X_LIN, y)


def linreg_rejection_draws(data, num_draws, seed):
    """Rejection sampling with the prior as proposal and ``k`` the exact maximum of this data set's
    likelihood (at the least-squares fit).  The default bound, the likelihood at zero residual, is
    valid but loose by ``exp(min SSR / 2)``: up to thousands of proposals per draw here."""
    X, y = data
    w_hat = torch.linalg.lstsq(X, y.unsqueeze(-1)).solution.squeeze(-1)
    ssr = float(((y - X @ w_hat) ** 2).sum())
    log_max = -0.5 * ssr - 0.5 * y.numel() * LOG_2PI
    algo = RejectionSampler(log_bound=log_max + 1e-9)
    s = bnnkit.sample(
        algo, linreg_posterior(), data, num_samples=num_draws, seed=seed, progress=False, validate=False
    )
    return {"weight": s.params["weight"].reshape(num_draws, 1, 2)}


def linreg_quantities(p):
    w = p["weight"].reshape(-1, 2)
    return {"w[0]": w[:, 0], "w[1]": w[:, 1]}


# ---------------------------------------------------------------- studies
# name: (model, algorithm, num_warmup, thin, exact?[, bnnkit.sample keyword arguments])
STUDIES = {
    "nuts": ("eight_schools", lambda: bnnkit.NUTS(), 200, 3, True),
    "hmc": ("eight_schools", lambda: bnnkit.HMC(num_steps=10), 200, 3, True),
    # the same samplers through their fused paths (compiled subtrees / compiled transition blocks)
    "nuts_fused": ("eight_schools", lambda: bnnkit.NUTS(), 200, 3, True, {"fused": True}),
    "hmc_fused": ("eight_schools", lambda: bnnkit.HMC(num_steps=10), 200, 3, True, {"fused": True}),
    "rwmh": ("linreg", lambda: bnnkit.RandomWalkMH(), 200, 10, True),
    "mh": ("linreg", lambda: MetropolisHastings(GaussianRandomWalk(0.7)), 100, 8, True),
    "gibbs": ("linreg", lambda: MetropolisWithinGibbs(blocks=[[0], [1]]), 200, 6, True),
    "rejection": ("linreg", None, 0, 1, True),  # linreg_rejection_draws: RejectionSampler(log_bound=max L)
    "importance": ("linreg", lambda: ImportanceSampler(), 0, 20, True),
    # negative controls: not exact, SBC should reject them
    "ula": ("linreg", lambda: ULA(step_size=0.3), 100, 5, False),
    "hmc_no_jacobian": ("eight_schools_no_jacobian", lambda: bnnkit.HMC(num_steps=10), 200, 3, False),
}


def run_study(name: str, reps: int, L: int, seed: int) -> dict:
    model, make, warmup, thin, exact = STUDIES[name][:5]
    extra = STUDIES[name][5] if len(STUDIES[name]) > 5 else {}
    if model.startswith("eight_schools"):
        lp = schools_log_density if model == "eight_schools" else schools_log_density_no_jacobian
        draws = sampler_draws(
            make(), lp, num_warmup=warmup, thin=thin, init=SCHOOLS_INIT, on_divergence="warn", **extra
        )
        prior, sim, qfn = schools_prior, schools_simulate, schools_quantities
    elif make is None:
        draws = linreg_rejection_draws
        prior, sim, qfn = linreg_prior, linreg_simulate, linreg_quantities
    else:
        draws = sampler_draws(make(), linreg_posterior(), num_warmup=warmup, thin=thin, validate=False)
        prior, sim, qfn = linreg_prior, linreg_simulate, linreg_quantities
    t0 = time.perf_counter()
    r = sbc_ranks(
        prior, sim, draws, num_replications=reps, num_draws=L, seed=seed, quantities=qfn, compute_ess=True
    )
    secs = time.perf_counter() - t0
    return {
        "sampler": name,
        "model": model,
        "exact": exact,
        "num_warmup": warmup,
        "thin": thin,
        "num_replications": reps,
        "num_draws": L,
        "seconds": round(secs, 1),
        "ranks": {k: v.tolist() for k, v in r.ranks.items()},
        "ess_median": {k: float(v.median()) for k, v in r.ess.items()},
        "ess_p10": {k: float(v.quantile(0.1)) for k, v in r.ess.items()},
    }


def plot(study: dict, bins: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy.stats import binom

    names = list(study["ranks"])
    ncol = min(4, len(names))
    nrow = math.ceil(len(names) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.0 * ncol, 2.2 * nrow), squeeze=False)
    n, L = study["num_replications"], study["num_draws"]
    lo, hi = binom.ppf([0.005, 0.995], n, 1 / bins)  # 99 % band of one bin's count under uniformity
    for ax, q in zip(axes.flat, names):
        ax.axhspan(lo, hi, color="grey", alpha=0.25, lw=0, zorder=0)
        ax.hist(study["ranks"][q], bins=bins, range=(0, L + 1), color="tab:blue", alpha=0.8, zorder=1)
        ax.axhline(n / bins, color="k", lw=0.8)
        t = study["tests"][q]
        ax.set_title(f"{q}  p={t['p_value']:.3f}", fontsize=9)
        ax.set_xticks([0, L + 1])
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    fig.suptitle(
        f"SBC ranks: {study['sampler']} on {study['model']} ({n} replications, L = {L}; band: 99 % per bin)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=",".join(STUDIES))
    ap.add_argument("--reps", type=int, default=None, help="replications for every study (default per study)")
    ap.add_argument("--draws", type=int, default=49)
    ap.add_argument("--bins", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="docs/results/sbc")
    ap.add_argument("--img", default="docs/img")
    ap.add_argument("--plot-only", action="store_true", help="redraw the histograms from the JSON")
    args = ap.parse_args()
    torch.set_num_threads(1)
    default_reps = {
        "nuts": 100,
        "hmc": 100,
        "hmc_no_jacobian": 60,
        "ula": 600,
    }  # 3-4 s a replication at one thread; the rest ~0.1-1 s
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "sbc.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    if args.plot_only:
        for name, study in results.items():
            plot(study, study["bins"], Path(args.img) / f"sbc_{name}.png")
        return
    for name in args.only.split(","):
        reps = args.reps or default_reps.get(name, 200)
        study = run_study(name, reps, args.draws, args.seed)
        tests = sbc_uniformity({k: torch.tensor(v) for k, v in study["ranks"].items()}, args.draws, args.bins)
        study["bins"] = args.bins
        study["tests"] = {
            k: {"chi2": t.statistic, "p_value": t.p_value, "df": t.df, "counts": t.counts}
            for k, t in tests.items()
        }
        results[name] = study
        path.write_text(json.dumps(results, indent=1))
        plot(study, args.bins, Path(args.img) / f"sbc_{name}.png")
        print(f"{name}: {reps} replications in {study['seconds']} s", flush=True)
    ntests = sum(len(s["tests"]) for s in results.values() if s["exact"])
    print(f"\n{'sampler':<16}{'model':<26}{'quantity':<16}{'chi2':>8}{'p':>9}  {'ESS/L p10':>9}  pass 1%")
    for s in results.values():
        for q, t in s["tests"].items():
            ok = "yes" if t["p_value"] > 0.01 else "NO"
            print(
                f"{s['sampler']:<16}{s['model']:<26}{q:<16}{t['chi2']:8.2f}{t['p_value']:9.4f}  "
                f"{s['ess_p10'][q] / s['num_draws']:9.2f}  {ok}"
            )
    print(
        f"\n{ntests} tests of exact samplers; Bonferroni threshold at a family-wise 1 %: p < {0.01 / ntests:.2e}"
    )


if __name__ == "__main__":
    main()
