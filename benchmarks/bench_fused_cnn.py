"""Fused SG-MCMC on the image bench's CPU CNN, against plain PyTorch and BlackJAX in one run.

Workload: ``bnnkit.bench.image.small_cnn`` (Conv 1->16 5x5, ReLU, max-pool 2, Conv 16->32 5x5,
ReLU, max-pool 2, Linear 512->10: 21,546 parameters), MNIST-shaped random images (28 x 28),
minibatch 125 of N = 60,000 (likelihood scaled by N / M), categorical likelihood, N(0, 1) prior,
float32.  16 pre-drawn minibatches are cycled.  Per round, interleaved, time per gradient:

- ``plain_fwd_bwd``: ``nn.Module`` forward, cross-entropy, ``backward()``;
- ``sgd_step``: a ``torch.optim.SGD`` step (zero_grad, forward, backward, step);
- ``{sgld,sghmc}_eager`` / ``_compiled``: ``kernel.step`` (``compile=True``: the compiled target);
- ``{sgld,sghmc}_fused_T{T}``: :meth:`bnnkit.sgmcmc.FusedKernel.run_block`, ``T`` steps per
  compiled scan (the network through ``torch.func.functional_call``), random numbers included.

With ``--jax PYTHON`` the same images, labels and initial weights go to a child process: the same
CNN in ``jax.lax``, ``jax.jit(jax.grad)`` of the minibatch log posterior (the floor),
BlackJAX SGLD jitted with a Python loop over steps, and the same steps inside one ``lax.scan``
(channels-last, which XLA:CPU runs fast inside a loop body: jax-ml/jax#12868).
JAX ratios are ratios of medians across processes (``x plain`` = against ``plain_fwd_bwd``).

Run:  python -m benchmarks.bench_fused_cnn --threads 1 --rounds 5 --jax /tmp/jax-venv/bin/python
      [--out docs/results/fused_cnn.json]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import bnnkit
from benchmarks._timing import run_jax_child, write_results
from benchmarks.peers_plugin import CycleStream
from bnnkit.nets import small_cnn
from bnnkit.sgmcmc import Fused

N, M, N_BATCHES = 60_000, 125, 16
SGLD_EPS = 2e-6  # bnnkit's eps: w + eps/2 g + sqrt(eps) xi (BlackJAX: lr = eps / 2)

JAX_SCRIPT = r"""
import json, sys, time
import numpy as np
import jax, jax.numpy as jnp
import blackjax
d = np.load(sys.argv[1]); rounds, steps, n_data = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
lr = float(sys.argv[5])
# Channels-last (NHWC images, HWIO kernels): XLA:CPU runs channels-first convolutions inside a
# loop body far slower than outside one (jax-ml/jax#12868); channels-last does not suffer.
Xs, Ys = jnp.asarray(d["X"]).transpose(0, 1, 3, 4, 2), jnp.asarray(d["Y"])  # [B, M, 28, 28, 1], [B, M]
params = {k: jnp.asarray(d[k]) for k in ("c1w", "c1b", "c2w", "c2b", "lw", "lb")}
params["c1w"], params["c2w"] = params["c1w"].transpose(2, 3, 1, 0), params["c2w"].transpose(2, 3, 1, 0)
dn = ("NHWC", "HWIO", "NHWC")

def pool(h):
    return jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

def logits(p, x):
    h = jax.lax.conv_general_dilated(x, p["c1w"], (1, 1), "VALID", dimension_numbers=dn) + p["c1b"]
    h = pool(jax.nn.relu(h))
    h = jax.lax.conv_general_dilated(h, p["c2w"], (1, 1), "VALID", dimension_numbers=dn) + p["c2b"]
    h = pool(jax.nn.relu(h)).transpose(0, 3, 1, 2).reshape(x.shape[0], -1)  # PyTorch's flatten order
    return h @ p["lw"].T + p["lb"]

