"""Cost of one HMC gradient evaluation in bnnkit against the plain ``torch.func`` floor.

Both evaluate the full-batch loss of an MLP 13-50-50-1 (tanh) on 506 rows and its gradient:

- floor: ``torch.func.grad_and_value`` of a plain Gaussian log-likelihood over the parameter dict;
- bnnkit: ``Target.value_and_grad`` on the flat position vector, as HMC/NUTS call it (likelihood
  + Gaussian prior, unravel of the flat vector included).

Run:  python -m benchmarks.bench_hmc_grad [--out benchmarks/results/hmc_grad.json]
"""

from __future__ import annotations

import argparse

import torch
from torch.func import functional_call, grad_and_value

import bnnkit
from benchmarks._timing import time_per_call, write_results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/hmc_grad.json")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--number", type=int, default=300)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    net = torch.nn.Sequential(
        torch.nn.Linear(13, 50),
        torch.nn.Tanh(),
        torch.nn.Linear(50, 50),
        torch.nn.Tanh(),
        torch.nn.Linear(50, 1),
    )
    X, y = torch.randn(506, 13), torch.randn(506)
    params = {k: v.detach().clone() for k, v in net.named_parameters()}

    def plain_log_lik(p):
        r = y - functional_call(net, p, (X,)).squeeze(-1)
        return -0.5 * (r * r).sum()

    floor = grad_and_value(plain_log_lik)

    post = bnnkit.Posterior(net, bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0))
    target = post.target()
    x = post.initial_position("module")
    batch = (X, y)

    t_floor = time_per_call(lambda: floor(params), number=args.number)
    t_bnnkit = time_per_call(lambda: target.value_and_grad(x, batch), number=args.number)
    t_floor2 = time_per_call(lambda: floor(params), number=args.number)  # re-measure: drift check
    t_floor = min(t_floor, t_floor2)
    ratio = t_bnnkit / t_floor
    print(f"plain torch.func grad  : {t_floor * 1e6:8.1f} us")
    print(f"bnnkit HMC gradient    : {t_bnnkit * 1e6:8.1f} us")
    print(f"ratio bnnkit / floor   : {ratio:8.3f}   (target <= 1.2)")
    write_results(
        args.out,
        {
            "benchmark": "hmc_gradient",
            "model": "MLP 13-50-50-1 tanh, 506 rows, float32",
            "floor_us": t_floor * 1e6,
            "bnnkit_us": t_bnnkit * 1e6,
            "ratio": ratio,
            "target_ratio": 1.2,
        },
    )


if __name__ == "__main__":
    main()
