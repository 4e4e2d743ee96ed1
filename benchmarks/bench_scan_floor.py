"""Is the gradient the floor of fused SGLD?  Each framework's SGLD scan against a scan of its own
gradient, in the same workload.

Workload: the peers' MLP 13-50-50-1 (tanh) of ``benchmarks/_timing.mlp_workload``, minibatches
of 32 of the 506 rows (likelihood scaled by N / M, 15 pre-sliced minibatches cycled), Gaussian
likelihood (sigma 1), N(0, 1) prior, float32, ``T = 128`` steps per compiled call.  Per round,
interleaved, time per step:

- ``torch_grad_scan``: ``bnnkit.core.pure.compile_scan`` (``torch.compile`` of a ``scan``, C++
  wrapper) of ``w <- w + eps / 2 * grad log p(w | batch)``: the gradient and an axpy, nothing else;
- ``torch_grad_scan_full``: the same gradient on all 480 rows of the 15 minibatches (the
  full-batch gradient HMC and NUTS take; ``jax_grad_scan_full`` its JAX twin);
- ``torch_sgld_scan``: the same plus ``sqrt(eps) * xi`` with the normals ``xi [T, D]`` drawn before
  the call (one ``randn``), so the difference to the above is the update's arithmetic;
- ``torch_normals_in_scan``: a scan whose step only adds ``randn_like(w)`` drawn inside the
  compiled graph (what an in-graph random stream would cost), against ``torch_normals_host``: the
  same ``T x D`` normals from a ``torch.Generator`` in one host call;
- ``bnnkit_fused_sgld``: ``Fused(SGLD(eps), block=T).build(posterior).run_block``: the same
  update with the normals drawn per step from the chain's generator in the step-at-a-time order;
  ``bnnkit_fused_sghmc`` the same for ``SGHMC(1e-3, friction=10)``.

With ``--jax PYTHON`` the same data and weights go to a child process: ``jax_grad_scan``
(``lax.scan`` of the same axpy under ``jax.jit``), ``blackjax_sgld_scan`` (``blackjax.sgld`` in
``lax.scan``, its normals drawn in the graph from split keys, as the peers bench runs it) and
``blackjax_sghmc_scan`` (``blackjax.sghmc``, 8 integration steps a call, 16 calls in ``lax.scan``).  Cross-
framework ratios are ratios of medians across processes.

Run:  python -m benchmarks.bench_scan_floor --threads 1 --rounds 5 --jax /tmp/jax-venv/bin/python
      [--out docs/results/scan_floor.json]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import bnnkit
from benchmarks._timing import mlp_workload, run_jax_child, write_results
from benchmarks.peers_plugin import CycleStream
from bnnkit.core.pure import call_scan, compile_scan, fused_log_prob
from bnnkit.sgmcmc import Fused

N, M, N_BATCHES, T = 506, 32, 15, 128
EPS = 2e-5  # bnnkit: w + eps/2 g + sqrt(eps) xi; BlackJAX: w + s g + sqrt(2 s) xi, so s = eps / 2

JAX_SCRIPT = r"""
import json, statistics, sys, time
import numpy as np
import jax, jax.numpy as jnp
import blackjax
d = np.load(sys.argv[1]); rounds, T, n, eps = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
Xb, Yb = jnp.asarray(d["Xb"]), jnp.asarray(d["Yb"])  # [B, M, 13], [B, M]
p0 = {k: jnp.asarray(d[k]) for k in ("w0", "b0", "w1", "b1", "w2", "b2")}
m = Xb.shape[1]

def apply(p, x):
    h = jnp.tanh(x @ p["w0"].T + p["b0"])
    h = jnp.tanh(h @ p["w1"].T + p["b1"])
    return (h @ p["w2"].T + p["b2"])[..., 0]

def logprior(p):
    return -0.5 * sum(jnp.sum(v * v) for v in jax.tree_util.tree_leaves(p))

def logpost(p, x, y):
    return (n / m) * (-0.5 * jnp.sum((apply(p, x) - y) ** 2)) + logprior(p)

idx = np.arange(T) % Xb.shape[0]
xs, ys = Xb[idx], Yb[idx]
grad = jax.grad(logpost)

@jax.jit
def grad_scan(p):
    def body(q, inp):
        g = grad(q, *inp)
        return jax.tree_util.tree_map(lambda a, b: a + 0.5 * eps * b, q, g), None
    return jax.lax.scan(body, p, (xs, ys))[0]

def loglik_datum(p, datum):
    x, y = datum
    return -0.5 * (apply(p, x) - y) ** 2