def logpost(p, batch):
    x, y = batch
    lg = jax.nn.log_softmax(logits(p, x))
    ll = jnp.take_along_axis(lg, y[:, None], 1).sum() * (n_data / x.shape[0])
    return ll + sum(-0.5 * jnp.sum(v ** 2) for v in jax.tree_util.tree_leaves(p))

grad = jax.jit(jax.grad(logpost))
# BlackJAX's sgld takes any gradient estimator: the scaled minibatch log posterior's gradient, the
# same gradient bnnkit integrates.
def grad_est(p, b):
    return jax.grad(logpost)(p, b)
sgld = blackjax.sgld(grad_est)
step = jax.jit(sgld.step)
B = Xs.shape[0]

idx = jnp.arange(steps) % B
Xsteps, Ysteps = Xs[idx], Ys[idx]  # the steps' minibatches, scanned over as inputs

@jax.jit
def scan_steps(key, p, Xb, Yb):
    def body(p, xs):
        k, x, y = xs
        return sgld.step(k, p, (x, y), lr), None
    p, _ = jax.lax.scan(body, p, (jax.random.split(key, steps), Xb, Yb))
    return p

keys = jax.random.split(jax.random.PRNGKey(0), steps)
out = {"grad_jax": [], "blackjax_sgld_loop": [], "blackjax_sgld_scan": []}
p = params
for r in range(rounds + 1):
    t = time.perf_counter()
    for i in range(steps):
        g = grad(params, (Xs[i % B], Ys[i % B]))
    jax.block_until_ready(g)
    t_g = (time.perf_counter() - t) / steps
    t = time.perf_counter()
    for i in range(steps):
        p = step(keys[i], p, (Xs[i % B], Ys[i % B]), lr)
    jax.block_until_ready(p)
    t_l = (time.perf_counter() - t) / steps
    t = time.perf_counter()
    p = jax.block_until_ready(scan_steps(keys[0], p, Xsteps, Ysteps))
    t_s = (time.perf_counter() - t) / steps
    if r:
        out["grad_jax"].append(t_g); out["blackjax_sgld_loop"].append(t_l); out["blackjax_sgld_scan"].append(t_s)
