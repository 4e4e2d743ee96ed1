"""The bandit's run records: which record is the run a command plays, and a run as the report holds it."""

from __future__ import annotations

from typing import Any

from .protocol import PROTOCOL


def same_run(
    r: dict[str, Any], method: str, p: float, seed: int, steps: int, cfg: dict[str, Any], base: dict[str, Any]
) -> bool:
    """Whether the record ``r`` is the run this command plays for ``(method, p, seed)``.

    A record written before a key joined :data:`DEFAULTS` lacks that key; it is read with the key's
    default (``base``), since a new key's default keeps the earlier behaviour.  A key the record has
    and the configuration does not (one since removed) never matches, nor does a record of another
    protocol version (:data:`~bnnkit.bench.bandit.protocol.PROTOCOL`; none: version 1).
    """
    stored = r.get("config")
    if not isinstance(stored, dict) or r.get("protocol", 1) != PROTOCOL:
        return False
    return (r.get("method"), r.get("pattern"), r.get("seed"), r.get("steps"), {**base, **stored}) == (
        method,
        p,
        seed,
        steps,
        cfg,
    )


def public_record(record: dict[str, Any]) -> dict[str, Any]:
    """A run as the report holds it: the record less its configuration (the report has one)."""
    return {k: v for k, v in record.items() if k not in ("config", "protocol", "bnnkit_version")}
