"""One Bayes-by-Backprop step (local reparameterisation) against a plain SGD step.

Same MLP 13-50-50-1 (tanh), same minibatch of 32 rows. The SGD step is forward, backward and
``torch.optim.SGD.step``; a BBB step is what ``BayesByBackprop.fit`` does per minibatch:
``loss_and_grad`` (one local-reparameterised forward, the closed-form KL, the gradient in
``(mu, rho)``) and an Adam step from ``BayesByBackprop.optimizer``.  Three BBB figures:

- eager (the default, ``compile=False``): the MLP route, one autograd node with a hand-written
  backward;
- compiled (``compile=True``): the loss and its gradient compiled by ``torch.compile``; its
  one-off compile time is reported apart and excluded from the per-step figure;
- general route: the path any other model takes (layers' forwards swapped in, plain autograd),
  for reference;
- kernel: the step ``BayesByBackprop.fit`` really takes since VI runs through the driver, the
  kernel's ``step`` (:mod:`bnnkit.vi.kernel`: the same gradient, then the functional Adam on
  tensors of the state), without the driver's per-step bookkeeping.

Besides the step figures, ``fit`` times a whole ``BayesByBackprop.fit`` (driver included: batches,
checks, the epoch history) on a Boston-sized problem (506 rows, batch 32, 16 steps an epoch) and
reports seconds per epoch.

Timing: the steps are timed in interleaved rounds (SGD, eager, compiled, general route, again and
again; ``--number`` calls per step and round, ``--repeats`` rounds) so that a burst of load from
other processes hits all of them alike.  Times are medians over the rounds; each ratio is the
median over the rounds of (BBB time / SGD time of the same round).  Target: ratio <= 2.0.

Run:  python -m benchmarks.bench_vi [--out benchmarks/results/vi.json] [--no-compile]

Measured (torch 2.13 CPU, 2 threads, a shared 2-core VM; median of 3 runs of the command above):
eager 1.78x, compiled 1.02x (compile once ~3 s with a warm Inductor cache), general route 3.0x;
before the MLP route and the lean Adam (same harness) a step cost 3.5x.

VI through the driver (issue 28): ``BayesByBackprop.fit`` on 506 rows x 13 features, MLP 13-50-1
tanh, local estimator, batch 32 (16 steps an epoch), one thread, 15 interleaved pairs in one process
on this shared, loaded VM: before (its own loop and FlatAdam) 0.0151 s per epoch, after (kernel +
driver) 0.0157 s per epoch, median ratio 1.04.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

import bnnkit
from benchmarks._timing import write_results
from bnnkit.vi import BayesByBackprop, MeanFieldGaussian

TARGET = 2.0


def bbb_step(post, X, y, *, compile: bool = False, general: bool = False):
    """A BBB step as ``fit`` takes it; ``general`` forces the route of non-MLP models."""
    bbb = BayesByBackprop(lr=1e-3, estimator="local", compile=compile)
    q = MeanFieldGaussian(post)
    opt = bbb.optimizer(q)
    gen = torch.Generator().manual_seed(0)
    plan = bbb.plan(post)
    if general:
        plan.mlp = None

    def step():
        bbb.loss_and_grad(plan, q, (X, y), gen, 1 / 16)
        opt.step()

    return step


def kernel_step(post, X, y):
    """The BBB kernel's step as the driver calls it (its state carried from step to step)."""
    bbb = BayesByBackprop(lr=1e-3, estimator="local", batch_size=32, num_epochs=10**6)
    kernel = bbb.build(post.target(), model=post)
    gen = torch.Generator().manual_seed(0)
    box = [kernel.init(post.initial_position("module"), (X, y))]

    def step():
        box[0], _ = kernel.step(box[0], (X, y), gen)

    return step


def fit_seconds_per_epoch(post, X, y, num_epochs: int = 20, repeats: int = 5) -> float:
    """Median seconds per epoch of ``BayesByBackprop.fit`` (driver included)."""
    bbb = BayesByBackprop(lr=1e-3, num_epochs=num_epochs, batch_size=32, estimator="local")
    bbb.fit(post, (X, y), progress=False)  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        bbb.fit(post, (X, y), progress=False)
        times.append((time.perf_counter() - t) / num_epochs)
    return statistics.median(times)