out["versions"] = {"jax": jax.__version__, "blackjax": blackjax.__version__}
print(json.dumps(out))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=64, help="gradient evaluations per case per round")
    ap.add_argument("--blocks", type=int, nargs="+", default=[8, 32])
    ap.add_argument("--jax", default=None, help="a Python with jax and blackjax (skipped if not given)")
    ap.add_argument("--out", default="benchmarks/results/fused_cnn.json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    Xs = torch.randn(N_BATCHES, M, 1, 28, 28, generator=g)
    Ys = torch.randint(0, 10, (N_BATCHES, M), generator=g)
    batches = [(Xs[i], Ys[i]) for i in range(N_BATCHES)]
    torch.manual_seed(0)
    net = small_cnn()
    init = {k: v.detach().clone() for k, v in net.named_parameters()}
    opt = torch.optim.SGD(net.parameters(), lr=1e-6)
    it = {"i": 0}

    def next_batch():
        it["i"] += 1
        return batches[it["i"] % N_BATCHES]

    def loss(xb, yb):
        return torch.nn.functional.cross_entropy(net(xb), yb, reduction="sum") * (N / M)

    def fwd_bwd():
        for p in net.parameters():
            p.grad = None
        loss(*next_batch()).backward()

    def sgd_step():
        opt.zero_grad(set_to_none=True)
        loss(*next_batch()).backward()
        opt.step()

    cases: dict[str, tuple] = {"plain_fwd_bwd": (fwd_bwd, 1), "sgd_step": (sgd_step, 1)}
    first: dict[str, float] = {}
    post = bnnkit.Posterior(small_cnn(), bnnkit.Categorical(), bnnkit.GaussianPrior(1.0), num_data=N)
    post.module.load_state_dict(init)
    target = post.target()
    x0 = post.initial_position("module")
    compiled = target.compiled()
    t0 = time.perf_counter()
    compiled.value_and_grad(x0, batches[0])
    first["compiled_step"] = time.perf_counter() - t0
    algs = {"sgld": bnnkit.SGLD(SGLD_EPS), "sghmc": bnnkit.SGHMC(1e-4, friction=10.0)}
    gen = torch.Generator().manual_seed(0)
    for name, alg in algs.items():
        for label, tg in (("eager", target), ("compiled", compiled)):
            kernel = alg.build(tg)
            st = {"s": kernel.init(x0, batches[0])}

            def step(kernel=kernel, st=st):
                st["s"], _ = kernel.step(st["s"], next_batch(), gen)

            cases[f"{name}_{label}"] = (step, 1)
        fk = Fused(alg, block=max(args.blocks)).build(post)
        for T in args.blocks:
            stream = CycleStream(batches)
            st = {"s": fk.init(x0, batches[0])}
            t0 = time.perf_counter()
            st["s"] = fk.run_block(st["s"], stream, gen, T).state
            first[f"{name}_fused_T{T}"] = time.perf_counter() - t0

            def block(fk=fk, st=st, stream=stream, T=T):
                st["s"] = fk.run_block(st["s"], stream, gen, T).state

            cases[f"{name}_fused_T{T}"] = (block, T)

    rows: dict[str, list[float]] = {k: [] for k in cases}
    for r in range(args.rounds + 1):  # round 0 warms up
        for name, (fn, per_call) in cases.items():
            calls = max(1, args.steps // per_call)
            t = time.perf_counter()
            for _ in range(calls):
                fn()
            if r:
                rows[name].append((time.perf_counter() - t) / (calls * per_call))
    med = {k: statistics.median(v) for k, v in rows.items()}
    x_plain = {k: statistics.median([a / b for a, b in zip(rows[k], rows["plain_fwd_bwd"])]) for k in rows}
    results = {
        "benchmark": "fused_cnn",
        "model": "bnnkit.bench.image.small_cnn (21,546 parameters), minibatch 125 of 60,000, float32",
        "first_call_seconds": first,
        "us_per_grad": {k: v * 1e6 for k, v in med.items()},
        "x_plain": x_plain,
        "x_sgd_step": {k: v / med["sgd_step"] for k, v in med.items()},
        "rounds_us": {k: [v * 1e6 for v in vs] for k, vs in rows.items()},
    }
    if args.jax:
        data = {"X": Xs.numpy(), "Y": Ys.numpy()}
        for key, name in (("c1", "0"), ("c2", "3"), ("l", "7")):
            data[f"{key}w"] = init[f"{name}.weight"].numpy()
            data[f"{key}b"] = init[f"{name}.bias"].numpy()
        jx = run_jax_child(
            args.jax, JAX_SCRIPT, data, [args.rounds, args.steps, N, SGLD_EPS / 2], args.threads
        )
        jmed = {k: statistics.median(v) for k, v in jx.items() if k != "versions"}
        results["jax"] = {"versions": jx["versions"], "us_per_grad": {k: v * 1e6 for k, v in jmed.items()}}
        results["jax"]["x_plain"] = {k: v / med["plain_fwd_bwd"] for k, v in jmed.items()}
        best = {n: min(med[f"{n}_fused_T{T}"] for T in args.blocks) for n in algs}
        results["x_blackjax"] = {
            f"{n}_fused_best / blackjax_sgld_{w}": best[n] / jmed[f"blackjax_sgld_{w}"]
            for n in algs
            for w in ("loop", "scan")
        }
    for k, v in results["us_per_grad"].items():
        print(
            f"{k:20s} {v:9.1f} us/grad   x plain {x_plain[k]:.2f}   x SGD step {results['x_sgd_step'][k]:.2f}"
        )
    if args.jax:
        for k, v in results["jax"]["us_per_grad"].items():
            print(f"{k:20s} {v:9.1f} us/grad   x plain {results['jax']['x_plain'][k]:.2f}   (JAX process)")
        for k, v in results["x_blackjax"].items():
            print(f"{k:40s} {v:.2f}")
    write_results(args.out, results)


if __name__ == "__main__":
    main()
