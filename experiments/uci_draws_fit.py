"""How well the draws of two UCI bench cells fit their training rows, and what noise they sample.

Runs the bench's cells of ``--methods`` (default csgld and sgld, protocol 7) on one split exactly
as ``bnnkit bench uci`` does, then reports for each, in original units: the training and test RMSE
of the predictive mean, the median predictive sd at the test inputs, and the sampled noise
log-precision (standardised units: per chain the median, over all draws min / median / max).
Written for docs/archive/uci_results_protocols_2_11.md, "Protocol 7": on the smooth sets cyclical pSGLD's chains agree
in function space but underfit, and this measures by how much::

    python -m experiments.uci_draws_fit --dataset yacht --split 0 --data ../shared/data
"""

# Retired in issue 44: this script ran on the UCI bench's own method runners and versioned
# protocols, which `bnnkit bench uci` no longer has (every method now runs through bnnkit.fit).
raise SystemExit(
    "experiments/uci_draws_fit.py needs the UCI bench's old method runners, removed in issue 44; run it at "
    "commit e796e9b, the last that ran it: git checkout e796e9b && python -m experiments.uci_draws_fit ..."
)
