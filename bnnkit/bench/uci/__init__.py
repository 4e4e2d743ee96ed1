"""UCI regression benchmark (functional SG-MCMC paper, section 5.2; docs/fsgmcmc_design.md 9.2).

The package is split by what changes together:

- :mod:`~bnnkit.bench.uci.protocol`: :class:`UCIProtocol`, one frozen, versioned config of every
  constant of the protocol (its docstring states the protocol), and the rules derived from it
  (step sizes scaled to N, the VI step cap);
- :mod:`~bnnkit.bench.uci.inference`: how each method runs on one split;
- :mod:`~bnnkit.bench.uci.runner`: :func:`run_uci` (named sets: the nine known ones, checksummed,
  or any folder in the UCI layout under ``<root>/uci/<NAME>/``) and :func:`run_uci_arrays` (arrays
  in memory), both writing one record per finished cell;
- :mod:`~bnnkit.bench.uci.records`: the cell records and which of them a run may reuse;
- :mod:`~bnnkit.bench.uci.report`: the markdown table (the paper's standardised numbers and the
  published original-unit numbers beside bnnkit's), ``uci.json``, ``uci.csv`` and ``uci.png``.

Metrics per split: test RMSE and test NLL (``-mean log p(y*)`` under the mixture over draws), in
standardised units (the paper's scale) and in original units.  Tables give mean +- standard
error over splits.

The names below are those the package has always exported (the tests, the CLI and the image
bench import them from here).
"""

# The private helpers are re-exported too: the tests (and scripts written against the single module
# this package replaced) reach them as bnnkit.bench.uci._name.
from ...data.uci import UCIData, resolve_uci_name, uci_num_splits
from .inference import (  # noqa: F401
    _choose_step,
    _run_method,
    _run_method_seeded,
    _sg_setup,
    _tuned_step_size,
    predictive,
)
from .protocol import (  # noqa: F401
    ALIASES,
    DEFAULTS,
    FULL_PROTOCOL,
    GP_FIT_MAX_POINTS,
    METHODS,
    NO_GP_SUBSET,
    PROTOCOL,
    QUICK,
    QUICK_PROTOCOL,
    QUICK_TUNE,
    SG_METHODS,
    TUNE,
    VI_METHODS,
    UCIProtocol,
    _epochs,
    _rows_ratio,
    adaptive_methods,
    canonical_methods,
    default_step_size,
    fit_rungs_protocol,
    friction,
    gibbs_csgld_protocol,
    stock_protocol,
)
from .records import _read_cells, _same_run, _settings  # noqa: F401
from .report import PAPER, _mean_se, _method_label, _plot, _report, _write  # noqa: F401
from .runner import _subsample, run_uci, run_uci_arrays  # noqa: F401

__all__ = [
    "ALIASES",
    "DEFAULTS",
    "FULL_PROTOCOL",
    "GP_FIT_MAX_POINTS",
    "METHODS",
    "NO_GP_SUBSET",
    "PAPER",
    "PROTOCOL",
    "QUICK",
    "QUICK_PROTOCOL",
    "QUICK_TUNE",
    "SG_METHODS",
    "TUNE",
    "VI_METHODS",
    "UCIData",
    "UCIProtocol",
    "canonical_methods",
    "default_step_size",
    "friction",
    "predictive",
    "resolve_uci_name",
    "run_uci",
    "run_uci_arrays",
    "stock_protocol",
    "gibbs_csgld_protocol",
    "fit_rungs_protocol",
    "uci_num_splits",
]
