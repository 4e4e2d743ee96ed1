"""The UCI benchmark's runner: every (data set, split, method) cell of a run, written one JSON line at
a time as it finishes, then the report.

:func:`run_uci` runs named sets: the nine known ones (checksummed) or any folder in the standard UCI
layout under ``<root>/uci/<NAME>/``.  :func:`run_uci_arrays` runs the same protocol on arrays held in
memory.  Both go through :func:`_run_cells`, so their cells, tables and plots are alike.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...core.errors import BnnkitError
from ...data.download import resolve_root
from ...data.splits import check_split_kind, split_dims, split_rows
from ...data.uci import (
    UCIData,
    UCISplit,
    is_known_uci,
    load_uci,
    load_uci_columns,
    uci_dataset_name,
    uci_num_splits,
)
from ..records import output_folder
from .inference import _run_method, predictive, test_scores
from .protocol import (
    METHODS,
    SG_METHODS,
    VI_METHODS,
    UCIProtocol,
    _epochs,
    canonical_methods,
    check_protocol,
    stock_protocol,
)
from .records import (
    CELLS_FILE,
    DATA_KEY,
    OUTPUT_MARKS,
    _read_cells,
    _same_run,
    _settings,
    append_record,
    arrays_checksum,
    check_resumed_data,
    files_checksum,
    read_records,
    start_records,
)
from .report import _report, _write

# methods that need neither the fitted GP nor its noise: the split's GP fit is skipped for them
NO_GP_NEEDED = frozenset({"default", "sgld", "csgld", "sghmc", "asghmc", "nuts"})


@dataclass(frozen=True)
class _Source:
    """Where a data set's splits come from: a UCI-layout folder (:func:`load_uci`) or arrays
    (:class:`~bnnkit.data.uci.UCIData`).  ``num_splits`` is read when first needed, so a run of
    known sets needs only the files of the splits it runs.  ``checksum(split)`` is the split's data
    checksum that its cells carry (``--resume`` compares it); ``where`` names the data in messages;
    ``kind`` is the kind of split (:data:`~bnnkit.data.splits.SPLIT_KINDS`) and ``dim(split)`` the
    input dimension a gap or tail split holds out a region of (None for the other kinds)."""

    name: str
    num_splits: Callable[[], int]
    load: Callable[[int], UCISplit]
    checksum: Callable[[int], str]
    where: str
    kind: str = "random"
    dim: Callable[[int], int | None] = lambda split: None


def _folder_source(dataset: str, root: str | None) -> _Source:
    name = uci_dataset_name(dataset)
    folder = resolve_root(root) / "uci" / name
    digests: dict[Path, str] = {}  # data.txt is read once for all the splits

    def checksum(split: int) -> str:
        files = ("data.txt", "index_features.txt", "index_target.txt")
        files += (f"index_train_{split}.txt", f"index_test_{split}.txt")
        try:
            return files_checksum([folder / f for f in files], digests)
        except FileNotFoundError:
            load_uci(name, split, root=root)  # an error that names the missing file and the layout
            raise

    return _Source(
        name=name,
        num_splits=lambda: uci_num_splits(name, root=root),
        load=lambda split: load_uci(name, split, root=root),
        checksum=checksum,
        where=f"{folder}/",
    )


folder_source = _folder_source  # the public name (experiments/ and benchmarks/ use it)


def _kind_source(dataset: str, root: str | None, kind: str) -> _Source:
    """The ``kind`` (gap or tail) splits of a UCI-layout set, made from its ``data.txt`` and
    feature columns (:func:`bnnkit.data.splits.split_rows`; the folder's own index files are not
    read).  A split's checksum covers the layout's data files, the kind and its rows."""
    name = uci_dataset_name(dataset)
    folder = resolve_root(root) / "uci" / name
    held: dict[str, Any] = {}  # read and split once, when first needed

    def data() -> UCIData:
        if not held:
            x, y = load_uci_columns(name, root=root)
            held["data"] = UCIData.from_arrays(x, y, split_rows(x, kind), name=name)
            held["dims"] = split_dims(x, kind)
            files = ("data.txt", "index_features.txt", "index_target.txt")
            held["files"] = files_checksum([folder / f for f in files])
        return held["data"]

    def checksum(split: int) -> str:
        train, test = data().splits[split]
        return _rows_checksum(held["files"], kind, train, test)

    def dim(split: int) -> int:
        data()
        return held["dims"][split]

    return _Source(
        name=name,
        num_splits=lambda: data().num_splits,
        load=lambda split: data().split(split),
        checksum=checksum,
        where=f"{folder}/ ({kind} splits)",
        kind=kind,
        dim=dim,
    )


def _rows_checksum(base: str, kind: str, train: np.ndarray, test: np.ndarray) -> str:
    """A split's data checksum from ``base`` (the checksum of its data), the kind of split and
    its rows; a random split's leaves the kind out, as cells written before kinds were recorded."""
    parts: list[Any] = [np.frombuffer(bytes.fromhex(base), dtype=np.uint8)]
    if kind != "random":
        parts.append(np.frombuffer(kind.encode(), dtype=np.uint8))
    return arrays_checksum(*parts, train, test)


