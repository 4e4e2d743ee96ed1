"""UCI regression benchmark: every method of :func:`bnnkit.fit` (:data:`bnnkit.api.METHODS`) with its
defaults, on the standard splits of the UCI sets (or gap / tail splits, or the user's own data).

- :mod:`~bnnkit.bench.uci.protocol`: :class:`UCIProtocol`, the one frozen config (network, batch,
  what ``--quick`` means) and the protocol's statement;
- :mod:`~bnnkit.bench.uci.cell`: one cell, ``bnnkit.fit`` on one split, and its scores;
- :mod:`~bnnkit.bench.uci.runner`: :func:`run_uci` (named sets: the nine known ones, checksummed,
  or any folder in the UCI layout under ``<root>/uci/<NAME>/``) and :func:`run_uci_arrays` (arrays
  in memory), both writing one record per finished cell;
- :mod:`~bnnkit.bench.uci.records`: the cell records and which of them a run may reuse;
- :mod:`~bnnkit.bench.uci.report`: the markdown table (the paper's standardised numbers and the
  published original-unit numbers beside bnnkit's), ``uci.json``, ``uci.csv`` and ``uci.png``.

Metrics per split: test RMSE, test NLL (``-mean log p(y*)`` under the predictive) and 95 % interval
coverage, in standardised units (the paper's scale) and in original units; tables give mean +-
standard error over splits.  Tables of earlier protocols are reproduced from the commit and command
that made them.
"""

from ...data.uci import UCIData, resolve_uci_name, uci_num_splits
from ..methods import canonical_methods  # the image bench's, re-exported where it has always read it
from .cell import interval_coverage, predictive
from .protocol import DEFAULT_METHODS, FULL, PROTOCOL, QUICK, UCIProtocol
from .report import PAPER, make_report
from .runner import run_uci, run_uci_arrays

__all__ = [
    "DEFAULT_METHODS",
    "FULL",
    "PAPER",
    "PROTOCOL",
    "QUICK",
    "UCIData",
    "UCIProtocol",
    "canonical_methods",
    "interval_coverage",
    "make_report",
    "predictive",
    "resolve_uci_name",
    "run_uci",
    "run_uci_arrays",
    "uci_num_splits",
]