def time_rounds(
    fns: dict[str, Callable[[], object]], number: int, repeats: int, warmup: int = 50
) -> dict[str, list[float]]:
    """Seconds per call of each function, one entry per round; rounds interleave the functions."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    runs: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t = time.perf_counter()
            for _ in range(number):
                fn()
            runs[name].append((time.perf_counter() - t) / number)
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/vi.json")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--number", type=int, default=100, help="calls per step and round")
    ap.add_argument("--repeats", type=int, default=21, help="rounds")
    ap.add_argument("--no-compile", action="store_true", help="skip the compiled BBB step")
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
    eager = bbb_step(post, X, y)
    kernel = kernel_step(post, X, y)
    general = bbb_step(post, X, y, general=True)
    compiled, compile_s = None, None
    if not args.no_compile:
        compiled = bbb_step(post, X, y, compile=True)
        t0 = time.perf_counter()
        compiled()  # compiles
        compile_s = time.perf_counter() - t0

    fns = {"sgd": sgd_step, "eager": eager, "kernel": kernel, "compiled": compiled, "general": general}
    runs = time_rounds({k: f for k, f in fns.items() if f is not None}, args.number, args.repeats)
    t = {k: statistics.median(v) for k, v in runs.items()}
    ratio = {
        k: statistics.median(b / s for b, s in zip(v, runs["sgd"])) for k, v in runs.items() if k != "sgd"
    }
    r_eager, r_gen, r_comp = ratio["eager"], ratio["general"], ratio.get("compiled")
    print(f"threads {torch.get_num_threads()}, MLP 13-50-50-1 tanh, batch 32")
    print(f"plain SGD step                     : {t['sgd'] * 1e6:8.1f} us")
    print(f"BBB step, eager (compile=False)    : {t['eager'] * 1e6:8.1f} us   ratio {r_eager:6.3f}")
    if r_comp is not None:
        print(
            f"BBB step, compiled (compile=True)  : {t['compiled'] * 1e6:8.1f} us   ratio {r_comp:6.3f}"
            f"   (compile once: {compile_s:.1f} s)"
        )
    print(f"BBB step, general route (any model): {t['general'] * 1e6:8.1f} us   ratio {r_gen:6.3f}")
    print(f"BBB kernel step (what fit runs)     : {t['kernel'] * 1e6:8.1f} us   ratio {ratio['kernel']:6.3f}")
    g = torch.Generator().manual_seed(0)
    Xf, yf = torch.randn(506, 13, generator=g), torch.randn(506, generator=g)
    fit_s = fit_seconds_per_epoch(post, Xf, yf)
    print(f"BayesByBackprop.fit, 506 rows, batch 32: {fit_s:.4f} s per epoch (16 steps)")
    print(f"target ratio <= {TARGET}")
    write_results(
        args.out,
        {
            "benchmark": "bbb_step",
            "model": "MLP 13-50-50-1 tanh, batch 32",
            "sgd_us": t["sgd"] * 1e6,
            "bbb_eager_us": t["eager"] * 1e6,
            "bbb_compiled_us": t["compiled"] * 1e6 if "compiled" in t else None,
            "bbb_general_us": t["general"] * 1e6,
            "bbb_kernel_us": t["kernel"] * 1e6,
            "ratio_kernel": ratio["kernel"],
            "fit_s_per_epoch": fit_s,
            "ratio_eager": r_eager,
            "ratio_compiled": r_comp,
            "ratio_general": r_gen,
            "compile_s": compile_s,
            "target_ratio": TARGET,
            "number": args.number,
            "repeats": args.repeats,
            "meets_target": {
                "eager": r_eager <= TARGET,
                "compiled": None if r_comp is None else r_comp <= TARGET,
            },
        },
    )


if __name__ == "__main__":
    main()