def _arrays_source(data: UCIData, kind: str = "random") -> _Source:
    base = arrays_checksum(data.x, data.y)
    dims = split_dims(data.x, kind) if kind != "random" else None

    def checksum(split: int) -> str:
        train, test = data.splits[split]
        return _rows_checksum(base, kind, train, test)

    return _Source(
        name=data.name,
        num_splits=lambda: data.num_splits,
        load=data.split,
        checksum=checksum,
        where="the arrays given",
        kind=kind,
        dim=lambda split: None if dims is None else dims[split],
    )


def run_uci(
    datasets: Sequence[str],
    methods: Sequence[str],
    splits: int = 10,
    out: str | Path = "bnnkit-out/uci",
    root: str | None = None,
    quick: bool = False,
    seed: int = 0,
    progress: bool = True,
    log: Callable[[str], None] = print,
    tune: bool = False,
    from_cells: str | Path | None = None,
    resume: bool = False,
    first_split: int = 0,
    protocol: UCIProtocol | None = None,
    split_kind: str = "random",
) -> dict[str, Any]:
    """Run ``methods`` on ``datasets`` for the first ``splits`` splits; write tables, JSON and
    ``uci.png`` (RMSE and NLL per method and data set, the paper's numbers marked).

    ``datasets`` are known UCI names (or aliases), read from ``<root>/uci/<name>/`` with their
    checksums verified, or names of the user's own folders ``<root>/uci/<NAME>/`` in the same
    layout (:func:`bnnkit.data.load_uci` says what they must hold; a missing or malformed file is an
    error that names it).  Published numbers (:mod:`bnnkit.bench.published`) appear beside the
    known sets' rows only.

    ``first_split`` skips the splits before it, so that one run can take splits 0-3 and another,
    in parallel, splits 4-9: each cell is the one the single run gives (split s always uses seed
    ``seed + s``), and ``from_cells`` joins their files.

    With ``tune`` each SG-MCMC method chooses its step size per split from ``TUNE["factors"]`` x
    its default by chains as long as the run on 80/20 of the training rows
    (:func:`_tuned_step_size`).  With
    ``from_cells`` nothing runs: the tables are rebuilt from the ``uci_cells.jsonl`` that a run of
    the same arguments wrote cell by cell (for a run that stopped before it finished; the report
    names the splits it holds).  With ``resume`` the cells already in ``out/uci_cells.jsonl`` from
    a run with the same seed, mode, tuning and protocol version are kept and only the missing ones
    run: a stopped run goes on, or a 5-split run grows to 10, with the numbers a single run would
    give.
    Every cell carries a checksum of its split's data (``data_sha256``: of the split's files); a
    resumed cell whose split's data has changed since is refused with an error that names the data
    set and split, before anything runs.  ``out`` must be a new or empty folder or one that a run
    of this bench wrote: a folder of other files is refused, as is a path that cannot be written.

    ``protocol`` replaces the bench's (:data:`~bnnkit.bench.uci.protocol.FULL_PROTOCOL`, or
    ``QUICK_PROTOCOL`` with ``quick``); one that differs from it must carry another ``version``.

    ``split_kind`` picks the splits: ``"random"``, the layout's own index files (the standard
    splits of the known sets), or ``"gap"`` / ``"tail"``, one split per input dimension made from
    the set's data by :mod:`bnnkit.data.splits` (the middle third of the rows sorted by it held
    out, or its top and bottom sixths; a dimension with nothing of its own held out is skipped, so
    a set has at most ``d`` of them).  Every cell records its ``split_kind``; ``resume`` and
    ``from_cells`` take only cells of the run's kind.  Every cell also reports ``coverage_95``, the
    share of test targets inside the central 95 % predictive interval.
    """
    requested = list(methods)
    cfg = _config(protocol, quick, tune)
    methods = canonical_methods(requested, METHODS, cfg["version"])
    check_split_kind(split_kind)
    _check_splits(splits, first_split)
    names = [uci_dataset_name(d) for d in datasets]  # an own set's name is checked before anything runs
    if from_cells is not None:
        if resume:
            raise BnnkitError(
                "from_cells rebuilds the tables and runs nothing, resume runs the missing cells: pass one."
            )
        if first_split:
            raise BnnkitError("from_cells rebuilds the tables from every split present: drop first_split.")
        cells = _read_cells(
            Path(from_cells), datasets, methods, log, seed, quick, tune, cfg["version"], split_kind=split_kind
        )
        out = output_folder(out, OUTPUT_MARKS, "bnnkit bench uci")
    else:
        if split_kind == "random":
            sources = [_folder_source(n, root) for n in names]
            for name in names:  # an own folder's layout is checked before anything runs or is written
                if not is_known_uci(name):
                    for split in range(first_split, min(splits, uci_num_splits(name, root=root))):
                        load_uci(name, split, root=root)
        else:
            sources = [_kind_source(n, root, split_kind) for n in names]
            for source in sources:  # each set's data is read and split before anything runs or is written
                source.num_splits()
        out = output_folder(out, OUTPUT_MARKS, "bnnkit bench uci")  # before anything runs or is written
        cells = _run_cells(
            sources, methods, cfg, splits, first_split, out, quick, seed, progress, log, tune, resume
        )
    report = _report(
        cells,
        datasets,
        methods,
        splits,
        quick,
        seed,
        cfg,
        requested,
        rebuilt=from_cells is not None,
        first_split=first_split,
        root=root,
        split_kind=split_kind,
    )
    _write(out, report, cells)
    return report


