"""Metropolis-within-Gibbs over parameter blocks, with exact conjugate updates.

One sweep visits the blocks ``b = 1..B`` in order, each conditional on all others:

- a block with an exact conditional (``Target.conjugate_updates``: the Gaussian noise precision
  ``tau | w ~ Gamma(a + n/2, b + SSR/2)``, the prior precision
  ``lambda | w ~ Gamma(a + d/2, b + |w|^2/2)``) is drawn from it;
- any other block ``x_b`` gets a Gaussian random-walk Metropolis step on that block alone::

      x_b' = x_b + s_b z,   accept with probability min(1, pi(x_b', x_-b) / pi(x_b, x_-b))

  with a per-block scale ``s_b`` tuned during warm-up by Robbins-Monro on ``log s_b`` towards
  ``target_accept``: ``log s_b <- log s_b + (a_b - target) / t^0.6``.

Blocks (``blocks=``): default one block per parameter tensor ("one layer at a time" for a
network's weight and bias tensors); or a list whose entries are a parameter name, a name prefix
(``"0."``: a whole layer), a list of names, or a list of integer indices into the flat vector.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_positive
from ..core.flat import FlatView
from ..core.target import Target
from ..core.types import Adaptation, Batch, Kernel
from .common import metropolis_accept, normal


class GibbsState(NamedTuple):
    position: Tensor
    log_density: Tensor
    log_scales: Tensor  # [num_blocks]; unused entries for conjugate blocks


class GibbsInfo(NamedTuple):
    log_density: Tensor
    accept_prob: Tensor
    is_accepted: Tensor
    block_accept_prob: Tensor  # [num_blocks] (not stored per draw: not a scalar)


class _Block(NamedTuple):
    label: str
    index: Tensor
    conjugate: str | None


def resolve_blocks(view: FlatView, blocks: Any, conjugate: set[str]) -> list[_Block]:
    """Turn the user's block spec into index sets over the flat vector."""
    spec = list(view.names) if blocks is None else list(blocks)
    out = []
    for entry in spec:
        if isinstance(entry, str):
            names = [
                n
                for n in view.names
                if n == entry or n.startswith(entry if entry.endswith(".") else entry + ".")
            ]
            if not names:
                raise BnnkitError(
                    f"Gibbs block {entry!r} matches no parameter; parameters are: {', '.join(view.names)}."
                )
        elif isinstance(entry, (list, tuple)) and entry and all(isinstance(e, int) for e in entry):
            idx = torch.tensor(entry, dtype=torch.long)
            if idx.min() < 0 or idx.max() >= view.size:
                raise BnnkitError(
                    f"Gibbs block indices {entry} fall outside the flat vector of size {view.size}."
                )
            out.append(_Block(f"indices{entry}", idx, None))
            continue
        elif isinstance(entry, (list, tuple)) and all(isinstance(e, str) for e in entry):
            names = list(entry)
            unknown = [n for n in names if n not in view.names]
            if unknown:
                raise BnnkitError(
                    f"Gibbs block names {unknown} are unknown; parameters are: {', '.join(view.names)}."
                )
        else:
            raise BnnkitError(
                f"cannot read Gibbs block {entry!r}: use a name, a prefix, a list of names or of indices."
            )
        idx = torch.cat([torch.arange(view.slice(n).start, view.slice(n).stop) for n in names])
        conj = names[0] if len(names) == 1 and names[0] in conjugate else None
        out.append(_Block(",".join(names), idx, conj))
    return out


@dataclass(frozen=True)
class MetropolisWithinGibbs:
    blocks: Any = None
    step_size: float = 0.1
    target_accept: float = 0.3
    adapt: bool = True
    name: str = "gibbs"

    def __post_init__(self) -> None:
        check_positive("step_size (initial block proposal scale)", self.step_size)

    def config(self) -> dict:
        return {
            "blocks": repr(self.blocks),
            "step_size": self.step_size,
            "target_accept": self.target_accept,
            "adapt": self.adapt,
        }

    def build(self, target: Target) -> Kernel:
        blocks = resolve_blocks(target.view, self.blocks, set(target.conjugate_updates))
        s0 = self.step_size

        def init(position: Tensor, batch: Batch) -> GibbsState:
            with torch.no_grad():
                lp = target.log_prob(position, batch)
            scales = torch.full((len(blocks),), float(torch.log(torch.tensor(s0))), dtype=torch.float64)
            return GibbsState(position.detach().clone(), lp, scales)

        def step(state: GibbsState, batch: Batch, gen: torch.Generator) -> tuple[GibbsState, GibbsInfo]:
            x, lp = state.position.clone(), state.log_density
            acc = torch.full((len(blocks),), float("nan"), dtype=torch.float64)
            moved = False
            with torch.no_grad():
                for b, blk in enumerate(blocks):
                    if blk.conjugate is not None:
                        x[blk.index] = target.conjugate_updates[blk.conjugate](x, batch, gen)
                        lp = target.log_prob(x, batch)
                        moved = True
                        continue
                    prop = x.clone()
                    z = normal(prop[blk.index], gen)
                    prop[blk.index] = prop[blk.index] + float(state.log_scales[b].exp()) * z
                    lp_prop = target.log_prob(prop, batch)
                    a, accepted = metropolis_accept(lp_prop - lp, gen)
                    acc[b] = a
                    if bool(accepted):
                        x, lp, moved = prop, lp_prop, True
            mh = acc[~torch.isnan(acc)]
            mean_acc = mh.mean() if mh.numel() else torch.tensor(1.0, dtype=torch.float64)
            new = GibbsState(x, lp, state.log_scales)
            return new, GibbsInfo(lp, mean_acc, torch.tensor(moved), acc)

        adaptation = _robbins_monro(self.target_accept) if self.adapt else None
        return Kernel(init, step, adaptation)


class _RMState(NamedTuple):
    iteration: Tensor


def _robbins_monro(target_accept: float) -> Adaptation:
    def init(state: GibbsState, num_warmup: int) -> _RMState:
        return _RMState(torch.zeros((), dtype=torch.int64))

    def update(a: _RMState, state: GibbsState, info: GibbsInfo) -> tuple[_RMState, GibbsState]:
        t = int(a.iteration) + 1
        acc = info.block_accept_prob
        delta = torch.where(torch.isnan(acc), torch.zeros_like(acc), acc - target_accept)
        return _RMState(a.iteration + 1), state._replace(log_scales=state.log_scales + delta / t**0.6)

    def finalize(a: _RMState, state: GibbsState) -> GibbsState:
        return state

    return Adaptation(init, update, finalize)
