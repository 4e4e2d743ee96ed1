"""``bnnkit`` command-line entry point."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.errors import BnnkitError

MAX_THREADS = 1024
MAX_SEED = 2**32 - 1


class _Parser(argparse.ArgumentParser):
    """argparse's parser whose errors are one line, ``bnnkit: error: ...`` (exit status 2), as the
    errors of the commands themselves are, rather than a usage block and a second line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"bnnkit: error: {message} (see `{self.prog} --help`)\n")


def _int_in(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse ``type=``: a whole number in ``low..high``, with a message that says so."""
    want = f"a whole number >= {low}" if high is None else f"a whole number in {low}..{high}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {want}, got {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {want}, got {value}")
        return value

    return parse


def _positive_float(text: str) -> float:
    """An argparse ``type=``: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def _names(text: str) -> list[str]:
    """An argparse ``type=``: a comma-separated list of names, at least one."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"needs at least one name (comma-separated), got {text!r}")
    return names


def _numbers(kind: type) -> Callable[[str], list]:
    """An argparse ``type=``: comma-separated numbers of ``kind`` (e.g. ``0.4,0.5``)."""

    def parse(text: str) -> list:
        try:
            return [kind(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be comma-separated {kind.__name__}s, got {text!r}"
            ) from None

    return parse


POSITIVE = _int_in(1)
COUNT = _int_in(0)
THREADS = _int_in(1, MAX_THREADS)
SEED = _int_in(0, MAX_SEED)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="bnnkit", description="Bayesian neural networks in PyTorch.")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_demo(sub)
    _add_experiment(sub)
    bench = sub.add_parser("bench", help="run a benchmark of the paper (tables as markdown, CSV and JSON)")
    bench_sub = bench.add_subparsers(dest="benchmark", required=True)
    _add_bench_uci(bench_sub)
    _add_bench_image(bench_sub)
    _add_bench_bandit(bench_sub)
    return parser


def _add_demo(sub: Any) -> None:
    """``bnnkit demo``."""
    demo = sub.add_parser(
        "demo",
        help="sample a small BNN on embedded 1-D data with HMC; print metrics and diagnostics, write a PNG",
    )
    demo.add_argument(
        "--out", default="bnnkit-demo.png", help="path of the PNG to write (default: %(default)s)"
    )
    demo.add_argument("--chains", type=POSITIVE, default=4, help="number of chains (default: %(default)s)")
    demo.add_argument(
        "--samples", type=POSITIVE, default=200, help="draws kept per chain (default: %(default)s)"
    )
    demo.add_argument(
        "--warmup", type=COUNT, default=300, help="warm-up steps per chain (default: %(default)s)"
    )
    demo.add_argument("--leapfrog", type=POSITIVE, default=30, help="leapfrog steps per HMC transition")
    demo.add_argument("--seed", type=SEED, default=0)
    demo.add_argument("--threads", type=THREADS, default=1, help="torch threads (default: %(default)s)")
    demo.add_argument(
        "--chain-method",
        default="vectorized",
        choices=["vectorized", "sequential"],
        help="run the chains as one batched computation or one after another (default: %(default)s)",
    )
    demo.add_argument("--no-progress", action="store_true", help="hide the progress bars")


def _add_experiment(sub: Any) -> None:
    """``bnnkit experiment extrapolation``."""
    exp = sub.add_parser("experiment", help="run one of the paper's experiments (writes PNG + JSON)")
    exp_sub = exp.add_subparsers(dest="experiment", required=True)
    ext = exp_sub.add_parser(
        "extrapolation",
        help="1-D extrapolation: fSGHMC with a GP prior against SGHMC with a Gaussian weight prior",
    )
    ext.add_argument("--out", default="bnnkit-out/extrapolation", help="output folder (default: %(default)s)")
    ext.add_argument("--quick", action="store_true", help="short chains (a smoke test, about 10 s)")
    ext.add_argument("--seed", type=SEED, default=0)
    ext.add_argument("--step-size", type=_positive_float, default=2e-3)
    ext.add_argument("--friction", type=_positive_float, default=10.0)
    ext.add_argument(
        "--threads", type=THREADS, default=1, help="torch threads (default 1: the matrices are tiny)"
    )
    ext.add_argument("--no-progress", action="store_true", help="hide the progress bars")


def _add_bench_uci(bench_sub: Any) -> None:
    """``bnnkit bench uci``."""
    uci = bench_sub.add_parser(
        "uci",
        help="UCI regression: RMSE and NLL over the standard splits",
        description="Every row is bnnkit.fit(method=M) with M's defaults. Tables of earlier protocols "
        "(--protocol, --tune) are reproduced from the commit and command that made them.",
    )
    uci.add_argument(
        "--datasets",
        type=_names,
        default="boston",
        help="comma-separated: known UCI names (boston, concrete, energy, kin8nm, wine, yacht, protein, "
        "naval, power), or the name of your own folder DATA/uci/NAME in the same layout (data.txt, "
        "index_features.txt, index_target.txt, index_train_<i>.txt, index_test_<i>.txt, n_splits.txt) "
        "(default: %(default)s)",
    )
    uci.add_argument(
        "--methods",
        type=_names,
        default="default,ensemble,mcdropout,laplace,bbb",
        # bnnkit.api.METHODS, not imported (tests/cli checks that they agree)
        help="comma-separated bnnkit.fit methods, each with its defaults, from "
        "default,sghmc,fsgld,fsghmc,nuts,hmc,laplace,mcdropout,ensemble,bbb (default: %(default)s)",
    )
    uci.add_argument(
        "--splits", type=POSITIVE, default=10, help="run splits 0..SPLITS-1 (default: %(default)s)"
    )
    uci.add_argument(
        "--first-split",
        type=COUNT,
        default=0,
        help="start at this split (e.g. 4 with --splits 10 runs 4-9 beside a run of 0-3; "
        "--from-cells joins their cells)",
    )
    uci.add_argument(
        "--quick", action="store_true", help="tiny network, short runs, 200 rows: a smoke test, not results"
    )
    uci.add_argument(
        "--data",
        default=None,
        metavar="DIR",
        help="data directory holding uci/NAME/ folders, the known sets' and your own "
        "(default: $BNNKIT_DATA or the user cache)",
    )
    uci.add_argument("--out", default="bnnkit-out/uci", help="output folder (default: %(default)s)")
    uci.add_argument("--seed", type=SEED, default=0)
    uci.add_argument("--threads", type=THREADS, default=1)
    uci.add_argument("--no-progress", action="store_true")
    uci.add_argument(
        "--split-kind",
        # bnnkit.data.splits.SPLIT_KINDS, not imported (tests/bench/test_uci_split_kinds.py checks they agree)
        choices=("random", "gap", "tail"),
        default="random",
        help="random: the standard splits (the layout's index files); gap: one split per input dimension, the "
        "middle third of the rows sorted by it held out (in-between uncertainty); tail: its top and bottom "
        "sixths held out (extrapolation). Cells record the kind; --resume and --from-cells never mix kinds "
        "(default: %(default)s)",
    )
    uci.add_argument(
        "--from-cells",
        default=None,
        metavar="JSONL",
        help="run nothing: rebuild the tables from the uci_cells.jsonl of a stopped run with these arguments",
    )
    uci.add_argument(
        "--resume",
        action="store_true",
        help="keep the cells already in OUT/uci_cells.jsonl (same seed, --quick and protocol) and run "
        "only the missing ones: goes on with a stopped run, or grows --splits; cells of a split whose data "
        "files have changed since are refused",
    )


def _add_bench_image(bench_sub: Any) -> None:
    """``bnnkit bench image``."""
    img = bench_sub.add_parser(
        "image", help="image classification + OOD detection (small CNN; the CPU, or a GPU with --device cuda)"
    )
    img.add_argument(
        "--dataset",
        default="mnist",
        choices=["mnist", "fmnist", "fmnist-partial"],
        help="fmnist needs --download; fmnist-partial trains offline on 3443 of the shared Fashion-MNIST test images",
    )
    img.add_argument(
        "--model", default="cnn", choices=["cnn", "resnet18"], help="small CNN (CPU) or ResNet-18 (GPU runs)"
    )
    img.add_argument(
        "--width", type=POSITIVE, default=None, help="ResNet-18 channels of the first stage (default 64)"
    )
    img.add_argument(
        "--methods",
        type=_names,
        default="default,sghmc,sgld,fsghmc,fsgld,bbb",
        help="comma-separated, from default,sghmc,sgld,asghmc,fsghmc,fsgld,bbb,fbnn,mcdropout,ensemble,laplace "
        "(default: %(default)s; default is bnnkit.fit(net, (x, y)) with the default recipe)",
    )
    img.add_argument("--quick", action="store_true", help="600 training images, short runs: a smoke test")
    img.add_argument("--data", default=None, help="data directory (default: $BNNKIT_DATA or the user cache)")
    img.add_argument("--download", action="store_true")
    img.add_argument("--out", default="bnnkit-out/image", help="output folder (default: %(default)s)")
    img.add_argument(
        "--resume",
        action="store_true",
        help="reuse the methods' rows in OUT/image_rows.jsonl with the same arguments; run only the others",
    )
    img.add_argument("--seed", type=SEED, default=0)
    img.add_argument("--threads", type=THREADS, default=2)
    img.add_argument(
        "--device", default="cpu", help="where the data, networks and chains live: cpu (default) or cuda"
    )
    img.add_argument("--no-progress", action="store_true")


def _add_bench_bandit(bench_sub: Any) -> None:
    """``bnnkit bench bandit``."""
    ban = bench_sub.add_parser(
        "bandit", help="mushroom contextual bandit with Thompson sampling (regret plots)"
    )
    ban.add_argument(
        "--methods",
        type=_names,
        default=None,
        help="comma-separated (default: all: sgld,fsgld,bbb,greedy0,greedy1,greedy5,sghmc,fsghmc,fbnn,laplace,default)",
    )
    ban.add_argument(
        "--patterns",
        type=_numbers(float),
        default=None,
        help="poison probabilities, e.g. 0.4,0.5,0.6 (the default)",
    )
    ban.add_argument("--seeds", type=_numbers(int), default=None, help="e.g. 0,1,2 (the default)")
    ban.add_argument(
        "--steps", type=POSITIVE, default=None, help="interactions (default 10000; --quick: 300)"
    )
    ban.add_argument("--quick", action="store_true", help="a smoke test: 300 interactions, small network")
    ban.add_argument("--data", default=None, help="data directory (default: $BNNKIT_DATA or the user cache)")
    ban.add_argument("--out", default="bnnkit-out/bandit")
    ban.add_argument(
        "--resume",
        action="store_true",
        help="reuse the runs in OUT/bandit_runs.jsonl with the same arguments; play only the missing ones",
    )
    ban.add_argument(
        "--from-runs",
        default=None,
        metavar="FILE",
        help="play nothing: rebuild the tables and plots from a bandit_runs.jsonl (runs it lacks are left out)",
    )
    ban.add_argument(
        "--config",
        default=None,
        metavar="JSON",
        help="overrides of the agents' defaults (bnnkit.bench.bandit.DEFAULTS) as a JSON object, e.g. "
        "'{\"fsgld_max_step\": 0.001}'; written into every run's record",
    )
    ban.add_argument("--threads", type=THREADS, default=1)
    ban.add_argument("--no-progress", action="store_true")


def main(argv: list[str] | None = None) -> int:
    """The ``bnnkit`` command.  Bad input ends in one line that says what to change (exit status 2),
    not a traceback: a bad option value (checked as the arguments are read), a bnnkit error, and a
    file or folder that cannot be read or written (named); a stop by Ctrl-C says where the finished
    work is kept (exit status 130).  Set ``BNNKIT_TRACEBACK=1`` to see the traceback of an error."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # --help (0), or a bad option: argparse has printed its one line
        return stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 2)
    try:
        _check_args(args)
        return _run(args)
    except (BnnkitError, OSError) as err:
        if os.environ.get("BNNKIT_TRACEBACK"):
            raise
        message = _os_message(err) if isinstance(err, OSError) else str(err)
        print(f"bnnkit: error: {' '.join(message.split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        hint = (
            f"; the finished work is kept in {args.out}: run the same command with --resume to go on"
            if hasattr(args, "resume") and getattr(args, "out", None)
            else ""
        )
        print(f"bnnkit: stopped{hint}.", file=sys.stderr)
        return 130