def run_uci_arrays(
    x: Any,
    y: Any,
    splits: int | Sequence[tuple[Any, Any]] = 10,
    methods: Sequence[str] = ("default", "ensemble", "mcdropout", "laplace", "bbb"),
    *,
    name: str = "arrays",
    out: str | Path = "bnnkit-out/uci",
    quick: bool = False,
    seed: int = 0,
    progress: bool = True,
    log: Callable[[str], None] = print,
    tune: bool = False,
    resume: bool = False,
    test_fraction: float = 0.1,
    protocol: UCIProtocol | None = None,
    split_kind: str = "random",
) -> dict[str, Any]:
    """The UCI benchmark's protocol on a regression set held in memory: the report, records, tables
    and plot that :func:`run_uci` writes for a UCI-layout folder, from ``x`` ``[n, d]`` and ``y``
    ``[n]`` (numpy arrays, tensors or lists, in original units).

    ``splits`` is a list of ``(train_rows, test_rows)`` index pairs, or a number ``k`` of random
    splits with ``test_fraction`` of the rows held out, drawn from a generator seeded with ``seed``
    (see :meth:`bnnkit.data.uci.UCIData.from_arrays`).  ``name`` labels the rows and the cells (pick
    one per data set: ``resume`` reuses the cells in ``out/uci_cells.jsonl`` of this name, seed,
    mode and protocol; a known set's name is refused).  Each split is standardised with its training
    statistics; the metrics are given in standardised and original units.  ``methods`` defaults to
    the command line's.  ``split_kind="gap"`` or ``"tail"`` makes the splits by input dimension
    instead (:mod:`bnnkit.data.splits`; ``splits`` is then left at its default or a number, the
    most of them to run).  The other arguments are those of :func:`run_uci`.

    Example::

        from bnnkit.bench.uci import run_uci_arrays
        report = run_uci_arrays(x, y, splits=5, methods=["mcdropout", "sghmc"], name="mydata")
        print(report["markdown"])
    """
    requested = list(methods)
    cfg = _config(protocol, quick, tune)
    methods = canonical_methods(requested, METHODS, cfg["version"])
    if is_known_uci(name):
        # arrays are not checked against the published data, so they must not pass for a known set
        # (its rows would get the published numbers beside them)
        raise BnnkitError(
            f"name={name!r} is a known UCI data set; arrays in memory run under a name of their own "
            "(run_uci runs the known sets from their checksummed files)."
        )
    check_split_kind(split_kind)
    if split_kind == "random":
        data = UCIData.from_arrays(x, y, splits, name=name, test_fraction=test_fraction, seed=seed)
    else:
        if isinstance(splits, bool) or not isinstance(splits, (int, np.integer)) or splits < 1:
            raise BnnkitError(
                f"with split_kind={split_kind!r} the splits are made by input dimension: splits must be a "
                f"number (the most of them to run), got {splits!r}."
            )
        pairs = split_rows(x, split_kind)[: int(splits)]
        data = UCIData.from_arrays(x, y, pairs, name=name)
    out = output_folder(out, OUTPUT_MARKS, "bnnkit bench uci")
    source = _arrays_source(data, split_kind)
    n = data.num_splits
    cells = _run_cells([source], methods, cfg, n, 0, out, quick, seed, progress, log, tune, resume)
    command = (
        f"bnnkit.bench.uci.run_uci_arrays(x, y, splits={splits if isinstance(splits, int) else n}, "
        f"methods={requested}, name={data.name!r}"
        + (", quick=True" if quick else "")
        + (", tune=True" if tune else "")
        + (f", seed={seed}" if seed else "")
        + (f", split_kind={split_kind!r}" if split_kind != "random" else "")
        + ")"
        + ("" if isinstance(splits, int) else " with the caller's splits")
        + f" on {data.x.shape[0]} rows x {data.x.shape[1]} inputs"
    )
    report = _report(
        cells, [data.name], methods, n, quick, seed, cfg, requested, command=command, split_kind=split_kind
    )
    _write(out, report, cells)
    return report


