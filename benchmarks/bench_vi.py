"""One Bayes-by-Backprop step (local reparameterisation) against a plain SGD step.

Same MLP 13-50-50-1 (tanh), same minibatch of 32 rows. The SGD step is forward, backward and
``torch.optim.SGD.step``; the BBB step is the ELBO terms (one local-reparameterised forward, the
closed-form KL), backward and ``torch.optim.Adam.step`` on ``(mu, rho)``.

Run:  python -m benchmarks.bench_vi [--out benchmarks/results/vi.json]
"""

from __future__ import annotations

import argparse

import torch

import bnnkit
from benchmarks._timing import time_per_call, write_results
from bnnkit.vi import BayesByBackprop, MeanFieldGaussian


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/vi.json")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--number", type=int, default=500)
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
    X, y = torch.randn(32, 13), torch.randn(32)

    sgd = torch.optim.SGD(net.parameters(), lr=1e-4)

    def sgd_step():
        sgd.zero_grad(set_to_none=True)
        loss = ((net(X).squeeze(-1) - y) ** 2).sum()
        loss.backward()
        sgd.step()

    post = bnnkit.Posterior(net, bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0), num_data=506)
    bbb = BayesByBackprop(estimator="local")
    q = MeanFieldGaussian(post)
    adam = torch.optim.Adam(q.parameters(), lr=1e-3, fused=True)  # as BayesByBackprop.fit
    gen = torch.Generator().manual_seed(0)
    plan = bbb.plan(post)

    def bbb_step():
        ll, kl = bbb.terms(plan, q, (X, y), gen)
        loss = -(ll - kl / 16)
        adam.zero_grad(set_to_none=True)
        loss.backward()
        adam.step()

    t_sgd = time_per_call(sgd_step, number=args.number)
    t_bbb = time_per_call(bbb_step, number=args.number)
    t_sgd = min(t_sgd, time_per_call(sgd_step, number=args.number))
    ratio = t_bbb / t_sgd
    print(f"plain SGD step              : {t_sgd * 1e6:8.1f} us")
    print(f"BBB step (local reparam)    : {t_bbb * 1e6:8.1f} us")
    print(f"ratio BBB / SGD             : {ratio:8.3f}   (target <= 2.0)")
    write_results(
        args.out,
        {
            "benchmark": "bbb_step",
            "model": "MLP 13-50-50-1 tanh, batch 32",
            "sgd_us": t_sgd * 1e6,
            "bbb_us": t_bbb * 1e6,
            "ratio": ratio,
            "target_ratio": 2.0,
        },
    )


if __name__ == "__main__":
    main()