def _os_message(err: OSError) -> str:
    """One line for a file or folder that could not be read or written, naming it."""
    what = err.strerror or type(err).__name__
    if err.filename is None:
        return f"{what}: {err}" if str(err) and str(err) != what else what
    both = f" -> {err.filename2}" if err.filename2 is not None else ""
    return f"{what}: {err.filename}{both} (check the path and that it may be read and written)"


def _check_args(args: argparse.Namespace) -> None:
    """What argparse checks one option at a time cannot: options that must agree, and output paths
    (before any work starts)."""
    sub = _subcommand(args)
    if sub == ("bench", "uci") and args.first_split >= args.splits:
        raise BnnkitError(
            f"--first-split {args.first_split} must lie below --splits {args.splits}: it is the index of the "
            "first split to run, and --splits the index after the last."
        )
    if sub == ("demo",):
        from .demo import check_out_file

        check_out_file(args.out)
    elif sub == ("experiment", "extrapolation"):
        from ..core.files import output_folder

        output_folder(args.out)


def _run(args: argparse.Namespace) -> int:
    handler = _HANDLERS.get(_subcommand(args))
    if handler is None:  # pragma: no cover - argparse enforces a command
        return 2
    import torch

    torch.set_num_threads(args.threads)  # every command has --threads
    return handler(args)


