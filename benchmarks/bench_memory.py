"""Peak memory of a long run streamed to disk, and of the predictive read back in chunks.

An MLP 20-300-300-1 (about 97k parameters) is sampled by SGLD with ``output=`` a run directory:
draws go to disk in chunks of ``chunk_size`` and the returned :class:`~bnnkit.StoredSamples`
keeps them there.  The predictive at 200 test inputs is then computed from the stored draws
chunk by chunk.  Each run is a fresh process, so its peak resident memory (``ru_maxrss``) is its
own; with streaming the peak should not grow with the number of draws (10,000 draws of this
network are 3.9 GB in float32).

Reference: a plain PyTorch forward + backward step of the same network, timed in the same run
(the ratio shows what streaming costs per step).

Run:  python -m benchmarks.bench_memory [--draws 1000,10000] [--out benchmarks/results/memory.json]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from benchmarks._timing import time_per_call, write_results


def child(num_draws: int, root: str, chunk_size: int) -> dict:
    import bnnkit
    from bnnkit.data import Minibatches
    from bnnkit.nets import mlp
    from bnnkit.predict import predict

    torch.set_num_threads(2)
    torch.manual_seed(0)
    n, d = 1000, 20
    X, y = torch.randn(n, d), torch.randn(n)
    net = mlp(d, 300)
    xb, yb = X[:32], y[:32]

    def plain_step() -> None:
        net.zero_grad(set_to_none=True)
        ((net(xb).squeeze(-1) - yb) ** 2).sum().backward()

    t_plain = time_per_call(plain_step, number=100, repeats=3)
    rss0 = _rss_mb()
    post = bnnkit.Posterior(net, bnnkit.Gaussian(1.0), bnnkit.GaussianPrior(1.0), num_data=n)
    t0 = time.perf_counter()
    samples = bnnkit.sample(
        bnnkit.SGLD(1e-6), post, Minibatches(X, y, batch_size=32), num_samples=num_draws, thin=1,
        init="module", output=root, chunk_size=chunk_size, progress=False,
    )  # fmt: skip
    t_sample = time.perf_counter() - t0
    rss_sample = _rss_mb()
    t0 = time.perf_counter()
    pred = predict(post, samples, X[:200])
    t_pred = time.perf_counter() - t0
    on_disk = sum(f.stat().st_size for f in Path(root).rglob("*.pt")) / 2**20
    return {
        "num_draws": num_draws,
        "num_params": post.view.size,
        "chunk_size": chunk_size,
        "peak_rss_mb_before": rss0,
        "peak_rss_mb_after_sampling": rss_sample,
        "peak_rss_mb_after_predictive": _rss_mb(),
        "draws_on_disk_mb": on_disk,
        "sample_s": t_sample,
        "predictive_s": t_pred,
        "step_over_plain_fwd_bwd": t_sample / num_draws / t_plain,
        "predictive_mean_finite": bool(torch.isfinite(pred.mean).all()),
    }


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", default="1000,10000")
    ap.add_argument("--chunk-size", type=int, default=250)
    ap.add_argument("--out", default="benchmarks/results/memory.json")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--root", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.root, args.chunk_size)))
        return
    rows = []
    for num in (int(v) for v in args.draws.split(",")):
        root = tempfile.mkdtemp(prefix="bnnkit-mem-")
        try:
            cmd = [
                sys.executable,
                "-m",
                "benchmarks.bench_memory",
                "--child",
                str(num),
                "--root",
                root + "/run",
            ]
            cmd += ["--chunk-size", str(args.chunk_size)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            row = json.loads(out.strip().splitlines()[-1])
        finally:
            shutil.rmtree(root, ignore_errors=True)
        rows.append(row)
        print(
            f"{row['num_draws']:6d} draws x {row['num_params']} params ({row['draws_on_disk_mb']:.0f} MB on disk): "
            f"peak RSS {row['peak_rss_mb_before']:.0f} MB before, {row['peak_rss_mb_after_sampling']:.0f} MB "
            f"after sampling, {row['peak_rss_mb_after_predictive']:.0f} MB after the predictive; "
            f"sampling {row['sample_s']:.1f} s ({row['step_over_plain_fwd_bwd']:.2f}x a plain fwd+bwd per "
            f"step), predictive {row['predictive_s']:.1f} s"
        )
    write_results(args.out, {"benchmark": "streaming_memory", "runs": rows})


if __name__ == "__main__":
    main()
