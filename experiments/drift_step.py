"""A smaller pSGLD step where the chains are sampled again with the noise held (protocol 16's
second sampling phase)?

**Why** (measured before this rule, 2026-12-08, on economics split 0 with the landed default:
``python -m experiments.predictive_width --dataset economics --split 0``): after protocol 16 holds
the noise at the GP's estimate, the predictive's width is mostly the spread between the draws'
means (sd 0.0175, standardised), not the held noise (0.0109) or the GP's widening (0.0030), while
the mean's test RMSE is 0.0099; the intervals cover 99.8 % of the test rows and the deep ensemble
is still 0.26 nats lower (DM 0.33, co2 0.10).  With the noise held at a small sd the likelihood is
sharp and pSGLD's step of ``1e-3 / N``, relative to the posterior's width, is large: the draws
wander from their fits (the discretised chain's stationary spread grows with the step times the
curvature).  Exploratory cells on the choice sets, economics and DM splits 0-2
(``experiments.recipe_cells --recipe '{"drift_step_size": ...}'``, not kept): step 3e-4 lowered the
NLL by 0.19-0.24 nats on all six, RMSE 0.97-1.01x of the current cells'; 1e-4 lowered it a little
more on DM but its RMSE rose on economics (up to 1.07x).

**The rule, written before any of its cells except the six exploratory ones above
(2026-12-08 01:04 UTC):** candidate ``SamplerRecipe(drift_step_size=3e-4)``: where protocol 16's
drift rule sends the chains back to be sampled again with the noise held at the GP's estimate,
that second sampling phase runs pSGLD at step ``3e-4 / N`` instead of ``1e-3 / N`` (3e-4: the
value of the earlier, rejected ``noiseless_step_size`` round, not tuned here).  Elsewhere nothing
changes, bit for bit: the first sampling phase, protocol 15's held noise (yacht, Cigar, Produc,
seals) and every target whose noise stays sampled.

- Choice: economics and DM, 10 random splits each and every gap and tail split, the candidate
  against the current (protocol 16) cells of ``noise_drift_choose.jsonl`` (label
  ``noise_drift``: commit 02559e6, whose code makes the current draws: stop 64 checked economics
  and PatentsRD split 0 score for score at its final commit).  (A) On each set's random splits:
  paired NLL change negative by more than its s.e., RMSE not more than 5 % worse.  (d) Each
  (set, kind) gap / tail group: mean paired NLL change not positive by more than its s.e.
- Confirmation: co2, Pound, Yen and OldMaps, 10 random splits each, against their current cells
  in ``noise_drift_confirm.jsonl`` (label ``noise_drift``, commit 02559e6).  None of them chose
  this rule.  (a) On each set where it applies on a majority of splits: mean paired NLL change not
  positive by more than its s.e., RMSE not more than 5 % worse.  (b) Where it does not apply,
  every score equals the current cell's; where it applies, the first sampling phase's R-hat and
  ESS (``noise_drift.first_run``) equal the current cell's (same code up to the second phase).
  (c) It applies on a majority of splits of at least two confirmation sets, and the paired NLL
  change pooled over the confirmation cells where it applies is negative.
- The seven UCI sets are unchanged by construction: the drift rule never applies on them (only
  energy keeps a sampled noise on a nearly noiseless target, ratio 0.68-1.05 < 1.15).
- Adopt (protocol 17, ``DEFAULT_RECIPE.drift_step_size = 3e-4``) only if (A), (d) and (a)-(c)
  hold.  Seconds are reported and do not decide (the step count does not change).

**Outcome (2026-12-08): rejected on gate (d), DM's tail splits.**  ``--table`` over the four cell
files (every candidate cell at commit 12c9dd6; the current cells are protocol 16's round's, and
where the candidate applied its first sampling phase equals theirs in R-hat and ESS, and where it
did not apply every score is equal):

| set | kind | applied | paired NLL change | RMSE | coverage | gate |
|---|---|---|---|---|---|---|
| economics | random | 10 / 10 | -0.203 +- 0.009 | 1.007x | 0.998 -> 0.987 | (A) met |
| DM | random | 10 / 10 | -0.225 +- 0.006 | 0.992x | 1.000 -> 0.997 | (A) met |
| economics | gap / tail | 5 / 5, 4 / 5 | -0.134 +- 0.091 / -0.207 +- 0.090 | 0.87x / 0.95x | | (d) met |
| DM | gap | 3 / 3 | -0.084 +- 0.045 | 0.95x | 0.983 -> 0.945 | (d) met |
| DM | tail | 3 / 3 | **+0.983 +- 0.777** | 1.00x | 0.605 -> 0.545 | **(d) failed** |
| co2 | random | 10 / 10 | -0.085 +- 0.008 | 1.004x | 0.996 -> 0.983 | (a) met |
| Pound | random | 10 / 10 | -0.208 +- 0.011 | 0.998x | 1.000 -> 0.996 | (a) met |
| Yen | random | 9 / 10 | -0.135 +- 0.017 | 0.993x | 0.983 -> 0.962 | (a) met |
| OldMaps | random | 4 / 10 | -0.013 +- 0.006 | 1.008x | 0.998 -> 0.995 | minority; (b) met |

(c) would have held (pooled over the 33 confirmation cells where it applied: -0.134 +- 0.012).
DM's tail split 1 went from NLL 15.84 to 18.37 (coverage 0.28 -> 0.21) and split 2 from 5.58 to
5.93: beyond the data the draws' spread is the predictive's only width that grows, and the smaller
step shrinks it there as well as inside the data (the failure of the earlier noiseless step and of
stacking).  Against the ensemble's cells of the same random splits, the candidate would have
stood at economics +0.058 +- 0.017, DM +0.109 +- 0.008 and co2 +0.009 +- 0.007.  **Not adopted**;
``SamplerRecipe.drift_step_size`` stays, off by default.

Commands (round 1)::

    python -m experiments.drift_step --datasets economics,DM --splits 10 \\
        --data /tmp/heldout-data --out experiments/results/drift_step_choose.jsonl
    python -m experiments.drift_step --datasets economics,DM --kinds gap,tail \\
        --data /tmp/heldout-data --out experiments/results/drift_step_choose.jsonl
    python -m experiments.drift_step --datasets co2,Pound,Yen,OldMaps --splits 10 \\
        --data /tmp/heldout-data --out experiments/results/drift_step_confirm.jsonl
    python -m experiments.drift_step --table experiments/results/noise_drift_choose.jsonl \\
        experiments/results/noise_drift_confirm.jsonl experiments/results/drift_step_choose.jsonl \\
        experiments/results/drift_step_confirm.jsonl

**Round 2: the smaller step over the same Langevin time.**  After round 1's outcome, four
exploratory cells on the choice sets (a snapshot with the second phase's burn-in and thinning
scaled by 1e-3 / 3e-4, not kept): DM tail split 1 NLL 10.43 (current 15.84, round 1 18.37), DM
tail split 2 4.77 (5.58, 5.93), economics random split 0 4.630 (4.869, 4.675; RMSE 20.4 against
25.5), DM random split 0 -4.264 (-4.028, -4.251).  A chain at a smaller step that runs as long in
Langevin time (``eps * steps``) moves as far as before, with less discretisation error; round 1's
chains at the smaller step moved less, which narrowed the tails.

**The rule of round 2, written before any of its cells except the four above (2026-12-08, the
commit's time):** candidate ``SamplerRecipe(drift_step_size=3e-4, drift_same_time=True)``: round
1's step in the second sampling phase, whose burn-in and thinning are the first phase's times
1e-3 / 3e-4, rounded (3,333 and 167; the same 100 draws a chain at most, the same stopping
rule).  Elsewhere nothing changes, bit for bit.

- Choice: economics and DM, as round 1: (A) and (d), the same gates, against the same current cells.
- Confirmation: co2, Pound, Yen and OldMaps, 10 random splits each, against the same current
  cells: (a), (b) and (c) as round 1.  None of them chose this rule (round 1's cells on them were
  read before this was written: its smaller step helped their random splits).  And, since tails
  are where round 1 failed, (d') every gap and tail split of co2, Pound and Yen (16 splits), both
  recipes in the same process: each (set, kind) group's mean paired NLL change not positive by
  more than its s.e.
- The seven UCI sets are unchanged by construction (as round 1).
- Adopt (protocol 17) only if (A), (d), (a)-(c) and (d') hold.  The second phase is about 3.3x
  as long where it applies: seconds are reported and do not decide.

**Outcome of round 2 (2026-12-08): every gate held** (``--round 2 --table`` over the four
files; every candidate cell at commit f1ef526):

| set | kind | applied | paired NLL change | RMSE | gate |
|---|---|---|---|---|---|
| economics | random | 10 / 10 | -0.214 +- 0.010 | 0.900x | (A) met |
| DM | random | 10 / 10 | -0.235 +- 0.006 | 0.876x | (A) met |
| economics | gap / tail | 5 / 5, 4 / 5 | -0.043 +- 0.058 / -0.403 +- 0.216 | 1.07x / 0.91x | (d) met |
| DM | gap / tail | 3 / 3, 3 / 3 | -0.092 +- 0.132 / -2.115 +- 1.663 | 0.93x / 0.96x | (d) met |
| co2 | random | 10 / 10 | -0.080 +- 0.008 | 0.994x | (a) met |
| Pound | random | 10 / 10 | -0.211 +- 0.009 | 0.938x | (a) met |
| Yen | random | 9 / 10 | -0.138 +- 0.017 | 0.960x | (a) met |
| OldMaps | random | 4 / 10 | -0.015 +- 0.007 | 0.997x | minority; (b) met |
| co2 | gap / tail | 2 / 2, 2 / 2 | -0.020 +- 0.039 / +1.068 +- 1.110 | 1.00x / 1.09x | (d') met |
| Pound | gap / tail | 3 / 3, 3 / 3 | -0.094 +- 0.073 / -2.245 +- 3.166 | 0.98x / 0.99x | (d') met |
| Yen | gap / tail | 3 / 3, 3 / 3 | -0.041 +- 0.018 / -4.361 +- 3.159 | 1.01x / 0.91x | (d') met |

(c): applied on a majority of three confirmation sets. Where the candidate applied, its first
sampling phase equals the current cell's, and every cell where it did not apply is equal score
for score. Against the ensemble's cells of the same random splits it would stand at economics
+0.047 +- 0.017, DM +0.099 +- 0.004 and co2 +0.014 +- 0.010 (protocol 16: +0.261, +0.334,
+0.095), with a lower RMSE than the ensemble on all three. The cost: the second phase is about
3.3x as long, so a split took about 42 s where it applied (about 20 s before; two jobs on this
2-core machine) against the ensemble's 4-6 s.

Not yet made the default: the session's time ran out before the full test suite and CI could run
with the default changed (protocol 17: ``DEFAULT_RECIPE.drift_step_size = 3e-4``,
``drift_same_time = True``, the bench's carry rule extended to protocol-16 cells whose
``noise_drift`` is None).  That is the next step.

Commands (round 2)::

    python -m experiments.drift_step --round 2 --datasets economics,DM --splits 10 \\
        --data /tmp/heldout-data --out experiments/results/drift_same_time_choose.jsonl
    python -m experiments.drift_step --round 2 --datasets economics,DM --kinds gap,tail \\
        --data /tmp/heldout-data --out experiments/results/drift_same_time_choose.jsonl
    python -m experiments.drift_step --round 2 --datasets co2,Pound,Yen,OldMaps --splits 10 \\
        --data /tmp/heldout-data --out experiments/results/drift_same_time_confirm.jsonl
    python -m experiments.drift_step --round 2 --datasets co2,Pound,Yen --kinds gap,tail --both \\
        --data /tmp/heldout-data --out experiments/results/drift_same_time_confirm.jsonl
    python -m experiments.drift_step --round 2 --table experiments/results/noise_drift_choose.jsonl \\
        experiments/results/noise_drift_confirm.jsonl experiments/results/drift_same_time_choose.jsonl \\
        experiments/results/drift_same_time_confirm.jsonl
"""