def _check_splits(splits: int, first_split: int) -> None:
    if splits < 1:
        raise BnnkitError(f"splits must be >= 1, got {splits}.")
    if not 0 <= first_split < splits:
        raise BnnkitError(
            f"first_split must lie in 0..{splits - 1} (splits - 1), got {first_split}; it is the index of "
            "the first split to run, and splits the index after the last."
        )


def _config(protocol: UCIProtocol | None, quick: bool, tune: bool) -> dict[str, Any]:
    """The run's protocol as the dict the runner reads (the bench's unless ``protocol`` is given)."""
    if protocol is None:
        protocol = stock_protocol(quick)
    elif not isinstance(protocol, UCIProtocol):
        raise BnnkitError(f"protocol must be a bnnkit.bench.uci.UCIProtocol, got {type(protocol).__name__}.")
    check_protocol(protocol, quick)
    return protocol.config(tune)


bench_config = _config  # the public name (experiments/ and benchmarks/ use it)


def _run_cells(
    sources: Sequence[_Source],
    methods: Sequence[str],
    cfg: dict[str, Any],
    splits: int,
    first_split: int,
    out: Path,
    quick: bool,
    seed: int,
    progress: bool,
    log: Callable[[str], None],
    tune: bool,
    resume: bool,
) -> list[dict[str, Any]]:
    """Run every missing cell of ``sources`` x splits ``first_split..splits-1`` x ``methods``; each
    finished cell is appended to ``out/uci_cells.jsonl`` at once, so a stop loses only the cell in
    progress.  Returns the cells, resumed ones included, in data set, split, method order.
    The sources are of one kind of split (``source.kind``): cells of another are never resumed."""
    from ...functional import GPPrior

    version = cfg["version"]
    kinds = {source.kind for source in sources}
    if len(kinds) > 1:  # pragma: no cover - the entry points build sources of one kind
        raise BnnkitError(f"one run runs one kind of split, got {sorted(kinds)}.")
    kind = kinds.pop() if kinds else "random"
    cells: list[dict[str, Any]] = []
    partial = out / CELLS_FILE  # one line per finished cell: nothing is lost if a run stops
    done: dict[tuple, dict[str, Any]] = {}
    if resume and partial.is_file():
        kept = read_records(partial, log)
        other_kind = 0
        for c in kept:
            if _same_run(c, seed, quick, tune, version, split_kind=kind):
                done[(c["dataset"], c["split"], c["method"])] = c
            elif c.get("split_kind", "random") != kind:
                other_kind += 1
        if other_kind:
            log(
                f"{partial}: {other_kind} cell(s) of other kinds of split than {kind!r} are kept in the file "
                "but not resumed (their split numbers are other splits)"
            )
        # before anything runs or is written: a kept cell of data that has changed is refused
        _check_resumed(done, sources, methods, splits, first_split, partial, log)
        partial.write_text("".join(json.dumps(c) + "\n" for c in kept))  # drop a line cut short
    else:
        start_records(partial, log)
    for source in sources:
        name = source.name
        available = source.num_splits()
        if splits > available:  # protein has 5 standard splits, the others 20
            what = (
                "standard splits"
                if kind == "random"
                else f"{kind} splits (one per input dimension that gives one)"
            )
            log(f"{name} has only {available} {what}: splits {available}-{splits - 1} are skipped.")
        for split in range(first_split, min(splits, available)):
            todo = [m for m in methods if (name, split, m) not in done]
            for m in methods:
                if m not in todo:
                    cells.append(done[(name, split, m)])
            if not todo:
                continue
            if len(todo) < len(methods):
                log(
                    f"{name} split {split}: resumed {len(methods) - len(todo)} cell(s), running {', '.join(todo)}"
                )
            data = source.load(split)
            digest = source.checksum(split)
            if cfg["max_rows"] is not None and data.x_train.shape[0] > cfg["max_rows"]:
                data = _subsample(data, cfg["max_rows"])
            t0 = time.perf_counter()
            gp = GPPrior("rbf", input_dim=data.x_train.shape[1], jitter=1e-4)
            fitted: dict[str, Any] = {"num_points": None, "starts": None}
            noise = gp_seconds = None
            # The samplers of the Gaussian weight prior neither use the GP nor its noise.
            if any(m not in NO_GP_NEEDED for m in todo):
                fitted = _fit_split_gp(gp, data, cfg, seed + split)
                noise = _gp_noise_sd(fitted, cfg)
                gp_seconds = time.perf_counter() - t0
            for method in todo:
                t0 = time.perf_counter()
                post, s = _run_method(method, data, cfg, noise, gp, seed + split, progress)
                seconds = time.perf_counter() - t0
                pred = predictive(post, s, data.x_test)
                cell = {
                    "dataset": name,
                    "split": split,
                    "method": method,
                    "seed": seed + split,
                    DATA_KEY: digest,
                    "split_kind": kind,
                    "split_dim": source.dim(split),
                    **test_scores(pred, data),
                    "coverage_95": interval_coverage(pred, data.y_test),
                    "seconds": seconds,
                    "gp_fit_seconds": gp_seconds,
                    "noise_std_standardised": noise,
                    "gp_fit_rows": fitted["num_points"],
                    "gp_fit_starts": fitted["starts"],
                    "step_size": s.config.get("step_size_used") if method in SG_METHODS else None,
                    # the tuning chains' table (step, held-out NLL, stationarity): the choice can be
                    # checked, or remade under another rule, without running them again
                    "tuning": s.config.get("tuning") if method in SG_METHODS else None,
                    "epochs": _epochs(cfg[method], data.x_train.shape[0], cfg)
                    if method in VI_METHODS
                    else None,
                    **_settings(method, quick, tune, version),
                }
                conv = s.config.get("convergence") if isinstance(getattr(s, "config", None), dict) else None
                # the adaptive table: function-space R-hat / ESS, what ended the run (csgld, protocol 9,
                # and sghmc, protocol 10: every rung of its ladder; sghmc's kept window too)
                if conv:
                    cell.update(
                        {
                            k: conv.get(k)
                            for k in (
                                "rhat",
                                "ess",
                                "draws_per_chain",
                                "stopped",
                                "map_steps",
                                "ladder",
                                "peak",
                                "window",
                            )
                            if k != "window" or k in conv  # csgld's cells have no window
                        }
                    )
                cells.append(cell)
                append_record(partial, cell)
                if not (math.isfinite(cell["rmse_std"]) and math.isfinite(cell["nll_std"])):
                    log(
                        f"{name} split {split} {method:9s} diverged: non-finite predictions ({seconds:.0f} s)"
                    )
                    continue
                log(
                    f"{name} split {split} {method:9s} RMSE {cell['rmse_std']:.3f} NLL {cell['nll_std']:.3f} "
                    f"(standardised) | RMSE {cell['rmse']:.3f} NLL {cell['nll']:.3f} (original) {seconds:.0f} s"
                )
    return cells


