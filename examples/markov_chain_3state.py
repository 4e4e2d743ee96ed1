"""The 3-state Markov chain of the sampling seed text, reproduced with bnnkit's MH machinery.

The seed gives the column-stochastic transition matrix

    T = [[2/3, 1/2, 1/2],
         [1/6, 0,   1/2],
         [1/6, 1/2, 0  ]]        (T_ij = P(j -> i) as written: columns sum to 1)

whose invariant and equilibrium distribution is p* = [3/5, 1/5, 1/5]: T p* = p*, and T^n e_i -> p*
from every start.  Metropolis-Hastings builds a chain with the same stationary distribution from
p* alone: propose one of the other two states uniformly, accept with min(1, p*(j) / p*(i)).

Run:  python examples/markov_chain_3state.py
"""

from __future__ import annotations

import math

import torch

import bnnkit
from bnnkit.samplers import DiscreteUniformProposal, MetropolisHastings

P_STAR = torch.tensor([3 / 5, 1 / 5, 1 / 5], dtype=torch.float64)
T = torch.tensor([[2 / 3, 1 / 2, 1 / 2], [1 / 6, 0.0, 1 / 2], [1 / 6, 1 / 2, 0.0]], dtype=torch.float64)


def power_iteration(n: int = 50) -> torch.Tensor:
    """``T^n e_i`` for the three starting states (columns)."""
    return torch.linalg.matrix_power(T, n)


def mh_frequencies(num_samples: int = 30000, seed: int = 0, num_chains: int = 2) -> torch.Tensor:
    """Empirical state frequencies of an MH chain targeting p*."""

    def log_p(params, batch):
        return torch.log(P_STAR)[params["state"].long()].sum()

    samples = bnnkit.sample(
        MetropolisHastings(DiscreteUniformProposal(3)),
        log_p,
        None,
        init={"state": torch.zeros(1, dtype=torch.float64)},
        num_samples=num_samples,
        num_chains=num_chains,
        seed=seed,
        progress=False,
    )
    states = samples.params["state"].reshape(-1).long()
    return torch.bincount(states, minlength=3).double() / states.numel()


def main() -> None:
    print("T p* =", (T @ P_STAR).tolist(), " (p* =", P_STAR.tolist(), ")")
    for n in (1, 2, 5, 20):
        cols = power_iteration(n)
        print(f"T^{n:<2d} e_i columns:", [[round(float(v), 4) for v in cols[:, i]] for i in range(3)])
    freq = mh_frequencies()
    print("\nMetropolis-Hastings on p* (2 chains x 30000 draws):")
    print("  state   target   empirical")
    for i in range(3):
        print(f"  {i}       {float(P_STAR[i]):.4f}   {float(freq[i]):.4f}")
    err = float((freq - P_STAR).abs().max())
    print(f"  max abs error {err:.4f} (MC scale ~ {math.sqrt(0.24 / 60000):.4f} x autocorrelation)")


if __name__ == "__main__":
    main()