sgld = blackjax.sgld(blackjax.sgmcmc.gradients.grad_estimator(logprior, loglik_datum, n))
keys = jax.random.split(jax.random.PRNGKey(0), T)

@jax.jit
def sgld_scan(p):
    def body(q, inp):
        k, x, y = inp
        return sgld.step(k, q, (x, y), 0.5 * eps), None  # BlackJAX: q + step g + sqrt(2 step) xi
    return jax.lax.scan(body, p, (keys, xs, ys))[0]

Xf, Yf = Xb.reshape(-1, Xb.shape[-1]), Yb.reshape(-1)

@jax.jit
def grad_scan_full(p):
    def body(q, _):
        g = jax.grad(lambda r: -0.5 * jnp.sum((apply(r, Xf) - Yf) ** 2) + logprior(r))(q)
        return jax.tree_util.tree_map(lambda a, b: a + 0.5 * eps * b, q, g), None
    return jax.lax.scan(body, p, None, length=T)[0]

L = 8  # BlackJAX's SGHMC draws a fresh momentum at every call of L integration steps
sghmc = blackjax.sghmc(blackjax.sgmcmc.gradients.grad_estimator(logprior, loglik_datum, n), num_integration_steps=L)
hkeys = jax.random.split(jax.random.PRNGKey(1), T // L)

@jax.jit
def sghmc_scan(p):
    def body(q, inp):
        k, x, y = inp
        return sghmc.step(k, q, (x, y), 0.5 * eps), None
    return jax.lax.scan(body, p, (hkeys, xs[: T // L], ys[: T // L]))[0]

out = {"jax_grad_scan": [], "blackjax_sgld_scan": [], "blackjax_sghmc_scan": [], "jax_grad_scan_full": []}
st = {"g": p0, "s": p0, "h": p0, "f": p0}
cases = (("jax_grad_scan", grad_scan, "g"), ("blackjax_sgld_scan", sgld_scan, "s"), ("blackjax_sghmc_scan", sghmc_scan, "h"),
         ("jax_grad_scan_full", grad_scan_full, "f"))
for r in range(rounds + 1):  # round 0 compiles and warms up
    for name, fn, key in cases:
        times = []
        for _ in range(5):
            t = time.perf_counter()
            st[key] = jax.block_until_ready(fn(st[key]))
            times.append((time.perf_counter() - t) / T)
        if r:
            out[name].append(statistics.median(times))
out["versions"] = {"jax": jax.__version__, "blackjax": blackjax.__version__}
print(json.dumps(out))
"""


def torch_cases(post: bnnkit.Posterior, batches: list, x0: torch.Tensor) -> dict:
    """The three torch cases: name -> a function that runs one block of T steps."""
    _, log_prob, _ = fused_log_prob(post, "sgld")
    gv = torch.func.grad_and_value(log_prob)

    def grad_step(carry, batch):
        (w,) = carry
        g, lp = gv(w, batch)
        w = w + 0.5 * EPS * g
        return (w,), lp

    def sgld_step(carry, inp):
        (w,) = carry
        batch, xi = inp
        g, lp = gv(w, batch)
        w = w + 0.5 * EPS * g + EPS**0.5 * xi
        return (w,), lp

    idx = [i % len(batches) for i in range(T)]
    stacked = (torch.stack([batches[i][0] for i in idx]), torch.stack([batches[i][1] for i in idx]))
    grad_block, grad_code = compile_scan(grad_step)
    sgld_block, sgld_code = compile_scan(sgld_step)
    gen = torch.Generator().manual_seed(0)
    st = {"grad": (x0.clone(),), "sgld": (x0.clone(),)}

    def run_grad() -> None:
        st["grad"], _ = call_scan(grad_block, grad_code, st["grad"], stacked)

    def run_sgld() -> None:
        xi = torch.randn((T, *x0.shape), generator=gen)
        st["sgld"], _ = call_scan(sgld_block, sgld_code, st["sgld"], (stacked, xi))

    full = (torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches]))
    _, full_log_prob, _ = fused_log_prob(post.with_num_data(full[0].shape[0]), "hmc")
    gv_full = torch.func.grad_and_value(full_log_prob)

    def full_step(carry, _, fx, fy):  # the full batch is a constant of the scan, as fused HMC's
        (w,) = carry
        g, lp = gv_full(w, (fx, fy))
        return (w + 0.5 * EPS * g,), lp

    full_block, full_code = compile_scan(full_step)
    st["full"] = (x0.clone(),)
    steps = torch.zeros(T)

    def run_full() -> None:
        st["full"], _ = call_scan(full_block, full_code, st["full"], steps, full)

    def rng_step(carry, x):  # only normals, drawn inside the compiled scan by Inductor
        (w,) = carry
        return (w + 1e-3 * torch.randn_like(w) + x,), w.sum()

    rng_block, rng_code = compile_scan(rng_step)
    st["rng"] = (x0.clone(),)
    zeros = torch.zeros(T, 1)

    def run_rng() -> None:
        st["rng"], _ = call_scan(rng_block, rng_code, st["rng"], zeros)

    def run_host_rng() -> None:
        torch.randn((T, *x0.shape), generator=gen)

    out = {
        "torch_grad_scan": run_grad,
        "torch_sgld_scan": run_sgld,
        "torch_grad_scan_full": run_full,
        "torch_normals_in_scan": run_rng,
        "torch_normals_host": run_host_rng,
    }
    for name, alg in (("sgld", bnnkit.SGLD(EPS)), ("sghmc", bnnkit.SGHMC(1e-3, friction=10.0))):
        fk = Fused(alg, block=T).build(post)
        stream = CycleStream(batches)
        fst = {"s": fk.init(x0, batches[0])}

        def run_fused(fk=fk, stream=stream, fst=fst) -> None:
            fst["s"] = fk.run_block(fst["s"], stream, gen, T).state

        out[f"bnnkit_fused_{name}"] = run_fused
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--jax", default=None, help="a Python with jax and blackjax (skipped if not given)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    X, y, _, net, _ = mlp_workload(N, M)
    post = bnnkit.Posterior(net, bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0), num_data=N)
    x0 = post.initial_position("module")
    batches = [(X[i * M : (i + 1) * M], y[i * M : (i + 1) * M]) for i in range(N_BATCHES)]
    cases = torch_cases(post, batches, x0)
    rows: dict[str, list[float]] = {k: [] for k in cases}
    for r in range(a.rounds + 1):  # round 0 compiles and warms up
        for name, fn in cases.items():
            times = []
            for _ in range(5):
                t = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t) / T)
            if r:
                rows[name].append(statistics.median(times))
    us = {k: 1e6 * statistics.median(v) for k, v in rows.items()}
    results = {"benchmark": "scan_floor", "steps_per_call": T, "us_per_step": us}
    results["x_torch_grad_scan"] = {k: v / us["torch_grad_scan"] for k, v in us.items()}
    for k, v in us.items():
        print(f"{k:20s} {v:7.1f} us/step  {v / us['torch_grad_scan']:.2f}x torch_grad_scan")
    if a.jax:
        ps = dict(net.named_parameters())
        data = {
            "Xb": torch.stack([b[0] for b in batches]).numpy(),
            "Yb": torch.stack([b[1] for b in batches]).numpy(),
        }
        for i, name in enumerate(("0", "2", "4")):
            data[f"w{i}"] = ps[f"{name}.weight"].detach().numpy()
            data[f"b{i}"] = ps[f"{name}.bias"].detach().numpy()
        jx = run_jax_child(a.jax, JAX_SCRIPT, data, [a.rounds, T, N, EPS], a.threads)
        jus = {k: 1e6 * statistics.median(v) for k, v in jx.items() if k != "versions"}
        results["jax"] = {"versions": jx["versions"], "us_per_step": jus}
        ratios = {
            "torch_grad_scan / jax_grad_scan": us["torch_grad_scan"] / jus["jax_grad_scan"],
            "torch_grad_scan_full / jax_grad_scan_full": us["torch_grad_scan_full"]
            / jus["jax_grad_scan_full"],
            "bnnkit_fused_sgld / blackjax_sgld_scan": us["bnnkit_fused_sgld"] / jus["blackjax_sgld_scan"],
            "bnnkit_fused_sghmc / blackjax_sghmc_scan": us["bnnkit_fused_sghmc"] / jus["blackjax_sghmc_scan"],
            "blackjax_sgld_scan / jax_grad_scan": jus["blackjax_sgld_scan"] / jus["jax_grad_scan"],
            "blackjax_sghmc_scan / jax_grad_scan": jus["blackjax_sghmc_scan"] / jus["jax_grad_scan"],
            "bnnkit_fused_sgld / torch_grad_scan": us["bnnkit_fused_sgld"] / us["torch_grad_scan"],
            "bnnkit_fused_sghmc / torch_grad_scan": us["bnnkit_fused_sghmc"] / us["torch_grad_scan"],
        }
        results["ratios"] = ratios
        for k, v in jus.items():
            print(f"{k:20s} {v:7.1f} us/step")
        for k, v in ratios.items():
            print(f"{k}: {v:.2f}")
    if a.out:
        write_results(a.out, results)


if __name__ == "__main__":
    main()
