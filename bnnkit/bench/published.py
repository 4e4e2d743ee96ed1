"""Published UCI regression numbers (test RMSE and NLL, original units, mean +- the published
spread; :data:`SOURCES` names each) on the same standard splits (Hernandez-Lobato & Adams 2015;
protein 5), with one hidden layer of 50 units (protein 100): anchors for what the field reaches on
this data, not a like-for-like comparison with bnnkit's 2 x 100 network.  ``sghmc_adapted`` is
transcribed second-hand (Table 3 of the ICLR 2019 submission "Ergodic measure preserving flows"),
its spread as quoted: check it against the original before citing.  The UCI bench shows them as
``published <method>`` rows under each known set's own; the paper's standardised numbers stay in
:data:`bnnkit.bench.uci.PAPER`."""

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