def _subcommand(args: argparse.Namespace) -> tuple[str, ...]:
    """The path of subcommand names, e.g. ``("bench", "uci")``."""
    if args.command == "experiment":
        return (args.command, args.experiment)
    if args.command == "bench":
        return (args.command, args.benchmark)
    return (args.command,)


# The options several commands share, as the keywords of the functions the commands run.
_SHARED_OPTIONS = {"out": "out", "data": "root", "quick": "quick", "seed": "seed", "resume": "resume"}


def _shared(args: argparse.Namespace) -> dict[str, Any]:
    """The run function's keywords from the shared options the command has: ``out``, ``root``
    (``--data``), ``quick``, ``seed``, ``resume``, and ``progress`` (not ``--no-progress``)."""
    kw = {key: getattr(args, flag) for flag, key in _SHARED_OPTIONS.items() if hasattr(args, flag)}
    return {**kw, "progress": not args.no_progress}


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    run_demo(
        num_chains=args.chains,
        num_samples=args.samples,
        num_warmup=args.warmup,
        num_steps=args.leapfrog,
        threads=args.threads,
        chain_method=args.chain_method,
        **_shared(args),
    )
    return 0


def _experiment_extrapolation(args: argparse.Namespace) -> int:
    from ..bench.extrapolation import run_extrapolation

    report = run_extrapolation(step_size=args.step_size, friction=args.friction, **_shared(args))
    for name in ("fsghmc", "sghmc", "sghmc_scaled"):
        print(f"{name}: " + json.dumps({k: round(v, 3) for k, v in report[name].items()}))
    print(f"wrote {args.out}/extrapolation.png and {args.out}/extrapolation.json")
    return 0


