"""The networks the experiments share."""

from __future__ import annotations

import torch


def mlp(d_in: int, hidden: int, activation: type[torch.nn.Module] = torch.nn.Tanh) -> torch.nn.Module:
    """``d_in -> hidden -> hidden -> 1`` with ``activation`` after each hidden layer."""
    return torch.nn.Sequential(
        torch.nn.Linear(d_in, hidden),
        activation(),
        torch.nn.Linear(hidden, hidden),
        activation(),
        torch.nn.Linear(hidden, 1),
    )
