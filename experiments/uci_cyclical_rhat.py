"""What it takes for SG-MCMC chains to agree in function space on a UCI split.

Protocol 5's sgld cell (preconditioned SGLD at a constant step ``1e-3 / N`` from per-chain MAP warm
starts) has function-space R-hat 1.56-1.88 on Boston: each chain stays in the mode its MAP phase
found, and R-hat across chains measures the spread between modes.  A chain whose own draws cover
several modes gives R-hat near 1.  This script runs the same posterior, the same MAP warm starts and
the same convergence measure (``FunctionSpaceConvergence`` at the first 100 test inputs), with the
constant step replaced by cyclical pSGLD (Zhang et al. 2020): a cosine cycle of ``L`` steps whose
peak ``a_peak / N`` kicks the chain out of its mode, the first ``exploration`` share of each cycle
an optimiser (no noise, no draws), the rest sampling as the step decays towards 0::

    eps_t = (a_peak / N) / 2 * (cos(pi * (t mod L) / L) + 1)

pSGLD's drift ``(eps / 2) G g`` moves each coordinate by about ``a / 2`` per step (``G g`` is ``N``
times a unit-scale RMSprop direction), so ``a_peak`` is the peak RMSprop learning rate times 2.

``--sampler asghmc`` runs cyclical scale-adapted SGHMC instead (Zhang et al.'s cSGHMC with the bench
sghmc's mass, :class:`~bnnkit.sgmcmc.AdaptiveSGHMC` on a :class:`~bnnkit.sgmcmc.CosineCycle`): the
same cycle with ``eps_t = a_peak / 2 (cos(...) + 1)`` (no ``/ N``: its drift ``eps^2 M^-1 grad U`` is
scale free), the mass estimated in the first cycle, re-estimated in every exploration stage over
at most ``--explore-window`` steps and frozen in every sampling stage.  At terminal velocity a coordinate
moves about ``eps^2 / mdecay = 20 eps^2`` per step, so ``a_peak`` 0.022 / 0.035 / 0.05 kick about
as hard as pSGLD's 0.02 / 0.05 / 0.1.

``--functional`` samples fsgld's posterior instead: the split's RBF GP prior, fitted as the bench
fits it, at the measurement points in its Vecchia form, from fsgld's MAP warm starts (cyclical
functional SG-MCMC, which the bench does not run).

Each setting is one line of JSON (test RMSE / NLL in original units, R-hat, ESS, seconds) appended
to ``--out``.  Example (docs/archive/sgmcmc_diagnosis.md, "Function-space R-hat: what it takes")::

    python -m experiments.uci_cyclical_rhat --dataset boston --split 0 --peak 5e-2 --cycle 2000 \\
        --exploration 0.9 --draws 160 --thin 50 --data ../shared/data --out runs.jsonl
    python -m experiments.uci_cyclical_rhat --out runs.jsonl --plot cyclical_rhat.png
"""

# Retired in issue 44: this script ran on the UCI bench's own method runners and versioned
# protocols, which `bnnkit bench uci` no longer has (every method now runs through bnnkit.fit).
raise SystemExit(
    "experiments/uci_cyclical_rhat.py needs the UCI bench's old method runners, removed in issue 44; run it at "
    "commit 0d7b9f6, the last that ran it: git checkout 0d7b9f6 && python -m experiments.uci_cyclical_rhat ..."
)
