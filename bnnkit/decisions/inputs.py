"""What a contextual-bandit agent learns from: the replay buffer of (input, reward) rows, the
inputs of a context paired with each action, and measurement points for a functional prior over
one-hot contexts."""

from __future__ import annotations

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least


def action_inputs(contexts: Tensor, num_actions: int = 2) -> Tensor:
    """Inputs ``[A k, D + A]``: the ``k`` contexts with action 0's one-hot code, then with action
    1's, ...; a reward network's outputs on them, reshaped ``[A, k]``, are each action's reward."""
    k = contexts.shape[0]
    codes = torch.eye(num_actions, dtype=contexts.dtype, device=contexts.device)
    return torch.cat([torch.cat([contexts, codes[a].expand(k, num_actions)], 1) for a in range(num_actions)])


def one_hot_blocks(contexts: Tensor) -> list[tuple[int, int]]:
    """Column ranges ``[start, stop)`` of the one-hot attribute blocks (each row has one 1 per block)."""
    blocks, start, partial = [], 0, torch.zeros(contexts.shape[0])
    for j in range(contexts.shape[1]):
        partial = partial + contexts[:, j]
        if bool((partial == 1).all()):
            blocks.append((start, j + 1))
            start, partial = j + 1, torch.zeros(contexts.shape[0])
    if start != contexts.shape[1]:
        raise BnnkitError("the contexts are not a one-hot encoding of categorical attributes.")
    return blocks


class ReplayBuffer:
    """The last ``capacity`` interactions (input rows and rewards) as a ring buffer."""

    def __init__(self, capacity: int, dim: int):
        check_int_at_least("capacity", capacity, 1)
        self.x = torch.zeros(capacity, dim)
        self.y = torch.zeros(capacity)
        self.capacity = capacity
        self.size = 0
        self._next = 0

    def add(self, x: Tensor, y: float) -> None:
        self.x[self._next] = x
        self.y[self._next] = y
        self._next = (self._next + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, rows: int, gen: torch.Generator) -> tuple[Tensor, Tensor]:
        """``min(rows, size)`` rows drawn uniformly with replacement."""
        idx = torch.randint(self.size, (min(rows, self.size),), generator=gen)
        return self.x[idx], self.y[idx]

    def data(self) -> tuple[Tensor, Tensor]:
        """Every row held, copied (a fit on them must not see later additions)."""
        return self.x[: self.size].clone(), self.y[: self.size].clone()


class OneHotContextPoints:
    """Measurement points of a functional prior over (context, action) inputs: every action at
    each of ``num_batch`` minibatch contexts and at ``num_random`` random contexts (each one-hot
    attribute's level uniform), duplicates dropped.  The random contexts put the prior where no
    data are yet; the actions of one context tie the actions not taken to the one observed
    through the kernel."""

    def __init__(
        self, blocks: list[tuple[int, int]], num_batch: int = 16, num_random: int = 16, num_actions: int = 2
    ):
        self.blocks = blocks
        self.num_batch = num_batch
        self.num_random = num_random
        self.num_actions = num_actions
        self.width = blocks[-1][1]
        self._lo = torch.tensor([lo for lo, _ in blocks])
        self._size = torch.tensor([hi - lo for lo, hi in blocks], dtype=torch.float32)

    def sample(self, batch_x: Tensor | None, generator: torch.Generator) -> Tensor:
        from ..functional import dedupe_rows

        if batch_x is None:
            raise BnnkitError("OneHotContextPoints draws from a minibatch; it has no fixed reference set.")
        pick = torch.randperm(batch_x.shape[0], generator=generator)[: self.num_batch]
        rows = batch_x[pick, : -self.num_actions]
        if self.num_random:
            u = torch.rand(self.num_random, len(self.blocks), generator=generator)
            cols = self._lo + (u * self._size).long().clamp_max(self._size.long() - 1)
            rand = torch.zeros(self.num_random, self.width).scatter_(1, cols, 1.0)
            rows = torch.cat([rows, rand])
        return dedupe_rows(action_inputs(rows, self.num_actions))

    def config(self) -> dict:
        return {
            "batch_contexts": self.num_batch,
            "random_contexts": self.num_random,
            "actions": self.num_actions,
        }
