"""Choose / confirm the functional prior's kernel on gap and tail splits: the bench's fsgld / fsghmc
cells (``bnnkit.bench.uci.cell.run_cell``, the UCI protocol's network, seed and standardisation)
with ``bnnkit.fit(..., kernel=K)`` (or a named variant's options, :data:`VARIANTS`), one JSON line per (set, kind, split, method, kernel) with the
held-out region's RMSE / NLL (original units), 95 % coverage and seconds.  With ``--kernels rbf``
a line reproduces the bench's own cell of that split (the check that this is the bench's cell).

    python -m experiments.functional_kernel --datasets yacht,energy --kinds gap,tail \
        --methods fsgld,fsghmc --kernels rbf+linear --out experiments/results/functional_kernel_choose.jsonl

No test label is read by a fit; the held-out rows are scored once, after it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from types import MappingProxyType

import torch

from bnnkit.bench.uci.cell import run_cell
from bnnkit.bench.uci.protocol import FULL, PROTOCOL
from bnnkit.data import load_uci_columns
from bnnkit.data.splits import split_rows
from bnnkit.data.uci import UCIData, uci_dataset_name
from bnnkit.functional import MeasurementPoints


def splits_of(name: str, kind: str, root: str) -> UCIData:
    x, y = load_uci_columns(name, root=root)
    return UCIData.from_arrays(x, y, split_rows(x, kind), name=name)


def groups(datasets: str, kinds: str, root: str):
    """``(splits, kind)`` for every set of the comma-separated ``datasets`` and kind of ``kinds``."""
    for name in datasets.split(","):
        for kind in kinds.split(","):
            yield splits_of(uci_dataset_name(name), kind, root), kind


def emit(row: dict, path: str) -> None:
    """Print ``row`` and append it to the JSON-lines file ``path``."""
    print(json.dumps(row), flush=True)
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")


# named variants of the functional prior: fit options beyond the kernel
VARIANTS = {
    # the training inputs (at most 1,000) and 250 points uniform in their box widened by a quarter
    # of its range on each side: the prior constrains the network where the data say nothing
    "box250": {"box_points": 250, "box_margin": 0.25},
    # the RBF prior's hyperparameters fitted to 500 random training rows instead of 1,000
    "fit500": {"gp_points": 500},
    "factors4": {"prior_factors": 4},
    # 250 measurement points a step next to the data: a training row with one input moved past
    # its range, into a quarter of it (``edge_points``; experiments/edge_points.py)
    "edge250": {"edge_points": 250, "box_margin": 0.25},
    # 250 such points drawn once (seeded by the split) and kept with the training inputs
    # (``measure_at``; filled in by ``run``)
    "edge250fixed": {},
    # the same prior, 16 chains instead of 4 (a diagnosis: do more modes carry it beyond the data?)
    "chains16": {},
    # transductive, a diagnosis rather than a candidate: the held-out rows' inputs (never their
    # targets) added to the measurement points (``measure_at``; filled in by ``run``)
    "at_test": {},
}


def run(data: UCIData, kind: str, split: int, method: str, kernel: str) -> dict:
    """``kernel`` is a kernel spec, or a name of VARIANTS (with the RBF kernel)."""
    d = data.split(split)
    extra = VARIANTS.get(kernel, {"kernel": kernel})
    if kernel == "at_test":
        extra = {"measure_at": d.x_test}
    elif kernel == "edge250fixed":
        edge = MeasurementPoints(num_from_data=0, num_uniform=0, num_edge=250, margin=0.25).bind(d.x_train)
        extra = {"measure_at": edge.sample(None, torch.Generator().manual_seed(split))}
    opts = MappingProxyType({method: MappingProxyType(extra)})
    cfg = FULL if kernel == "rbf" else dataclasses.replace(FULL, options=opts)
    if kernel == "chains16":
        cfg = dataclasses.replace(FULL, recipe=dataclasses.replace(FULL.recipe, chains=16))
    t0 = time.perf_counter()
    cell = run_cell(method, d, cfg, None, seed=split, progress=False)
    return {
        "dataset": data.name,
        "split_kind": kind,
        "split": split,
        "method": method,
        "kernel": kernel,
        "protocol": PROTOCOL,
        **{k: cell.get(k) for k in ("rmse", "nll", "coverage_95", "rhat", "seconds")},
        "wall": time.perf_counter() - t0,
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--datasets", default="yacht,energy")
    p.add_argument("--kinds", default="gap,tail")
    p.add_argument("--splits", default=None, help="e.g. 0,1 (default: all of the kind)")
    p.add_argument("--methods", default="fsgld,fsghmc")
    p.add_argument("--kernels", default="rbf+linear")
    p.add_argument("--data", default="../shared/data")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    for data, kind in groups(a.datasets, a.kinds, a.data):
        splits = range(data.num_splits) if a.splits is None else map(int, a.splits.split(","))
        for split in splits:
            for method in a.methods.split(","):
                for kernel in a.kernels.split(","):
                    emit(run(data, kind, split, method, kernel), a.out)


if __name__ == "__main__":
    main()
