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

from __future__ import annotations

import argparse
import json

from bnnkit.bench.uci.inference import kept_rung
from bnnkit.bench.uci.protocol import FULL_PROTOCOL


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cells")
    ap.add_argument("--out", required=True)
    ap.add_argument("--ran-on", default=None)
    a = ap.parse_args()
    threshold = FULL_PROTOCOL.config()["adaptive"]["rhat"]
    out, bad = [], []
    for line in open(a.cells):
        c = json.loads(line)
        if c.get("method") == "csgld" and c.get("ladder"):
            rungs = c["ladder"]
            for r in rungs:
                r["converged"] = r["rhat"] <= threshold
            k = kept_rung(rungs, threshold)
            # the rungs run must end at the first agreeing one, and the cell's draws be the kept rung's
            ends_right = k == len(rungs) - 1 or not any(r["converged"] for r in rungs)
            if not ends_right or rungs[k]["rhat"] != c["rhat"]:
                bad.append((c["dataset"], c["split"]))
                continue
            c["peak"] = rungs[k]["peak"]
            if a.ran_on:
                c["ran_on"] = a.ran_on
        out.append(c)
    with open(a.out, "w") as f:
        f.writelines(json.dumps(c) + "\n" for c in out)
    print(
        f"{len(out)} cells written to {a.out}"
        + (f"; rerun these, the final rule keeps another rung: {bad}" if bad else "")
    )


if __name__ == "__main__":
    main()
