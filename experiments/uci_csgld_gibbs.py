"""The UCI bench's csgld (cyclical pSGLD) with Gibbs draws of the noise precision: an experiment.

Protocol 7's csgld moves the noise precision with the weights. On yacht and energy its chains
agree in function space but sample a noise about 4x their own training residual, because the
precision lags each kick of the cycle (docs/sgmcmc_diagnosis.md). This runs the same cells with a
draw of the precision from its Gamma conditional every 50 steps
(:func:`bnnkit.bench.uci.gibbs_csgld_protocol`, version 8). Its chains run one at a time (a
vectorised target has no conjugate updates), spend the whole budget, and the function-space R-hat
and ESS are measured at the end. The cells are written and read as the bench's are::

    python -m experiments.uci_csgld_gibbs --datasets boston,yacht --splits 10 --data ../shared/data --out OUT
    python -m experiments.uci_csgld_gibbs --datasets boston,yacht --splits 10 --from-cells OUT/uci_cells.jsonl --out OUT
"""

from __future__ import annotations

from bnnkit.bench.uci import gibbs_csgld_protocol
from experiments._uci_experiment import experiment_parser, run_experiment


def main() -> None:
    p = experiment_parser(__doc__, "boston,yacht,concrete,energy", "bnnkit-out/uci-csgld-gibbs")
    p.add_argument("--every", type=int, default=50, help="steps between Gibbs draws of the noise precision")
    a = p.parse_args()
    run_experiment(a, "csgld", lambda quick: gibbs_csgld_protocol(quick, a.every))


if __name__ == "__main__":
    main()