def interval_coverage(pred: Any, y: torch.Tensor, level: float = 0.95) -> float | None:
    """The share of targets ``y`` inside the central ``level`` interval of the predictive ``pred``
    (``pred.interval(level)``: a Gaussian with the predictive's mean and total variance, for the
    samplers' mixtures as for Laplace); None where the predictive offers no interval, nan where its
    bounds are not finite (a diverged chain).  The share is the same in standardised and original
    units."""
    if not callable(getattr(pred, "interval", None)):
        return None
    lo, hi = pred.interval(level)
    if not (bool(torch.isfinite(lo).all()) and bool(torch.isfinite(hi).all())):
        return float("nan")
    y = y.to(lo.dtype)
    return float(((y >= lo) & (y <= hi)).to(torch.float64).mean())


def _check_resumed(
    done: dict[tuple, dict[str, Any]],
    sources: Sequence[_Source],
    methods: Sequence[str],
    splits: int,
    first_split: int,
    path: Path,
    log: Callable[[str], None],
) -> None:
    """Refuse the resumed cells (``done``, from ``path``) of a split whose data is not what it was
    when they were computed (:func:`~bnnkit.bench.uci.records.check_resumed_data`)."""
    unchecked = 0
    for source in sources:
        if not any(key[0] == source.name for key in done):
            continue
        for split in range(first_split, min(splits, source.num_splits())):
            cells = [done[(source.name, split, m)] for m in methods if (source.name, split, m) in done]
            if cells:
                digest = source.checksum(split)
                unchecked += check_resumed_data(cells, source.name, split, digest, source.where, path)
    if unchecked:
        log(
            f"{path}: {unchecked} resumed cell(s) carry no data checksum (written by an older bnnkit): "
            "kept without checking that their data is the same"
        )


