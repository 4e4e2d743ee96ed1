"""Shared timing helpers for the benchmarks: warm up, then the median of repeated timings."""

from __future__ import annotations

import itertools
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch


def time_per_call(fn: Callable[[], object], number: int = 200, repeats: int = 7, warmup: int = 50) -> float:
    """Median over ``repeats`` of the mean seconds per call of ``fn`` over ``number`` calls."""
    for _ in range(warmup):
        fn()
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        runs.append((time.perf_counter() - t) / number)
    return statistics.median(runs)


def cycling_batches(
    X: torch.Tensor, y: torch.Tensor, m: int
) -> Callable[[], tuple[torch.Tensor, torch.Tensor]]:
    """A function that returns the next of the consecutive ``m``-row minibatches of ``(X, y)``, cycling."""
    batches = itertools.cycle([(X[i : i + m], y[i : i + m]) for i in range(0, len(X) - m, m)])
    return lambda: next(batches)


def write_results(path: str | Path, results: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    path.write_text(json.dumps({"meta": meta, **results}, indent=2))
    print(f"wrote {path}")


def mlp_workload(n: int = 506, m: int = 32):
    """The SG-MCMC timing workload: seeded random data ``X [n, 13], y [n]``, a cycling minibatch
    source of ``m`` rows, the 13-50-50-1 tanh MLP and a plain SGD optimiser over it (the baseline).
    Returns ``(X, y, next_batch, net, opt)``."""
    from bnnkit.nets import mlp

    torch.manual_seed(0)
    X, y = torch.randn(n, 13), torch.randn(n)
    next_batch = cycling_batches(X, y, m)
    net = mlp(13, 50)
    opt = torch.optim.SGD(net.parameters(), lr=1e-6)
    return X, y, next_batch, net, opt


def run_jax_child(python: str, script: str, data: dict, args: list, threads: int) -> dict:
    """Run ``script`` (the JAX side of a same-workload comparison) in ``python``, a child process
    pinned to ``threads`` CPUs with XLA's thread pool sized to match; ``data`` (numpy arrays) is
    passed as an ``.npz`` path in ``sys.argv[1]``, ``args`` after it.  Returns the JSON object the
    script prints on its last line."""
    import subprocess
    import tempfile

    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "data.npz"
        np.savez(f, **data)
        env = {
            "XLA_FLAGS": f"--xla_cpu_multi_thread_eigen={'true' if threads > 1 else 'false'} "
            f"intra_op_parallelism_threads={threads}",
            "OMP_NUM_THREADS": str(threads),
            "PATH": "/usr/bin:/bin",
        }
        cmd = ["taskset", "-c", ",".join(str(i) for i in range(threads)), python, "-c", script, str(f)]
        res = subprocess.run(
            cmd + [str(a) for a in args], capture_output=True, text=True, env=env, check=False
        )
        if res.returncode:
            raise RuntimeError(f"the JAX part failed:\n{res.stderr[-3000:]}")
        return json.loads(res.stdout.strip().splitlines()[-1])
