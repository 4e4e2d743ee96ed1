"""Check the SG-MCMC quality issue's UCI targets on a ``bnnkit bench uci`` report.

Reads the ``uci.json`` a run (or a ``--from-cells`` rebuild) wrote and prints, in original units:

1. per data set, every method's test NLL (mean +- s.e. over splits), the lowest, and the methods
   within one standard error of it: their one-s.e. intervals overlap the lowest's,
   ``mean_m - se_m <= mean_best + se_best``;
2. the sampler rows against NUTS: is ``sghmc``'s RMSE and NLL within one s.e. of NUTS's, or
   better (``mean_sghmc <= mean_nuts + max(se_sghmc, se_nuts)``)?
3. per split, the SG cells whose RMSE exceeds 1.2x MC dropout's on the same split;
4. the convergence-checked cells' function-space R-hat: how many are <= 1.1.

Run:  python -m experiments.uci_targets OUT/uci.json [--samplers sghmc,fsghmc,sgld,csgld,fsgld]
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict

from bnnkit.bench.uci.report import mean_se


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report", help="uci.json of bnnkit bench uci")
    ap.add_argument("--samplers", default="sghmc,fsghmc,sgld,csgld,fsgld", help="the bnnkit sampler rows")
    a = ap.parse_args()
    rep = json.loads(open(a.report).read())
    samplers = [m for m in a.samplers.split(",") if m]
    cells = [c for c in rep["cells"] if math.isfinite(c["rmse"]) and math.isfinite(c["nll"])]
    by = defaultdict(lambda: defaultdict(list))
    for c in cells:
        by[c["dataset"]][c["method"]].append(c)

    print("## Lowest test NLL (original units), and the methods within one s.e. of it\n")
    wins = 0
    for ds, methods in by.items():
        stats = {m: mean_se([c["nll"] for c in cs]) for m, cs in methods.items()}
        best = min(stats, key=lambda m: stats[m][0])
        bm, bs = stats[best]
        close = [
            m for m, (mu, se) in stats.items() if mu - (se if se == se else 0) <= bm + (bs if bs == bs else 0)
        ]
        won = any(m in samplers for m in close)
        wins += won
        row = ", ".join(
            f"{m} {mu:.3f} +- {se:.3f}" for m, (mu, se) in sorted(stats.items(), key=lambda kv: kv[1][0])
        )
        print(f"- {ds}: lowest {best}; within 1 s.e.: {', '.join(close)}; sampler among them: {won}\n  {row}")
    print(f"\nsets where a bnnkit sampler is lowest or within 1 s.e.: {wins} of {len(by)}\n")

    print("## sghmc against NUTS (RMSE and NLL within one s.e., or better)\n")
    for ds, methods in by.items():
        if "nuts" not in methods or "sghmc" not in methods:
            continue
        # on the splits both have (a NUTS table still running has fewer)
        both = {c["split"] for c in methods["sghmc"]} & {c["split"] for c in methods["nuts"]}
        out = []
        for k in ("rmse", "nll"):
            s = mean_se([c[k] for c in methods["sghmc"] if c["split"] in both])
            n = mean_se([c[k] for c in methods["nuts"] if c["split"] in both])
            ok = s[0] <= n[0] + max(s[1], n[1])
            out.append(
                f"{k} {s[0]:.3f} +- {s[1]:.3f} vs {n[0]:.3f} +- {n[1]:.3f}: {'met' if ok else 'missed'}"
            )
        print(f"- {ds} ({len(both)} splits): " + "; ".join(out))

    print("\n## SG cells with RMSE above 1.2x MC dropout's on the same split\n")
    over, total = [], 0
    for ds, methods in by.items():
        drop = {c["split"]: c["rmse"] for c in methods.get("mcdropout", [])}
        for m in samplers:
            for c in methods.get(m, []):
                if c["split"] in drop:
                    total += 1
                    if c["rmse"] > 1.2 * drop[c["split"]]:
                        over.append(f"{ds} {m} split {c['split']}: {c['rmse']:.3f} vs {drop[c['split']]:.3f}")
    print(f"{len(over)} of {total} cells" + (":\n- " + "\n- ".join(over) if over else ""))

    print("\n## Function-space R-hat of the SG cells (the target), and of NUTS's where it was measured\n")
    rh = [(c["dataset"], c["method"], c["rhat"]) for c in cells if c.get("rhat") is not None]
    if rh:
        sg = [r for _, m, r in rh if m in samplers]
        ok = sum(r <= 1.1 for r in sg)
        print(f"SG cells: {ok} of {len(sg)} <= 1.1 ({100 * ok / max(len(sg), 1):.0f} %)")
        nuts = [r for _, m, r in rh if m == "nuts"]
        if nuts:
            print(f"NUTS cells: {sum(r <= 1.1 for r in nuts)} of {len(nuts)} <= 1.1")
        per = defaultdict(list)
        for ds, m, r in rh:
            per[(ds, m)].append(r)
        for m in dict.fromkeys(m for _, m, _ in rh):
            rs = [r for _, mm, r in rh if mm == m]
            print(f"{m}: {sum(r <= 1.1 for r in rs)} of {len(rs)} cells <= 1.1")
        for (ds, m), rs in per.items():
            rs = sorted(rs)
            print(
                f"- {ds} {m}: median {rs[len(rs) // 2]:.2f}, range {rs[0]:.2f}-{rs[-1]:.2f}, "
                f"{sum(r <= 1.1 for r in rs)} of {len(rs)} <= 1.1"
            )


if __name__ == "__main__":
    main()
