"""Streaming draws to disk in chunks, with checkpoints for exact resume.

Layout of an output directory::

    config.json                 the run's configuration (a resumed run must match it)
    chain_000/draws_000000.pt   positions [n, D] and per-draw stats, one file per chunk
    chain_000/checkpoint.pt     sampler state, adaptation state, generator state, iteration
    chain_000/done              written when the chain has all its draws

Files are written to a temporary name and renamed, so a crash never leaves a half-written file.
A chunk is written before the checkpoint that counts it; on resume any chunk the checkpoint does
not count is discarded and regenerated from the checkpointed generator, so the result is
bit-identical to an uninterrupted run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from .errors import BnnkitError


def _atomic_save(obj: Any, path: Path) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


class RunStore:
    def __init__(self, root: str | os.PathLike, config: dict):
        self.root = Path(root)
        self.config = json.loads(json.dumps(config, default=str))
        cfg_path = self.root / "config.json"
        if cfg_path.exists():
            old = json.loads(cfg_path.read_text())
            if old != self.config:
                diff = sorted(k for k in set(old) | set(self.config) if old.get(k) != self.config.get(k))
                raise BnnkitError(
                    f"output path {str(self.root)!r} already holds a run of another configuration "
                    f"(differs in: {', '.join(diff)}). Pass a new output path, or delete that directory "
                    "to start over."
                )
        elif self.root.exists() and any(self.root.iterdir()):
            raise BnnkitError(
                f"output path {str(self.root)!r} exists and is not a bnnkit run directory; choose an empty "
                "or new directory."
            )
        else:
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = cfg_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.config, indent=2, sort_keys=True))
            os.replace(tmp, cfg_path)

    def chain_dir(self, chain: int) -> Path:
        d = self.root / f"chain_{chain:03d}"
        d.mkdir(exist_ok=True)
        return d

    def is_done(self, chain: int) -> bool:
        return (self.chain_dir(chain) / "done").exists()

    def mark_done(self, chain: int) -> None:
        (self.chain_dir(chain) / "done").write_text("ok\n")

    def write_chunk(self, chain: int, index: int, positions: Tensor, stats: dict[str, Tensor]) -> None:
        _atomic_save(
            {"positions": positions, "stats": stats}, self.chain_dir(chain) / f"draws_{index:06d}.pt"
        )

    def save_checkpoint(self, chain: int, payload: dict) -> None:
        _atomic_save(payload, self.chain_dir(chain) / "checkpoint.pt")

    def load_checkpoint(self, chain: int) -> dict | None:
        p = self.chain_dir(chain) / "checkpoint.pt"
        if not p.exists():
            return None
        ckpt = torch.load(p, weights_only=False)
        for f in self.chunk_files(chain)[ckpt["num_chunks"] :]:
            f.unlink()  # written after the last checkpoint: regenerated on resume
        return ckpt

    def chunk_files(self, chain: int) -> list[Path]:
        return sorted(self.chain_dir(chain).glob("draws_*.pt"))

    def read_chain(self, chain: int) -> tuple[Tensor, dict[str, Tensor]]:
        chunks = [torch.load(f, weights_only=True, mmap=True) for f in self.chunk_files(chain)]
        positions = torch.cat([c["positions"] for c in chunks])
        stats = {k: torch.cat([c["stats"][k] for c in chunks]) for k in chunks[0]["stats"]}
        return positions, stats
