"""The UCI benchmark's runner: every (data set, split, method) cell of a run, written one JSON line at
a time as it finishes, then the report; :func:`run_uci` for named sets (the known ones, checksummed,
or folders in the UCI layout), :func:`run_uci_arrays` for arrays in memory."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...api.methods import METHODS
from ...core.errors import BnnkitError
from ...core.files import append_record, output_folder, reopen_records
from ...data.sources import SplitSource, arrays_source, folder_source, kind_source
from ...data.splits import check_split_kind, split_rows
from ...data.uci import UCIData, UCISplit, is_known_uci, load_uci, uci_dataset_name, uci_num_splits
from ..methods import canonical_methods
from .cell import run_cell, split_gp
from .protocol import DEFAULT_METHODS, FULL, PROTOCOL, QUICK, uses_gp_noise
from .records import (
    CELLS_FILE,
    DATA_KEY,
    OUTPUT_MARKS,
    read_cells,
    same_run,
    seconds_total,
)
from .report import make_report, write


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
    from_cells: str | Path | None = None,
    resume: bool = False,
    first_split: int = 0,
    split_kind: str = "random",
) -> dict[str, Any]:
    """Run ``methods`` (of :data:`bnnkit.api.methods.METHODS`, each cell ``bnnkit.fit`` with its
    defaults) on ``datasets`` (known UCI names, checksummed, or the user's own folders
    ``<root>/uci/<NAME>/`` in the same layout) for splits ``first_split..splits-1`` (split s uses
    seed ``seed + s``); write ``uci.md``, ``uci.csv``, ``uci.json`` and ``uci.png``.

    ``from_cells`` runs nothing and rebuilds the tables from a ``uci_cells.jsonl`` of the same
    arguments (joining runs of different ``first_split``); ``resume`` keeps the cells already in
    ``out/uci_cells.jsonl`` of the same seed, mode, protocol and kind of split and runs the missing
    ones, refusing a cell whose data checksum (``data_sha256``) differs from its split's now.
    ``split_kind``: ``"random"`` (the layout's index files), ``"gap"`` or ``"tail"`` (one split per
    input dimension, :mod:`bnnkit.data.splits`).
    """
    methods = canonical_methods(methods, METHODS)
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
        cells = read_cells(Path(from_cells), datasets, methods, log, seed, quick, split_kind)
        out = output_folder(out, OUTPUT_MARKS, "bnnkit bench uci")
    else:
        if split_kind == "random":
            sources = [folder_source(n, root) for n in names]
            for name in names:  # an own folder's layout is checked before anything runs or is written
                if not is_known_uci(name):
                    for split in range(first_split, min(splits, uci_num_splits(name, root=root))):
                        load_uci(name, split, root=root)
        else:  # each set's data is read and split before anything runs or is written
            sources = [kind_source(n, root, split_kind) for n in names]
        out = output_folder(out, OUTPUT_MARKS, "bnnkit bench uci")  # before anything runs or is written
        cells = _run_cells(sources, methods, splits, first_split, out, quick, seed, progress, log, resume)
    own_data = root is not None and not all(is_known_uci(d) for d in datasets)
    command = (
        f"bnnkit bench uci --datasets {','.join(datasets)} --methods {','.join(methods)} --splits {splits}"
        + (f" --first-split {first_split}" if first_split else "")
        + (f" --data {root}" if own_data else "")
        + (" --quick" if quick else "")
        + (f" --seed {seed}" if seed else "")
        + ("" if split_kind == "random" else f" --split-kind {split_kind}")
    )
    report = make_report(cells, datasets, methods, splits, quick, seed, command, from_cells is not None,
                         first_split, split_kind)  # fmt: skip
    write(out, report, cells)
    return report


def run_uci_arrays(
    x: Any,
    y: Any,
    splits: int | Sequence[tuple[Any, Any]] = 10,
    methods: Sequence[str] = DEFAULT_METHODS,
    *,
    name: str = "arrays",
    out: str | Path = "bnnkit-out/uci",
    quick: bool = False,
    seed: int = 0,
    progress: bool = True,
    log: Callable[[str], None] = print,
    resume: bool = False,
    test_fraction: float = 0.1,
    split_kind: str = "random",
) -> dict[str, Any]:
    """:func:`run_uci` on a regression set in memory, ``x`` ``[n, d]`` and ``y`` ``[n]`` in original
    units.  ``splits``: ``(train_rows, test_rows)`` index pairs, or a number of random splits with
    ``test_fraction`` held out, drawn with ``seed`` (:meth:`~bnnkit.data.uci.UCIData.from_arrays`);
    with ``split_kind="gap"`` or ``"tail"`` the most splits to run.  ``name`` labels the cells (a
    known set's name is refused).

    Example::

        from bnnkit.bench.uci import run_uci_arrays
        report = run_uci_arrays(x, y, splits=5, methods=["mcdropout", "sghmc"], name="mydata")
        print(report["markdown"])
    """
    methods = canonical_methods(methods, METHODS)
    if is_known_uci(name):
        # arrays are not checked against the published data, so they must not pass for a known set
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
        data = UCIData.from_arrays(x, y, split_rows(x, split_kind)[: int(splits)], name=name)
    out = output_folder(out, OUTPUT_MARKS, "bnnkit bench uci")
    n = data.num_splits
    cells = _run_cells(
        [arrays_source(data, split_kind)], methods, n, 0, out, quick, seed, progress, log, resume
    )
    command = (
        f"bnnkit.bench.uci.run_uci_arrays(x, y, splits={splits if isinstance(splits, int) else n}, "
        f"methods={list(methods)}, name={data.name!r}"
        + (", quick=True" if quick else "")
        + (f", seed={seed}" if seed else "")
        + (f", split_kind={split_kind!r}" if split_kind != "random" else "")
        + ")"
        + ("" if isinstance(splits, int) else " with the caller's splits")
        + f" on {data.x.shape[0]} rows x {data.x.shape[1]} inputs"
    )
    report = make_report(cells, [data.name], methods, n, quick, seed, command, split_kind=split_kind)
    write(out, report, cells)
    return report


def _check_splits(splits: int, first_split: int) -> None:
    if splits < 1:
        raise BnnkitError(f"splits must be >= 1, got {splits}.")
    if not 0 <= first_split < splits:
        raise BnnkitError(
            f"first_split must lie in 0..{splits - 1} (splits - 1), got {first_split}; it is the index of "
            "the first split to run, and splits the index after the last."
        )


def _run_cells(
    sources: Sequence[SplitSource],
    methods: Sequence[str],
    splits: int,
    first_split: int,
    out: Path,
    quick: bool,
    seed: int,
    progress: bool,
    log: Callable[[str], None],
    resume: bool,
) -> list[dict[str, Any]]:
    """Run every missing cell of ``sources`` (of one kind of split) x splits ``first_split..splits-1``
    x ``methods``, each appended to ``out/uci_cells.jsonl`` as it finishes; returns the cells,
    resumed ones included, in data set, split, method order."""
    kind = sources[0].kind if sources else "random"
    cells: list[dict[str, Any]] = []
    partial = out / CELLS_FILE

    done: dict[tuple, dict[str, Any]] = {}  # the resumed cells of this run, by (set, split, method)

    def check(kept: list[dict[str, Any]]) -> None:  # before reopen_records rewrites the file
        done.update(
            ((c["dataset"], c["split"], c["method"]), c) for c in kept if same_run(c, seed, quick, kind)
        )
        _check_resumed(kept, done, partial, sources, methods, splits, first_split, kind, log)

    reopen_records(partial, resume, log, check)
    for source in sources:
        available = source.num_splits()
        if splits > available:  # protein has 5 standard splits, the others 20
            what = (
                "standard splits"
                if kind == "random"
                else f"{kind} splits (one per input dimension that gives one)"
            )
            log(f"{source.name} has only {available} {what}: splits {available}-{splits - 1} are skipped.")
        for split in range(first_split, min(splits, available)):
            todo = [m for m in methods if (source.name, split, m) not in done]
            if 0 < len(todo) < len(methods):
                log(
                    f"{source.name} split {split}: resumed {len(methods) - len(todo)} cell(s), running {', '.join(todo)}"
                )
            fresh = _run_split(source, split, todo, quick, seed + split, progress, log) if todo else {}
            for m in methods:
                cell = done.get((source.name, split, m)) or fresh[m]
                cells.append(cell)
                if m in fresh:
                    append_record(partial, cell)
    return cells


def _run_split(
    source: SplitSource,
    split: int,
    methods: Sequence[str],
    quick: bool,
    seed: int,
    progress: bool,
    log: Callable,
) -> dict[str, dict[str, Any]]:
    """The cells of ``methods`` on one split; the split's GP is fitted once, if one of them takes its noise."""
    cfg = QUICK if quick else FULL
    data = source.load(split)
    if cfg.max_rows is not None and data.x_train.shape[0] > cfg.max_rows:
        data = _subsample(data, cfg.max_rows)
    gp: dict[str, Any] = {}
    if any(uses_gp_noise(m) for m in methods):
        noise, fitted, gp_seconds = split_gp(data, cfg, seed)
        gp = {"noise_std_standardised": noise, "gp_fit_seconds": gp_seconds,
              "gp_fit_rows": fitted["num_points"], "gp_fit_starts": fitted["starts"]}  # fmt: skip
    digest = source.checksum(split)
    out = {}
    for method in methods:
        mine = gp if uses_gp_noise(method) else {}
        cell = {"dataset": source.name, "split": split, "method": method, "seed": seed, DATA_KEY: digest,
                "split_kind": source.kind, "split_dim": source.dim(split), "quick": quick, "protocol": PROTOCOL,
                **run_cell(method, data, cfg, mine.get("noise_std_standardised"), seed, progress), **mine}  # fmt: skip
        cell["seconds_total"] = seconds_total(cell)
        out[method] = cell
        if not (math.isfinite(cell["rmse_std"]) and math.isfinite(cell["nll_std"])):
            log(
                f"{source.name} split {split} {method:9s} diverged: non-finite predictions ({cell['seconds']:.0f} s)"
            )
        else:
            log(
                f"{source.name} split {split} {method:9s} RMSE {cell['rmse_std']:.3f} NLL {cell['nll_std']:.3f} "
                f"(standardised) | RMSE {cell['rmse']:.3f} NLL {cell['nll']:.3f} (original) {cell['seconds']:.0f} s"
            )
    return out


def _check_resumed(
    kept: list[dict[str, Any]],
    done: dict[tuple, dict[str, Any]],
    partial: Path,
    sources: Sequence[SplitSource],
    methods: Sequence[str],
    splits: int,
    first_split: int,
    kind: str,
    log: Callable[[str], None],
) -> None:
    """Refuse the resumed cells ``done`` (of ``kept``, the cells of ``partial``) before anything
    runs where a split's data has changed since they were computed."""
    other_kind = sum(c.get("split_kind", "random") != kind for c in kept)
    if other_kind:
        log(
            f"{partial}: {other_kind} cell(s) of other kinds of split than {kind!r} are kept in the file "
            "but not resumed (their split numbers are other splits)"
        )
    unchecked = 0
    for source in sources:
        if not any(key[0] == source.name for key in done):
            continue
        for split in range(first_split, min(splits, source.num_splits())):
            mine = [done[(source.name, split, m)] for m in methods if (source.name, split, m) in done]
            digest = source.checksum(split) if mine else None
            for have in (c.get(DATA_KEY) for c in mine):
                unchecked += have is None
                if have is not None and have != digest:
                    raise BnnkitError(
                        f"{partial} holds cells of {source.name} split {split} computed on other data than "
                        f"{source.where} holds now (data checksum {have[:12]}... there, {digest[:12]}... now): "
                        "--resume would mix numbers of two data sets in one table.  Start afresh without "
                        f"--resume (the old cells are kept as {partial.name.removesuffix('.jsonl')}.previous.jsonl) "
                        "or pass another --out."
                    )
    if unchecked:
        log(
            f"{partial}: {unchecked} resumed cell(s) carry no data checksum (written by an older bnnkit): "
            "kept without checking that their data is the same"
        )


def _subsample(data: UCISplit, rows: int) -> UCISplit:
    """The first ``rows`` training rows of ``data`` (quick mode); the test rows stay."""
    return dataclasses.replace(data, x_train=data.x_train[:rows], y_train=data.y_train[:rows])
