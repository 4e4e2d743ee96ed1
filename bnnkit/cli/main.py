"""``bnnkit`` command-line entry point."""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bnnkit", description="Bayesian neural networks in PyTorch.")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser(
        "demo",
        help="sample a small BNN on embedded 1-D data with HMC; print metrics and diagnostics, write a PNG",
    )
    demo.add_argument(
        "--out", default="bnnkit-demo.png", help="path of the PNG to write (default: %(default)s)"
    )
    demo.add_argument("--chains", type=int, default=4, help="number of chains (default: %(default)s)")
    demo.add_argument("--samples", type=int, default=200, help="draws kept per chain (default: %(default)s)")
    demo.add_argument(
        "--warmup", type=int, default=300, help="warm-up steps per chain (default: %(default)s)"
    )
    demo.add_argument("--leapfrog", type=int, default=30, help="leapfrog steps per HMC transition")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--threads", type=int, default=2, help="torch threads (default: %(default)s)")
    demo.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        from .demo import run_demo

        run_demo(
            out=args.out,
            num_chains=args.chains,
            num_samples=args.samples,
            num_warmup=args.warmup,
            num_steps=args.leapfrog,
            seed=args.seed,
            threads=args.threads,
            progress=not args.no_progress,
        )
        return 0
    return 2  # pragma: no cover - argparse enforces a command


if __name__ == "__main__":
    sys.exit(main())