def _fit_split_gp(gp: Any, data: UCISplit, cfg: dict[str, Any], seed: int) -> dict[str, Any]:
    """Fit ``gp`` (the split's RBF ``GPPrior``) to the split's training rows as every functional
    cell of the split gets it (``seed``: the cells', ``seed + split``); returns ``gp.fit``'s report.
    ``experiments/uci_gp_regression.py`` predicts with the same fit."""
    return gp.fit(
        data.x_train,
        data.y_train,
        num_steps=cfg["gp_fit_steps"],
        max_points=cfg["gp_fit_max_points"],
        generator=torch.Generator().manual_seed(seed),
        progress=False,
    )


fit_split_gp = _fit_split_gp  # the public name (experiments/ and benchmarks/ use it)


def _gp_noise_sd(fitted: dict[str, Any], cfg: dict[str, Any]) -> float:
    """The noise sd (standardised units) of :func:`_fit_split_gp`'s fit, floored at the protocol's
    ``noise_floor``: the VI baselines' fixed noise."""
    return max(math.sqrt(fitted["noise_variance"]), cfg["noise_floor"])


gp_noise_sd = _gp_noise_sd  # the public name (experiments/ and benchmarks/ use it)


def _subsample(data: UCISplit, rows: int) -> UCISplit:
    """The first ``rows`` training rows of ``data`` (quick mode); the test rows stay."""
    return dataclasses.replace(data, x_train=data.x_train[:rows], y_train=data.y_train[:rows])
