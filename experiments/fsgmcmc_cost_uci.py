"""fSGHMC with the Vecchia prior (bnnkit.functional.Vecchia defaults) against protocol 3's exact-form cells.

For each split: the protocol-3 cell's GP hyperparameters (its kept fit start) and noise, its step
size (through the bench's default-step hook), seed = split, full protocol otherwise; SGHMC timed
in the same process.  The bench module is not edited: ``FunctionalPosterior`` is replaced, in
``bnnkit.functional``, by a subclass whose ``prior_form`` defaults to ``Vecchia()``.

Run:  python -m experiments.fsgmcmc_cost_uci kin8nm kin8nm 0 10
      python -m experiments.fsgmcmc_cost_uci protein protein 0 5
(dataset name, cells file docs/results/uci/<file>.jsonl, first split, end split); one JSON line per split.
"""

# Retired in issue 44: this script ran on the UCI bench's own method runners and versioned
# protocols, which `bnnkit bench uci` no longer has (every method now runs through bnnkit.fit).
raise SystemExit(
    "experiments/fsgmcmc_cost_uci.py needs the UCI bench's old method runners, removed in issue 44; run it at "
    "commit 1eb2739, the last that ran it: git checkout 1eb2739 && python -m experiments.fsgmcmc_cost_uci ..."
)
