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


def _tmp_name(path: Path) -> Path:
    # Unique per process: ranks of a chain-parallel job write into the same directory at once.
    return path.with_suffix(f"{path.suffix}.{os.getpid()}.tmp")


def _atomic_save(obj: Any, path: Path) -> None:
    tmp = _tmp_name(path)
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
        elif self.root.exists() and any(
            not p.name.startswith(("config.json", "chain_")) for p in self.root.iterdir()
        ):
            raise BnnkitError(
                f"output path {str(self.root)!r} exists and is not a bnnkit run directory; choose an empty "
                "or new directory."
            )
        else:
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = _tmp_name(cfg_path)
            tmp.write_text(json.dumps(self.config, indent=2, sort_keys=True))
            os.replace(tmp, cfg_path)

    @classmethod
    def open(cls, root: str | os.PathLike) -> RunStore:
        """An existing run directory, for reading (no configuration check)."""
        root = Path(root)
        cfg_path = root / "config.json"
        if not cfg_path.exists():
            raise BnnkitError(
                f"{str(root)!r} is not a bnnkit run directory (no config.json); pass the output= path of "
                "a bnnkit.sample run."
            )
        store = cls.__new__(cls)
        store.root = root
        store.config = json.loads(cfg_path.read_text())
        return store

    def done_chains(self) -> list[int]:
        """Indices of the chains that have all their draws."""
        return sorted(
            int(d.name[len("chain_") :]) for d in self.root.glob("chain_*") if (d / "done").exists()
        )

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

    def read_stats(self, chain: int) -> dict[str, Tensor]:
        """Per-draw statistics of a chain (small), without its positions."""
        chunks = [torch.load(f, weights_only=True, mmap=True) for f in self.chunk_files(chain)]
        if not chunks:
            raise BnnkitError(f"chain {chain} of {str(self.root)!r} has no draws yet; is the run finished?")
        return {k: torch.cat([c["stats"][k] for c in chunks]) for k in chunks[0]["stats"]}

    def iter_positions(self, chain: int):
        """The chain's draws chunk by chunk (memory-mapped ``[n, D]`` tensors)."""
        for f in self.chunk_files(chain):
            yield torch.load(f, weights_only=True, mmap=True)["positions"]


def load_samples(root: str | os.PathLike, chains: list[int] | None = None):
    """Open the draws of a run directory lazily (see :class:`~bnnkit.core.samples.StoredSamples`).

    ``chains`` defaults to every finished chain, so the directory that the ranks of a
    chain-parallel job wrote together reads back as one run.
    """
    import warnings

    from .flat import FlatView
    from .samples import StoredSamples

    store = RunStore.open(root)
    expected = int(store.config.get("num_chains", 0))
    done = store.done_chains()
    if chains is None:
        if not done:
            raise BnnkitError(f"no chain of {str(root)!r} has finished; resume the run to complete it.")
        if len(done) < expected:
            warnings.warn(
                f"{len(done)} of {expected} chains of {str(root)!r} are finished; reading those.",
                stacklevel=2,
            )
        chains = done
    else:
        missing = [c for c in chains if c not in done]
        if missing:
            raise BnnkitError(f"chains {missing} of {str(root)!r} are not finished.")
    first = next(store.iter_positions(chains[0]))
    shapes = store.config.get("model", {}).get("parameters")
    if shapes is None:
        shapes = {"x": [int(first.shape[-1])]}
    view = FlatView({n: torch.empty(s, dtype=first.dtype) for n, s in shapes.items()})
    return StoredSamples(root, chains, view, store.config)
