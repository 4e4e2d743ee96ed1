"""Costs of the default recipe that were cut without changing a draw: the convergence
diagnostics, a fixed-noise Gaussian's output gradient, the MAP phase's Adam step and pSGLD's
update.

1. Rank-normalised R-hat and bulk ESS of the network's outputs at 100 inputs, 4 chains of S draws
   (the default recipe's stopping rule and final diagnosis, about 20 calls a fit): ArviZ's
   ``rhat`` / ``ess(method="bulk")`` against :mod:`bnnkit.diagnostics.rank_stats` (the same numbers
   bit for bit; checked here too).
2. The K-chain gradient of an MLP posterior with a fixed Gaussian noise (the default recipe's
   sampling phase where the noise is held, UCI yacht under protocol 15): the output gradient in
   closed form (``Gaussian.log_prob_rows_and_grad``) against the autograd fallback it replaced
   (the same likelihood with the closed form turned off); the two gradients must be equal.
3. The MAP phase's Adam step on 4 x 10,901 numbers (yacht's 4 chains): ``torch.optim.Adam``'s
   ``step()`` against the functional call the MAP phase now makes (``bnnkit.core.map_phase._Adam``);
   the iterates must be equal after every step.
4. pSGLD's update on the same numbers, as a chain runs it (each output fed back in, a fresh
   gradient and noise each step, cycled from 20 drawn beforehand): the out-of-place formula it
   had (copied here) against :func:`bnnkit.sgmcmc.updates.psgld_update`, which works in place on
   its own temporaries; the positions and preconditioners must be equal after 200 updates.  What
   it saves is allocation: the old formula kept five 4 x 10,901 temporaries alive at once, and a
   compact out-of-place rewrite that frees them early is as fast as the in-place one.

Reference: a plain PyTorch forward + backward of one 6-100-100-1 tanh MLP on 32 rows (yacht's
network), timed in the same run; every figure is also a ratio to it.

Run:  python -m benchmarks.bench_diagnostics [--threads 1] [--out benchmarks/results/diagnostics.json]
"""

from __future__ import annotations

import argparse
import time
import warnings
from functools import partial

import numpy as np
import torch

import bnnkit
from benchmarks._timing import time_per_call, write_results
from bnnkit.core.map_phase import _Adam
from bnnkit.diagnostics.rank_stats import bulk_ess, rank_rhat
from bnnkit.nets import mlp
from bnnkit.sgmcmc.updates import psgld_update


class _AutogradGaussian(bnnkit.Gaussian):
    """The Gaussian with its closed-form output gradient turned off: the autograd fallback."""

    def log_prob_rows_and_grad(self, output, target, scale):
        return None


def _plain_step(net: torch.nn.Module, xb: torch.Tensor, yb: torch.Tensor, scale: float) -> None:
    net.zero_grad(set_to_none=True)
    r = yb - net(xb).squeeze(-1)
    (0.5 * (r * r).sum() * scale).backward()


def _arviz(f: np.ndarray):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import arviz as az

        ds = az.convert_to_dataset(f)
        return az.rhat(ds)["x"].values, az.ess(ds, method="bulk")["x"].values


def _ours(f: np.ndarray):
    return rank_rhat(f), bulk_ess(f)


def _diagnostics(draws: list[int], t_ref: float, number: int) -> dict:
    rows = {}
    rng = np.random.default_rng(0)
    for s in draws:
        f = rng.normal(size=(4, s, 100)).cumsum(axis=1) * 0.1 + rng.normal(size=(4, 1, 100))
        a, o = _arviz(f), _ours(f)
        if not (np.array_equal(a[0], o[0]) and np.array_equal(a[1], o[1])):
            raise SystemExit("rank_stats and ArviZ disagree")
        t_a = time_per_call(partial(_arviz, f), number=number, repeats=5, warmup=2)
        t_o = time_per_call(partial(_ours, f), number=number, repeats=5, warmup=2)
        print(
            f"R-hat + bulk ESS, 4 chains x {s} draws x 100 outputs: ArviZ {t_a * 1e3:7.1f} ms "
            f"({t_a / t_ref:6.0f}x ref), rank_stats {t_o * 1e3:6.1f} ms ({t_o / t_ref:5.0f}x ref), "
            f"{t_a / t_o:4.1f}x faster"
        )
        rows[f"draws{s}"] = {"arviz_ms": t_a * 1e3, "rank_stats_ms": t_o * 1e3, "speedup": t_a / t_o,
                             "arviz_over_reference": t_a / t_ref, "rank_stats_over_reference": t_o / t_ref}  # fmt: skip
    return rows


def _gradient(k: int, t_ref: float, number: int) -> dict:
    n, d, m = 277, 6, 32
    g = torch.Generator().manual_seed(0)
    x_all, y_all = torch.randn(n, d, generator=g), torch.randn(n, generator=g)
    idx = torch.randint(n, (k, m), generator=g)
    batch = (x_all[idx], y_all[idx])
    times, grads = {}, {}
    for route, lik in (("closed_form", bnnkit.Gaussian(0.0147)), ("autograd", _AutogradGaussian(0.0147))):
        torch.manual_seed(0)
        post = bnnkit.Posterior(mlp(d, 100), lik, bnnkit.GaussianPrior(1.0), num_data=n)
        target = post.target().vectorized(chain_batched=True)
        x0 = post.initial_position("module").expand(k, -1).clone()
        grads[route] = target.value_and_grad(x0, batch)[1]
        times[route] = time_per_call(partial(target.value_and_grad, x0, batch), number=number)
    if not torch.equal(grads["closed_form"], grads["autograd"]):
        raise SystemExit("the closed-form and autograd gradients differ")
    c, a = times["closed_form"], times["autograd"]
    print(
        f"fixed-noise gradient, K={k}: closed form {c * 1e6:7.1f} us ({c / t_ref:4.2f}x ref), "
        f"autograd {a * 1e6:7.1f} us ({a / t_ref:4.2f}x ref), {a / c:4.2f}x"
    )
    return {"closed_form_us": c * 1e6, "autograd_us": a * 1e6, "speedup": a / c,
            "closed_form_over_reference": c / t_ref, "autograd_over_reference": a / t_ref}  # fmt: skip


