"""UCI regression benchmark: every method of :func:`bnnkit.fit` (:data:`bnnkit.api.METHODS`) with its
defaults, on the standard splits of the UCI sets (or gap / tail splits, or the user's own data):
:mod:`~bnnkit.bench.uci.protocol` (the frozen config), :mod:`~bnnkit.bench.uci.cell` (one cell),
:mod:`~bnnkit.bench.uci.runner`, :mod:`~bnnkit.bench.uci.records` and :mod:`~bnnkit.bench.uci.report`.
Metrics per split: test RMSE, NLL and 95 % interval coverage, in standardised and original units;
tables give mean +- standard error over splits."""

from ...data.uci import UCIData
from .cell import predictive
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
    "make_report",
    "predictive",
    "run_uci",
    "run_uci_arrays",
]
