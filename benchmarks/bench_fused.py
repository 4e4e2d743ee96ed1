"""Fused multi-step SG-MCMC against the step-at-a-time paths and plain PyTorch, in one run.

Model: MLP 13-50-50-1 (tanh), Gaussian likelihood, N(0, 1) prior, minibatch 32 of N = 506
rows, float32, 1 thread by default.  Cases, each as time per gradient evaluation:

- ``plain_fwd_bwd``: ``nn.Module`` forward + ``backward()`` of the N/M-scaled minibatch loss;
- ``sgd_step``: the same plus ``torch.optim.SGD.step()`` (``zero_grad`` included);
- ``{sgld,sghmc}_eager``: ``batch = stream.next(gen); kernel.step(state, batch, gen)`` with a
  :class:`bnnkit.data.Minibatches` stream, the kernel built from a :class:`bnnkit.Posterior`;
- ``{sgld,sghmc}_compiled``: the same with the gradient compiled (``compile=True``'s target);
- ``{sgld,sghmc}_fused_T{T}``: :meth:`bnnkit.sgmcmc.FusedKernel.run_block` over ``T`` steps
  (drawing the block's minibatches and normals from the generator, then one compiled ``scan``);
- ``{sgld,sghmc}_fused_T{T}_core``: the compiled block alone on pre-drawn inputs (what the
  per-step draws cost is the difference);
- with ``--driver``, ``{sgld,sghmc}_sample_{eager,compiled,fused}``: whole ``bnnkit.sample`` runs
  of ``--grads`` draws (one chain, no warm-up, default ``chunk_size``), step at a time, with
  ``compile=True``, and with ``fused=True`` (the driver's automatic block size).

Timing: every case is warmed up, then ``--rounds`` rounds, each running every case for about
``--grads`` gradient evaluations back to back, cases interleaved so that load from other
processes hits them alike.  Reported: the median over rounds of the time per gradient and of
the ratio to ``plain_fwd_bwd`` (and to ``sgd_step``) in the same round.  Compile times: the
first call of the compiled step, and of the fused block at each ``T`` (after the first, a new
``T`` reuses the graph compiled with a dynamic length).

Run:  python -m benchmarks.bench_fused [--threads 1] [--rounds 7] [--out docs/results/fused.json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

import bnnkit
from benchmarks._timing import mlp_workload, write_results
from bnnkit.core.pure import call_scan
from bnnkit.data import Minibatches
from bnnkit.nets import mlp
from bnnkit.sgmcmc import Fused


def build(args):
    n, m = 506, 32
    X, y, next_batch, net, opt = mlp_workload(n, m)

    def fwd_bwd() -> None:
        xb, yb = next_batch()
        for p in net.parameters():
            p.grad = None
        r = yb - net(xb).squeeze(-1)
        (0.5 * (r * r).sum() * (n / m)).backward()

    def sgd_step() -> None:
        xb, yb = next_batch()
        opt.zero_grad(set_to_none=True)
        r = yb - net(xb).squeeze(-1)
        (0.5 * (r * r).sum() * (n / m)).backward()
        opt.step()

    cases: dict[str, tuple] = {"plain_fwd_bwd": (fwd_bwd, 1), "sgd_step": (sgd_step, 1)}
    compile_s: dict[str, float] = {}
    post = bnnkit.Posterior(mlp(13, 50), bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0), num_data=n)
    target = post.target()
    x0 = post.initial_position("module")
    algs = {"sgld": bnnkit.SGLD(1e-6), "sghmc": bnnkit.SGHMC(1e-3, friction=10.0)}

    compiled = target.compiled()
    t0 = time.perf_counter()
    compiled.value_and_grad(x0, (X[:m], y[:m]))
    compile_s["compiled_step"] = time.perf_counter() - t0

    for name, alg in algs.items():
        for label, tg in (("eager", target), ("compiled", compiled)):
            kernel = alg.build(tg)
            stream = Minibatches(X, y, batch_size=m, drop_last=True)
            gen = torch.Generator().manual_seed(0)
            st = {"s": kernel.init(x0, stream.next(gen))}

            def step(kernel=kernel, st=st, stream=stream, gen=gen) -> None:
                st["s"], _ = kernel.step(st["s"], stream.next(gen), gen)

            cases[f"{name}_{label}"] = (step, 1)

    for name, alg in algs.items():
        torch._dynamo.reset()
        fk = Fused(alg, block=max(args.blocks)).build(post)
        stream = Minibatches(X, y, batch_size=m, drop_last=True)
        gen = torch.Generator().manual_seed(0)
        for T in args.blocks:
            st = {"s": fk.init(x0, stream.next(gen))}
            t0 = time.perf_counter()
            st["s"] = fk.run_block(st["s"], stream, gen, T).state
            compile_s[f"{name}_fused_T{T}_first_call"] = time.perf_counter() - t0

            def block(fk=fk, st=st, stream=stream, gen=gen, T=T) -> None:
                st["s"] = fk.run_block(st["s"], stream, gen, T).state

            cases[f"{name}_fused_T{T}"] = (block, T)
            segs, eps, scale, xi, _ = fk.draw_block(stream, gen, 0, T, x0)
            ((_, _, batch),) = segs
            carry0 = (x0,) if name == "sgld" else (x0, torch.zeros_like(x0))

            def core(fk=fk, batch=batch, eps=eps, scale=scale, xi=xi, carry0=carry0) -> None:
                call_scan(fk._block, fk._code, carry0, (batch, eps, scale, xi))

            cases[f"{name}_fused_T{T}_core"] = (core, T)
    if args.driver:
        for name, alg in algs.items():
            for label, kw in (("eager", {}), ("compiled", {"compile": True}), ("fused", {"fused": True})):

                def run(alg=alg, kw=kw) -> None:
                    bnnkit.sample(
                        alg,
                        post,
                        Minibatches(X, y, batch_size=m, drop_last=True),
                        num_samples=args.grads,
                        init="module",
                        progress=False,
                        **kw,
                    )

                t0 = time.perf_counter()
                run()
                compile_s[f"{name}_sample_{label}_first_call"] = time.perf_counter() - t0
                cases[f"{name}_sample_{label}"] = (run, args.grads)
    for T in args.unroll_blocks:  # compile time of the unrolled loop (not timed per step)
        torch._dynamo.reset()
        fk = Fused(algs["sgld"], block=T, loop="unroll").build(post)
        stream = Minibatches(X, y, batch_size=m, drop_last=True)
        gen = torch.Generator().manual_seed(0)
        st = fk.init(x0, stream.next(gen))
        t0 = time.perf_counter()
        fk.run_block(st, stream, gen, T)
        compile_s[f"sgld_unrolled_T{T}_first_call"] = time.perf_counter() - t0
    return cases, compile_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/results/fused.json")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--grads", type=int, default=256, help="gradient evaluations per case per round")
    ap.add_argument("--blocks", type=int, nargs="+", default=[8, 32, 128])
    ap.add_argument(
        "--unroll-blocks",
        type=int,
        nargs="*",
        default=[],
        help="also measure the compile time of loop='unroll' at these block sizes (slow: tens of seconds each)",
    )
    ap.add_argument("--driver", action="store_true", help="also time whole bnnkit.sample runs")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cases, compile_s = build(args)
    for fn, _ in cases.values():  # warm-up
        for _ in range(3):
            fn()
    per_grad: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(args.rounds):
        for name, (fn, grads) in cases.items():
            calls = max(1, args.grads // grads)
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            per_grad[name].append((time.perf_counter() - t0) / (calls * grads))
    base = per_grad["plain_fwd_bwd"]
    sgd = per_grad["sgd_step"]
    results = {}
    print(f"{'case':26s} {'us/grad':>9s} {'x plain':>8s} {'x SGD':>7s}")
    for name, ts in per_grad.items():
        r = {
            "us_per_grad": statistics.median(ts) * 1e6,
            "x_plain_fwd_bwd": statistics.median(t / b for t, b in zip(ts, base)),
            "x_sgd_step": statistics.median(t / b for t, b in zip(ts, sgd)),
            "grads_per_call": cases[name][1],
        }
        results[name] = r
        print(f"{name:26s} {r['us_per_grad']:9.1f} {r['x_plain_fwd_bwd']:8.2f} {r['x_sgd_step']:7.2f}")
    for k, v in compile_s.items():
        print(f"compile / first call {k:30s}: {v:6.1f} s")
    write_results(
        args.out,
        {
            "benchmark": "fused_sgmcmc",
            "model": "MLP 13-50-50-1 tanh, Gaussian likelihood, N(0,1) prior, minibatch 32 of 506 rows, float32",
            "command": "python -m benchmarks.bench_fused "
            + " ".join(
                f"--{k.replace('_', '-')} {' '.join(map(str, v)) if isinstance(v, list) else v}"
                for k, v in vars(args).items()
                if v != [] and not isinstance(v, bool)
            )
            + (" --driver" if args.driver else ""),
            "rounds": args.rounds,
            "cases": results,
            "compile_seconds": compile_s,
            "inductor_caches": "disabled (cold compile)"
            if os.environ.get("TORCHINDUCTOR_FORCE_DISABLE_CACHES") == "1"
            else "enabled (a warm cache makes later compiles faster)",
        },
    )


if __name__ == "__main__":
    main()