def _map_adam(t_ref: float, number: int) -> dict:
    g = torch.Generator().manual_seed(0)
    shape = (4, 10901)
    x0 = torch.randn(shape, generator=g)
    grads = [torch.randn(shape, generator=g) * 100 for _ in range(20)]
    x_opt, x_fun = x0.clone().requires_grad_(True), x0.clone()
    opt, adam = torch.optim.Adam([x_opt], lr=1e-2), _Adam(x_fun, 1e-2)
    for i in range(200):
        x_opt.grad = grads[i % 20]
        opt.step()
        adam.step(x_fun, grads[i % 20])
        if not torch.equal(x_opt.detach(), x_fun):
            raise SystemExit(f"the functional Adam step differs from torch.optim.Adam's at step {i + 1}")

    def opt_step():
        x_opt.grad = grads[0]
        opt.step()

    times = {
        "adam_optimizer": time_per_call(opt_step, number=number),
        "adam_functional": time_per_call(partial(adam.step, x_fun, grads[0]), number=number),
    }
    b, a = times["adam_optimizer"], times["adam_functional"]
    print(
        f"MAP Adam step, 4 x 10,901: torch.optim.Adam {b * 1e6:6.1f} us ({b / t_ref:4.2f}x ref), "
        f"functional {a * 1e6:6.1f} us ({a / t_ref:4.2f}x ref), {b / a:4.2f}x"
    )
    return {k: {"us": t * 1e6, "over_reference": t / t_ref} for k, t in times.items()}


def _out_of_place_psgld(x, v, g, eps, var, xi, alpha, delta, n):
    """pSGLD's update as it was written before it worked in place, line for line (its Hessian
    branch left out): its named temporaries stay allocated until it returns."""
    gbar = g / n
    v_new = v * alpha + (1 - alpha) * gbar * gbar
    sv = v_new.sqrt()
    G = 1.0 / (delta + sv)
    drift = G * g
    x_new = x + (0.5 * eps) * drift
    x_new = x_new + xi * (G * var).sqrt()
    return x_new, v_new


def _psgld(t_ref: float, number: int) -> dict:
    g = torch.Generator().manual_seed(1)
    shape = (4, 10901)
    start = (torch.randn(shape, generator=g), torch.rand(shape, generator=g) * 1e-3)
    grads = [torch.randn(shape, generator=g) * 100 for _ in range(20)]
    xis = [torch.randn(shape, generator=g) for _ in range(20)]
    eps = 1e-3 / 277

    def chain(update, steps: int):
        state = start
        for i in range(steps):
            state = update(*state, grads[i % 20], eps, eps, xis[i % 20], 0.99, 1e-8, 277.0)
        return state

    old, new = chain(_out_of_place_psgld, 200), chain(psgld_update, 200)
    if not (torch.equal(old[0], new[0]) and torch.equal(old[1], new[1])):
        raise SystemExit("psgld_update differs from the out-of-place formula")
    # long chains, the two alternated, the fastest of five each: what a sampling phase sees
    runs: dict[str, list[float]] = {"out_of_place": [], "psgld_update": []}
    for _ in range(5):
        for name, update in (("out_of_place", _out_of_place_psgld), ("psgld_update", psgld_update)):
            t = time.perf_counter()
            chain(update, 10 * number)
            runs[name].append((time.perf_counter() - t) / (10 * number))
    times = {name: min(r) for name, r in runs.items()}
    b, a = times["out_of_place"], times["psgld_update"]
    print(
        f"pSGLD update, 4 x 10,901, chained: out of place {b * 1e6:6.1f} us ({b / t_ref:4.2f}x ref), "
        f"in place {a * 1e6:6.1f} us ({a / t_ref:4.2f}x ref), {b / a:4.2f}x"
    )
    return {k: {"us": t * 1e6, "over_reference": t / t_ref} for k, t in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/diagnostics.json")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--number", type=int, default=200)
    ap.add_argument("--draws", default="25,100")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    ref = mlp(6, 100)
    xb, yb = torch.randn(32, 6), torch.randn(32)
    t_ref = time_per_call(partial(_plain_step, ref, xb, yb, 277 / 32), number=args.number)
    print(f"plain forward + backward, 6-100-100-1, 32 rows (reference): {t_ref * 1e6:.1f} us")
    results = {
        "reference_us": t_ref * 1e6,
        "diagnostics": _diagnostics(
            [int(s) for s in args.draws.split(",")], t_ref, max(1, args.number // 50)
        ),
        "fixed_noise_gradient": {f"k{k}": _gradient(k, t_ref, args.number) for k in (1, 4)},
        "map_adam_4x10901": _map_adam(t_ref, args.number),
        "psgld_4x10901_chained": _psgld(t_ref, args.number),
    }
    write_results(args.out, {"benchmark": "diagnostics", "threads": args.threads, "results": results})


if __name__ == "__main__":
    main()
