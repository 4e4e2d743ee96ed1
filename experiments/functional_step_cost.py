"""What a functional sampler pays beyond the weight-space default, in two parts, for one checkout.

1. One four-chain step: ``Target.estimate_grad`` of the default recipe's posterior (N(0, 1) weights,
   a Gaussian whose noise is learnt) and of ``bnnkit.fit(method="fsgld")``'s (an RBF GP prior in its
   Vecchia form at the training inputs) on Boston's shape: 338 random rows, 13 inputs, MLP
   13-100-100-1, 32 rows per chain; best of seven rounds of 300 steps.
2. The GP prior's fit as ``bnnkit.fit`` runs it on kin8nm's shape: 300 Adam steps on 500 of 7,000
   random rows with 8 inputs (two starts), twice.

``--code DIR`` times the bnnkit package found in DIR (e.g. a clone at an older commit), so that two
versions can be timed alternately on the same machine; run with one thread.

    python -m experiments.functional_step_cost --code /tmp/old-clone --label before
    python -m experiments.functional_step_cost --label after
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--code", default=None, help="a folder holding the bnnkit package to time")
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    if args.code:
        sys.path.insert(0, args.code)
    import torch

    import bnnkit
    from bnnkit.functional import FunctionalPosterior, GPPrior, Vecchia
    from bnnkit.nets import mlp

    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    print(args.label, bnnkit.__file__)
    g = torch.Generator().manual_seed(0)
    n, d, k = 338, 13, 4
    x, y = torch.randn(n, d, generator=g), torch.randn(n, generator=g)
    net = mlp(d, 100)
    lik = bnnkit.Gaussian(0.5, learn_noise=True, precision_prior=(1.0, 1e-3))
    gp = GPPrior("rbf", input_dim=d, lengthscale=3.0, outputscale=1.0)
    posteriors = {
        "weight": bnnkit.Posterior(net, lik, bnnkit.GaussianPrior(1.0), num_data=n),
        "functional": FunctionalPosterior(net, lik, gp, x, x, num_data=n, prior_form=Vecchia()),
    }
    us = {}
    for name, post in posteriors.items():
        target = post.target().vectorized(chain_batched=True)
        pos = torch.stack([post.initial_position("module")] * k)
        gen = torch.Generator().manual_seed(1)

        def step(target=target, pos=pos, gen=gen):
            rows = torch.randint(n, (k, 32), generator=gen)
            return target.estimate_grad(pos, (x[rows], y[rows]), gen)

        for _ in range(200):
            step()
        rounds = []
        for _ in range(7):
            t0 = time.perf_counter()
            for _ in range(300):
                step()
            rounds.append((time.perf_counter() - t0) / 300)
        us[name] = min(rounds) * 1e6
    print(
        f"{args.label} 4-chain step (us): weight {us['weight']:.0f}, functional {us['functional']:.0f}, "
        f"ratio {us['functional'] / us['weight']:.2f}"
    )
    g = torch.Generator().manual_seed(0)
    x = torch.randn(7000, 8, generator=g)
    y = torch.sin(x[:, 0]) + 0.3 * torch.randn(7000, generator=g)
    for _ in range(2):
        prior = GPPrior("rbf", input_dim=8)
        t0 = time.perf_counter()
        fitted = prior.fit(
            x, y, num_steps=300, max_points=500, generator=torch.Generator().manual_seed(0), progress=False
        )
        print(
            f"{args.label} GP fit: {time.perf_counter() - t0:.2f} s, loss {fitted['loss']:.10f}, "
            f"noise variance {fitted['noise_variance']:.10f}"
        )


if __name__ == "__main__":
    main()
