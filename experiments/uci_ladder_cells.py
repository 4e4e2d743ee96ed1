"""Bring csgld ladder cells (protocol 9) written before the ladder's final form up to it, checking
that their numbers stand.

Two things changed while the protocol-9 cells of docs/results/uci/ were running: a rung's chains
came to count as agreeing when R-hat <= 1.1 whatever the ESS (the ESS target had first been part of
it), and cells came to record the peak they kept (``peak``).  The draws of a rung do not depend on
either: this script recomputes each rung's ``converged`` flag, checks that the rung the cell kept is
the one the final rule keeps (else the cell must be rerun, and it says so), and fills ``peak``.
``--ran-on TEXT`` tags the cells with the machine they ran on (cells run elsewhere than the other
cells of a table).

    python -m experiments.uci_ladder_cells CELLS.jsonl --out FIXED.jsonl [--ran-on "..."]
"""

# Retired in issue 44: this script ran on the UCI bench's own method runners and versioned
# protocols, which `bnnkit bench uci` no longer has (every method now runs through bnnkit.fit).
raise SystemExit(
    "experiments/uci_ladder_cells.py needs the UCI bench's old method runners, removed in issue 44; run it at "
    "commit 69871e1, the last that ran it: git checkout 69871e1 && python -m experiments.uci_ladder_cells ..."
)
