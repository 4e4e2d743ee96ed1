"""NUTS and HMC cost per gradient evaluation against the plain gradient, and against BlackJAX.

Workload: the MLP 13-50-50-1 (tanh) of ``benchmarks/_timing.mlp_workload`` on all 506 rows
(Gaussian likelihood sigma = 1, N(0, 1) prior), float32, one start (PyTorch's initialisation),
fixed step size and unit metric (no adaptation), so every implementation integrates the same
trajectories' kind of work.  Per round, interleaved (so load from other processes hits all cases):

- ``grad_eager`` / ``grad_compiled``: ``torch.func.grad_and_value`` of the side-effect-free log
  density (:func:`bnnkit.core.pure.pure_log_prob`), eager and under ``torch.compile``: the floors;
- ``nuts_eager`` / ``nuts_compiled``: ``bnnkit.NUTS(...).build(target).step`` on the eager target
  and on ``target.compiled()``, time per transition divided by its leapfrog steps;
- ``nuts_fused``: ``NUTS(...).build_fused`` (:mod:`bnnkit.samplers.fused_nuts`: one compiled call
  per trajectory doubling), per leapfrog step the recursive sampler takes;
- ``hmc_fused_T8``: ``HMC(L = 10).build_fused`` blocks of 8 transitions (80 gradients per call).

With ``--jax PYTHON`` (a Python with ``jax`` and ``blackjax``) the same data and initial weights go
to BlackJAX in a child process: ``jax.jit(jax.grad)`` of the log density and ``blackjax.nuts`` /
``blackjax.hmc`` steps (jitted, a Python loop over transitions), per gradient.  JAX ratios are
ratios of medians across processes.

Run:  python -m benchmarks.bench_nuts --threads 1 --rounds 5 --jax /tmp/jax-venv/bin/python
      [--out docs/results/nuts.json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

import bnnkit
from benchmarks._timing import mlp_workload, run_jax_child, write_results
from bnnkit.core.pure import pure_log_prob

JAX_SCRIPT = r"""
import json, sys, time
import numpy as np
import jax, jax.numpy as jnp
import blackjax
d = np.load(sys.argv[1])
eps, depth, L, rounds, n_trans, n_grads = (float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
                                           int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7]))
X, y = jnp.asarray(d["X"]), jnp.asarray(d["y"])
params = {k: jnp.asarray(d[k]) for k in ("w0", "b0", "w1", "b1", "w2", "b2")}

def logdensity(p):
    h = jnp.tanh(X @ p["w0"].T + p["b0"])
    h = jnp.tanh(h @ p["w1"].T + p["b1"])
    f = (h @ p["w2"].T + p["b2"])[:, 0]
    ll = -0.5 * jnp.sum((y - f) ** 2)
    lp = sum(-0.5 * jnp.sum(v ** 2) for v in jax.tree_util.tree_leaves(p))
    return ll + lp

