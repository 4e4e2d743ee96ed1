"""Published UCI regression numbers on the same 20 standard splits, in original units.

All three use the Hernandez-Lobato & Adams (2015) splits that ``bnnkit.data.load_uci`` reads
(protein: 5 splits), one hidden layer of 50 units (protein: 100), and report test RMSE and test
NLL (``-mean log p(y*)``) in the target's original units, mean +- the spread they published:

- ``pbp``: probabilistic backpropagation, Hernandez-Lobato & Adams, ICML 2015, Table 1/2
  (mean +- standard error);
- ``mcdropout``: MC dropout, Gal & Ghahramani, ICML 2016, Table 1 (mean +- standard error);
- ``ensemble``: deep ensembles (5 networks, proper scoring rule, adversarial training),
  Lakshminarayanan et al., NeurIPS 2017, Table 1 (mean +- standard deviation over splits);
- ``sghmc_adapted``: scale-adapted SGHMC, Springenberg et al., NeurIPS 2016 (50 units per hidden
  layer); test NLL only (their test log-likelihood, negated) on Boston, yacht, concrete and wine,
  20 splits.  Transcribed second-hand, from the table that quotes theirs in "Ergodic measure
  preserving flows" (ICLR 2019 submission, Table 3), not from the original paper; the spread is
  given as quoted, not restated as a standard error.  Check it against the original before citing.

bnnkit's benchmark network is larger (2 x 100 tanh units), so these are anchors for what the
field reaches on the same data, not a like-for-like comparison; the functional SG-MCMC paper's
own numbers (standardised units) stay in :data:`bnnkit.bench.uci.PAPER`.  The UCI bench's table
shows them as ``published <method>`` rows under each known set's own (:func:`published` has
nothing for a set of the user's own, and the rows are left out there).
"""

from __future__ import annotations

SOURCES = {
    "pbp": "Hernandez-Lobato & Adams, ICML 2015 (PBP), mean +- s.e. over the standard splits",
    "mcdropout": "Gal & Ghahramani, ICML 2016 (MC dropout), mean +- s.e. over the standard splits",
    "ensemble": "Lakshminarayanan et al., NeurIPS 2017 (deep ensembles), mean +- s.d. over the standard splits",
    "sghmc_adapted": "Springenberg et al., NeurIPS 2016 (scale-adapted SGHMC), test NLL only, mean +- spread as "
    "quoted in Table 3 of the ICLR 2019 submission 'Ergodic measure preserving flows' (second-hand)",
}

# per (metric, method): (mean, spread) on each set of _SETS, in its order; None: not published
_SETS = ("bostonHousing", "concrete", "energy", "kin8nm", "power-plant", "protein-tertiary-structure",
         "wine-quality-red", "yacht")  # fmt: skip
_ROWS = {
    ("rmse", "pbp"): ((3.014, 0.18), (5.667, 0.093), (1.804, 0.048), (0.098, 0.001), (4.124, 0.035), (4.732, 0.013), (0.635, 0.008), (1.015, 0.054)),
    ("rmse", "mcdropout"): ((2.97, 0.19), (5.23, 0.12), (1.66, 0.04), (0.1, 0.0), (4.02, 0.04), (4.36, 0.01), (0.62, 0.01), (1.11, 0.09)),
    ("rmse", "ensemble"): ((3.28, 1.0), (6.03, 0.58), (2.09, 0.29), (0.09, 0.0), (4.11, 0.17), (4.71, 0.06), (0.64, 0.04), (1.58, 0.48)),
    ("nll", "pbp"): ((2.57, 0.09), (3.16, 0.02), (2.04, 0.02), (-0.9, 0.01), (2.84, 0.01), (2.97, 0.0), (0.97, 0.01), (1.63, 0.02)),
    ("nll", "mcdropout"): ((2.46, 0.06), (3.04, 0.02), (1.99, 0.02), (-0.95, 0.01), (2.8, 0.01), (2.89, 0.0), (0.93, 0.01), (1.55, 0.03)),
    ("nll", "ensemble"): ((2.41, 0.25), (3.06, 0.18), (1.38, 0.22), (-1.2, 0.02), (2.79, 0.04), (2.83, 0.02), (0.94, 0.12), (1.18, 0.21)),
    ("nll", "sghmc_adapted"): ((2.54, 0.04), (3.38, 0.24), None, None, None, None, (1.04, 0.17), (1.11, 0.08)),
}  # fmt: skip
# metric -> method -> canonical data-set name -> (mean, spread)
PUBLISHED: dict[str, dict[str, dict[str, tuple[float, float]]]] = {
    metric: {
        m: {s: v for s, v in zip(_SETS, row) if v is not None}
        for (mt, m), row in _ROWS.items()
        if mt == metric
    }
    for metric in ("rmse", "nll")
}


def published(metric: str, dataset: str) -> dict[str, tuple[float, float]]:
    """``{method: (mean, spread)}`` published for ``dataset`` (canonical name), original units."""
    return {m: v[dataset] for m, v in PUBLISHED[metric].items() if dataset in v}
