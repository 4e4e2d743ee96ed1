"""The UCI bench's sghmc choosing its ladder rung by fit as well as agreement: an experiment.

Protocol 10's sghmc (cyclical scale-adapted SGHMC) climbs the rungs (peak, window) and keeps the
first whose chains agree (function-space R-hat <= 1.1). Agreement says nothing of fit: on Boston
splits 7 and 8 the first converged rung has test NLL 2.55 and 3.28 against a median of 2.23, and on
yacht split 0 the window-1,000 rung converges with RMSE 3.13. This runs every rung, records how
each fits (in-sample log pointwise predictive density and PSIS-LOO on the training rows; test RMSE
and NLL, which no rule reads), and keeps, among the rungs that converge, the one of highest
in-sample log pointwise predictive density (:func:`bnnkit.bench.uci.fit_rungs_protocol`, version
11). PSIS-LOO is not the rule: on yacht its Pareto k was above 0.7 on most rows. The
cells are written and read as the bench's are::

    python -m experiments.uci_fit_rungs --datasets boston,yacht --splits 10 --data ../shared/data --out OUT
    python -m experiments.uci_fit_rungs --datasets boston,yacht --splits 10 --from-cells OUT/uci_cells.jsonl --out OUT

``--compare CELLS`` runs nothing: from the cells' per-rung records it prints, per set, the test
RMSE / NLL each rule's rung gives (``first``: protocol 10's first converged rung; ``lppd``: this
experiment's; ``PSIS-LOO``; ``reliable PSIS-LOO``, which trusts LOO only where its Pareto k
diagnostic does; ``best test NLL``: the rung a rule reading the test labels would keep, a bound and
not a rule), and checks that ``first`` gives protocol 10's cells in
``--p10-cells`` where the split has one.
"""

# Retired in issue 44: this script ran on the UCI bench's own method runners and versioned
# protocols, which `bnnkit bench uci` no longer has (every method now runs through bnnkit.fit).
raise SystemExit(
    "experiments/uci_fit_rungs.py needs the UCI bench's old method runners, removed in issue 44; run it at "
    "commit e796e9b, the last that ran it: git checkout e796e9b && python -m experiments.uci_fit_rungs ..."
)
