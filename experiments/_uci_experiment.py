"""What the UCI experiment scripts share: their command line for running cells, and the run.

An experiment (``uci_csgld_gibbs``, ``uci_fit_rungs``) is one method under a protocol of its own
version; its cells are written and read as the bench's are (``--resume``, ``--from-cells``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import torch

from bnnkit.bench.uci import UCIProtocol, run_uci


def experiment_parser(doc: str, datasets: str, out: str) -> argparse.ArgumentParser:
    """The arguments every experiment takes (the script adds its own)."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--datasets", default=datasets)
    p.add_argument("--splits", type=int, default=10)
    p.add_argument("--first-split", type=int, default=0, help="skip the splits before this one")
    p.add_argument("--data", default=None)
    p.add_argument("--out", default=out)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--from-cells", default=None, metavar="JSONL")
    return p


def run_experiment(a: argparse.Namespace, method: str, protocol: Callable[[bool], UCIProtocol]) -> dict[str, Any]:
    """Run (or rebuild from ``--from-cells``) ``method``'s cells under ``protocol(quick)`` and print
    the report's tables."""
    torch.set_num_threads(a.threads)
    report = run_uci(
        [d for d in a.datasets.split(",") if d],
        [method],
        splits=a.splits,
        first_split=a.first_split,
        out=a.out,
        root=a.data,
        quick=a.quick,
        progress=False,
        resume=a.resume,
        from_cells=a.from_cells,
        protocol=protocol(a.quick),
    )
    print(report["markdown"])
    return report
