"""Where one method stands on a UCI bench run, set by set, against issue 42's bar.

Reads one or more ``uci_cells.jsonl`` files of ``bnnkit bench uci`` and prints, per data set, for
``--method`` (default: ``default``):

- test NLL (original units, mean +- s.e. over splits) of every method, the lowest, and whether
  ``--method`` is lowest or within one s.e. of it, read loosely (the two one-s.e. intervals
  overlap) and strictly as the results pages read it (its mean within the lowest's s.e., and the
  paired difference to the lowest within its own s.e.);
- its RMSE over the best method's RMSE (the bar: at most 1.1x);
- its seconds per split over the ensemble's, each counting what a user pays (``seconds_total``:
  the method plus the GP noise fit it depends on; the bar: at most 2x);
- the paired NLL difference against each other method over the splits both ran (mean +- s.e.).

``python -m experiments.uci_standing docs/results/uci_bench/uci_cells.jsonl`` (``--markdown``: one
table row per set, as docs/results/default_recipe.md shows them)
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict

from bnnkit.bench.uci.report import mean_se


def total_seconds(cell: dict) -> float:
    if cell.get("seconds_total") is not None:
        return float(cell["seconds_total"])
    uses_gp = cell["method"] in ("ensemble", "mcdropout", "laplace", "bbb")
    return float(cell["seconds"]) + (float(cell.get("gp_fit_seconds") or 0.0) if uses_gp else 0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cells", nargs="+")
    ap.add_argument("--method", default="default")
    ap.add_argument("--markdown", action="store_true", help="one markdown table row per set")
    args = ap.parse_args()
    by: dict[str, dict[str, dict[int, dict]]] = defaultdict(lambda: defaultdict(dict))
    for path in args.cells:
        for line in open(path):
            c = json.loads(line)
            by[c["dataset"]][c["method"]][c["split"]] = c
    me, wins, strict_wins, rmse_ok, cost_ok = args.method, 0, 0, 0, 0
    if args.markdown:
        print(markdown(by, me))
        return
    for ds, methods in sorted(by.items()):
        if me not in methods:
            continue
        nll, rmse, sec = per_method(methods)
        best = min(nll, key=lambda m: nll[m][0])
        (bm, bs), (mm, ms) = nll[best], nll[me]
        close = mm - (0 if math.isnan(ms) else ms) <= bm + (0 if math.isnan(bs) else bs)
        strict = best == me or (
            mm <= bm + (0 if math.isnan(bs) else bs) and _paired_within(methods, me, best)
        )
        strict_wins += strict
        ratio = rmse[me] / min(rmse.values())
        cost = sec[me] / sec["ensemble"] if "ensemble" in sec else float("nan")
        wins += close
        rmse_ok += ratio <= 1.1
        cost_ok += cost <= 2.0
        splits = sorted(methods[me])
        print(f"## {ds} ({len(splits)} splits: {splits})")
        for m, (mu, se) in sorted(nll.items(), key=lambda kv: kv[1][0]):
            print(f"  {m:10s} NLL {mu:8.3f} +- {se:.3f}  RMSE {rmse[m]:.4g}  s/split {sec[m]:7.1f}")
        print(
            f"  {me}: lowest or within 1 s.e.: {bool(close)}, strictly: {bool(strict)} (lowest: {best}); "
            f"RMSE / best {ratio:.3f}; "
            f"seconds / ensemble {cost:.2f}"
        )
        for m, cs in sorted(methods.items()):
            if m == me:
                continue
            both = sorted(set(cs) & set(methods[me]))
            if len(both) > 1:
                mu, se = paired(methods, me, m)
                print(f"  paired NLL {me} - {m}: {mu:+.3f} +- {se:.3f} over {len(both)} splits")
    n = sum(1 for methods in by.values() if me in methods)
    print(f"\n{me}: NLL lowest or within 1 s.e. on {wins} of {n} ({strict_wins} strictly); "
          f"RMSE <= 1.1x best on {rmse_ok} of {n}; ")  # fmt: skip
    print(f"seconds <= 2x the ensemble's on {cost_ok} of {n}")


def _paired_within(methods: dict, me: str, best: str) -> bool:
    """Whether ``me``'s paired NLL difference to ``best`` is within its own s.e."""
    mu, se = paired(methods, me, best)
    return mu <= (0 if math.isnan(se) else se)


def per_method(methods: dict) -> tuple[dict, dict, dict]:
    """Per method of one set: (mean, s.e.) of the test NLL, mean RMSE, mean seconds per split."""
    nll = {m: mean_se([c["nll"] for c in cs.values()]) for m, cs in methods.items()}
    rmse = {m: mean_se([c["rmse"] for c in cs.values()])[0] for m, cs in methods.items()}
    sec = {m: mean_se([total_seconds(c) for c in cs.values()])[0] for m, cs in methods.items()}
    return nll, rmse, sec


def paired(methods: dict, me: str, m: str) -> tuple[float, float]:
    """(mean, s.e.) of me's NLL minus m's over the splits both ran."""
    both = sorted(set(methods[m]) & set(methods[me]))
    return mean_se([methods[me][s]["nll"] - methods[m][s]["nll"] for s in both])


def markdown(by: dict, me: str) -> str:
    """| set | me's NLL | best other NLL | paired vs ensemble | paired vs MC dropout | RMSE / best |
    seconds per split me / ensemble |"""
    out = [
        f"| set (splits) | {me} NLL | best other NLL | paired vs ensemble | paired vs MC dropout | "
        f"{me} RMSE / best | s/split {me} / ensemble |",
        "|---|---|---|---|---|---|---|",
    ]
    for ds, methods in sorted(by.items()):
        if me not in methods:
            continue
        nll, rmse, sec = per_method(methods)
        other = min((m for m in nll if m != me), key=lambda m: nll[m][0])

        def vs(m: str, methods: dict = methods) -> str:
            return "-" if m not in methods else "{:+.3f} +- {:.3f}".format(*paired(methods, me, m))

        mine = f"{nll[me][0]:.3f} +- {nll[me][1]:.3f}"
        theirs = f"{nll[other][0]:.3f} +- {nll[other][1]:.3f} ({other})"
        if nll[me][0] < nll[other][0]:
            mine = f"**{mine}**"
        else:
            theirs = f"**{theirs}**"
        cost = (
            f"{sec[me]:.0f} / {sec['ensemble']:.0f} ({sec[me] / sec['ensemble']:.1f}x)"
            if "ensemble" in sec
            else "-"
        )
        out.append(
            f"| {ds} ({len(methods[me])}) | {mine} | {theirs} | {vs('ensemble')} | {vs('mcdropout')} | "
            f"{rmse[me] / min(rmse.values()):.2f} | {cost} |"
        )
    return "\n".join(out)


if __name__ == "__main__":
    main()