D = sum(v.size for v in params.values())
inv_m = jnp.ones(D)
grad = jax.jit(jax.grad(logdensity))
nuts = blackjax.nuts(logdensity, step_size=eps, inverse_mass_matrix=inv_m, max_num_doublings=depth)
hmc = blackjax.hmc(logdensity, step_size=eps, inverse_mass_matrix=inv_m, num_integration_steps=L)
nuts_step, hmc_step = jax.jit(nuts.step), jax.jit(hmc.step)
key = jax.random.PRNGKey(0)
st = {"nuts": nuts.init(params), "hmc": hmc.init(params)}
out = {"grad_jax": [], "nuts_blackjax": [], "hmc_blackjax": [], "nuts_steps": []}
for r in range(rounds + 1):  # round 0 compiles and warms up
    t = time.perf_counter()
    for _ in range(n_grads):
        g = grad(params)
    jax.block_until_ready(g)
    t_grad = (time.perf_counter() - t) / n_grads
    steps, t = 0, time.perf_counter()
    for i in range(n_trans):
        key, k = jax.random.split(key)
        st["nuts"], info = nuts_step(k, st["nuts"])
        steps += int(info.num_integration_steps)
    t_nuts = (time.perf_counter() - t) / steps
    t = time.perf_counter()
    for i in range(max(1, n_trans // 4)):
        key, k = jax.random.split(key)
        st["hmc"], info = hmc_step(k, st["hmc"])
    jax.block_until_ready(st["hmc"].position)
    t_hmc = (time.perf_counter() - t) / (max(1, n_trans // 4) * L)
    if r:
        out["grad_jax"].append(t_grad); out["nuts_blackjax"].append(t_nuts); out["hmc_blackjax"].append(t_hmc)
        out["nuts_steps"].append(steps / n_trans)
out["versions"] = {"jax": jax.__version__, "blackjax": blackjax.__version__}
print(json.dumps(out))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--transitions", type=int, default=20, help="NUTS transitions per round and case")
    ap.add_argument("--step-size", type=float, default=2e-3)
    ap.add_argument("--max-tree-depth", type=int, default=6)
    ap.add_argument("--jax", default=None, help="a Python with jax and blackjax (skipped if not given)")
    ap.add_argument("--out", default="benchmarks/results/nuts.json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    X, y, _, net, _ = mlp_workload()
    post = bnnkit.Posterior(net, bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0))
    target, log_prob, _ = pure_log_prob(post)
    x0 = post.initial_position("module")
    batch = (X, y)
    L = 10

    gv = torch.func.grad_and_value(log_prob)
    gv_compiled = torch.compile(gv, dynamic=False)
    nuts = bnnkit.NUTS(
        step_size=args.step_size, max_tree_depth=args.max_tree_depth, adapt_step_size=False, adapt_mass=False
    )
    kernels = {
        "nuts_eager": nuts.build(target),
        "nuts_compiled": nuts.build(target.compiled()),
        "nuts_fused": nuts.build_fused(post, 1),
    }
    hmc = bnnkit.HMC(
        step_size=args.step_size, num_steps=L, jitter=0.0, adapt_step_size=False, adapt_mass=False
    )
    fused = hmc.build_fused(post, 8)
    gen = torch.Generator().manual_seed(0)
    states = {k: kern.init(x0, batch) for k, kern in kernels.items()}
    states["hmc_fused_T8"] = fused.init(x0, batch)

    t0 = time.perf_counter()
    gv_compiled(x0, batch)
    compile_grad = time.perf_counter() - t0
    t0 = time.perf_counter()
    states["hmc_fused_T8"] = fused.run_block(states["hmc_fused_T8"], batch, gen, 8).state
    compile_fused = time.perf_counter() - t0

    def time_grads(fn, n=100):
        t = time.perf_counter()
        for _ in range(n):
            fn(x0, batch)
        return (time.perf_counter() - t) / n

    def time_nuts(name):
        kern, steps, t = kernels[name], 0, time.perf_counter()
        for _ in range(args.transitions):
            states[name], info = kern.step(states[name], batch, gen)
            steps += int(info.num_steps)
        return (time.perf_counter() - t) / steps, steps / args.transitions

    def time_fused():
        t = time.perf_counter()
        for _ in range(max(1, args.transitions // 8)):
            states["hmc_fused_T8"] = fused.run_block(states["hmc_fused_T8"], batch, gen, 8).state
        return (time.perf_counter() - t) / (max(1, args.transitions // 8) * 8 * L)

    rows: dict[str, list[float]] = {
        k: []
        for k in ("grad_eager", "grad_compiled", "nuts_eager", "nuts_compiled", "nuts_fused", "hmc_fused_T8")
    }
    depth: list[float] = []
    for r in range(args.rounds + 1):  # round 0 warms up
        res = {"grad_eager": time_grads(gv), "grad_compiled": time_grads(gv_compiled)}
        res["nuts_eager"], _ = time_nuts("nuts_eager")
        res["nuts_compiled"], steps = time_nuts("nuts_compiled")
        res["nuts_fused"], _ = time_nuts("nuts_fused")
        res["hmc_fused_T8"] = time_fused()
        if r:
            for k, v in res.items():
                rows[k].append(v)
            depth.append(steps)
    med = {k: statistics.median(v) for k, v in rows.items()}
    floor = med["grad_compiled"]
    results = {
        "benchmark": "nuts_per_gradient",
        "model": "MLP 13-50-50-1 tanh, 506 rows, float32, full batch",
        "step_size": args.step_size,
        "max_tree_depth": args.max_tree_depth,
        "hmc_num_steps": L,
        "mean_leapfrog_steps_per_nuts_transition": statistics.mean(depth),
        "compile_seconds": {"grad": compile_grad, "hmc_fused_first_block": compile_fused},
        "us_per_grad": {k: v * 1e6 for k, v in med.items()},
        "x_grad_compiled": {
            k: statistics.median([a / b for a, b in zip(rows[k], rows["grad_compiled"])]) for k in rows
        },
        "rounds": {k: [v * 1e6 for v in vs] for k, vs in rows.items()},
    }
    if args.jax:
        ps = dict(net.named_parameters())
        data = {"X": X.numpy(), "y": y.numpy()}
        for i, name in enumerate(("0", "2", "4")):
            data[f"w{i}"] = ps[f"{name}.weight"].detach().numpy()
            data[f"b{i}"] = ps[f"{name}.bias"].detach().numpy()
        jx = run_jax_child(
            args.jax,
            JAX_SCRIPT,
            data,
            [args.step_size, args.max_tree_depth, L, args.rounds, args.transitions, 100],
            args.threads,
        )
        jmed = {k: statistics.median(v) for k, v in jx.items() if k not in ("versions", "nuts_steps")}
        results["jax"] = {
            "versions": jx["versions"],
            "us_per_grad": {k: v * 1e6 for k, v in jmed.items()},
            "mean_leapfrog_steps_per_nuts_transition": statistics.mean(jx["nuts_steps"]),
        }
        results["x_blackjax"] = {
            "nuts_compiled / nuts_blackjax": med["nuts_compiled"] / jmed["nuts_blackjax"],
            "nuts_fused / nuts_blackjax": med["nuts_fused"] / jmed["nuts_blackjax"],
            "hmc_fused_T8 / hmc_blackjax": med["hmc_fused_T8"] / jmed["hmc_blackjax"],
            "grad_compiled / grad_jax": floor / jmed["grad_jax"],
        }
    for k, v in results["us_per_grad"].items():
        print(f"{k:16s} {v:9.1f} us/grad   x compiled grad {results['x_grad_compiled'][k]:.2f}")
    if args.jax:
        for k, v in results["jax"]["us_per_grad"].items():
            print(f"{k:16s} {v:9.1f} us/grad   (JAX process)")
        for k, v in results["x_blackjax"].items():
            print(f"{k:34s} {v:.2f}")
    write_results(args.out, results)


if __name__ == "__main__":
    sys.exit(main())