def _bench_uci(args: argparse.Namespace) -> int:
    from ..bench.uci import run_uci

    report = run_uci(
        datasets=args.datasets,
        methods=args.methods,
        splits=args.splits,
        from_cells=args.from_cells,
        first_split=args.first_split,
        split_kind=args.split_kind,
        **_shared(args),
    )
    print(report["markdown"])
    print(f"wrote {args.out}/uci.md, uci.csv, uci.json and uci.png")
    return 0


def _bench_image(args: argparse.Namespace) -> int:
    from ..bench.image import run_image

    run_image(
        dataset=args.dataset,
        methods=tuple(args.methods),
        download=args.download,
        model=args.model,
        width=args.width,
        device=args.device,
        **_shared(args),
    )
    print((Path(args.out) / "image.md").read_text())
    return 0


def _json_object(text: str | None, flag: str) -> dict | None:
    """``text`` parsed as a JSON object (None stays None); a clear error otherwise."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise BnnkitError(f"{flag} must be a JSON object, e.g. '{{\"noise\": 0.25}}': {err}") from None
    if not isinstance(value, dict):
        raise BnnkitError(f"{flag} must be a JSON object (keys and values), got {type(value).__name__}.")
    return value


def _bench_bandit(args: argparse.Namespace) -> int:
    from ..bench.bandit import METHODS, run_bandit

    run_bandit(
        methods=args.methods or METHODS,
        patterns=args.patterns,
        seeds=args.seeds,
        steps=args.steps,
        from_runs=args.from_runs,
        config=_json_object(args.config, "--config"),
        **_shared(args),
    )
    print((Path(args.out) / "bandit.md").read_text())
    return 0


# One handler per subcommand path; each returns the exit status.
_HANDLERS = {
    ("demo",): _demo,
    ("experiment", "extrapolation"): _experiment_extrapolation,
    ("bench", "uci"): _bench_uci,
    ("bench", "image"): _bench_image,
    ("bench", "bandit"): _bench_bandit,
}


if __name__ == "__main__":
    sys.exit(main())
