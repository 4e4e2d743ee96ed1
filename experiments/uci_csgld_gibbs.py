"""The UCI bench's csgld (cyclical pSGLD) with Gibbs draws of the noise precision: an experiment.

Protocol 7's csgld moves the noise precision with the weights. On yacht and energy its chains
agree in function space but sample a noise about 4x their own training residual, because the
precision lags each kick of the cycle (docs/archive/sgmcmc_diagnosis.md). This runs the same cells with a
draw of the precision from its Gamma conditional every 50 steps
(:func:`bnnkit.bench.uci.gibbs_csgld_protocol`, version 8). Its chains run one at a time (a
vectorised target has no conjugate updates), spend the whole budget, and the function-space R-hat
and ESS are measured at the end. The cells are written and read as the bench's are::

    python -m experiments.uci_csgld_gibbs --datasets boston,yacht --splits 10 --data ../shared/data --out OUT
    python -m experiments.uci_csgld_gibbs --datasets boston,yacht --splits 10 --from-cells OUT/uci_cells.jsonl --out OUT
"""

# Retired in issue 44: this script ran on the UCI bench's own method runners and versioned
# protocols, which `bnnkit bench uci` no longer has (every method now runs through bnnkit.fit).
raise SystemExit(
    "experiments/uci_csgld_gibbs.py needs the UCI bench's old method runners, removed in issue 44; run it at "
    "commit 5a6b133, the last that ran it: git checkout 5a6b133 && python -m experiments.uci_csgld_gibbs ..."
)