from __future__ import annotations

import argparse
import json

ROUNDS = {  # round -> (label, SamplerRecipe fields)
    1: ("drift_step", {"drift_step_size": 3e-4}),
    2: ("drift_same_time", {"drift_step_size": 3e-4, "drift_same_time": True}),
}
KEY = "drift_step_rule"
PREVIOUS_KEY, PREVIOUS_LABEL = "noise_drift_rule", "noise_drift"  # protocol 16's round


def as_current(rows: list[dict]) -> list[dict]:
    """Protocol 16's round cells of its adopted label, relabelled as this round's current recipe;
    this round's own rows as they are; everything else dropped."""
    out = []
    for r in rows:
        if KEY in r:
            out.append(r)
        elif r.get(PREVIOUS_KEY) == PREVIOUS_LABEL:
            out.append({**r, KEY: "current"})
    return out


def first_runs_equal(rows: list[dict], label: str) -> bool:
    """Gate (b)'s second half: where the candidate applied, its first sampling phase's record
    equals the current cell's."""
    from experiments.recipe_cells import cell_key

    current = {cell_key(r): r for r in rows if r.get(KEY) == "current"}
    ok = True
    for r in rows:
        if r.get(KEY) == label and r.get("noise_drift") is not None:
            c = current.get(cell_key(r))
            if c is None or (c.get("noise_drift") or {}).get("first_run") != r["noise_drift"]["first_run"]:
                print("first run differs:", cell_key(r))
                ok = False
    return ok


def main() -> None:
    from experiments.recipe_cells import add_cell_arguments, read_rows, round_table, run_round

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_cell_arguments(ap)
    ap.add_argument("--kinds", default=None, help="gap,tail: run those splits instead of the random ones")
    ap.add_argument("--round", type=int, default=1, choices=sorted(ROUNDS))
    a = ap.parse_args()
    label, candidate = ROUNDS[a.round]
    if a.table:
        rows = as_current(read_rows(a.table))
        round_table(rows, KEY, label, applied="noise_drift")
        print("first sampling phases equal where it applied:", first_runs_equal(rows, label))
        return
    run_round(a, label, candidate, KEY)
    if not a.kinds:
        print(json.dumps({"done": a.datasets}))


if __name__ == "__main__":
    main()
