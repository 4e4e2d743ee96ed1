"""Reference networks: the MLP of the UCI bench and the bandit, the small CNN of the image bench
(CPU) and a GroupNorm ResNet-18 (GPU).  Plain ``torch.nn`` modules; any other module works the same
with :func:`bnnkit.fit` and :class:`bnnkit.Posterior`."""

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


class BasicBlock(torch.nn.Module):
    """ResNet basic block: two 3x3 convolutions with group normalisation and a skip connection."""

    def __init__(self, c_in: int, c_out: int, stride: int, groups: int):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.norm1 = torch.nn.GroupNorm(min(groups, c_out), c_out)
        self.conv2 = torch.nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.norm2 = torch.nn.GroupNorm(min(groups, c_out), c_out)
        self.skip: torch.nn.Module = torch.nn.Identity()
        if stride != 1 or c_in != c_out:
            self.skip = torch.nn.Sequential(
                torch.nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False),
                torch.nn.GroupNorm(min(groups, c_out), c_out),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.norm1(self.conv1(x)))
        return torch.relu(self.norm2(self.conv2(h)) + self.skip(x))


def resnet18(
    num_classes: int = 10,
    in_channels: int = 1,
    width: int = 64,
    groups: int = 32,
    dropout: float | None = None,
) -> torch.nn.Module:
    """ResNet-18 (He et al. 2016) for small images such as 28x28 MNIST.

    The layout of the CIFAR variants the SG-MCMC literature uses: a 3x3 stem with stride 1 and no
    max-pool, four stages of two basic blocks with ``width``, 2, 4 and 8 x ``width`` channels
    (strides 1, 2, 2, 2), global average pooling and one linear layer.  Normalisation is
    ``GroupNorm`` instead of BatchNorm: batch statistics would make each example's likelihood
    depend on the rest of its minibatch (and on train/eval mode), so the posterior would not be a
    fixed function of the weights.  ``dropout=p`` adds ``nn.Dropout(p)`` before the linear layer
    (MC dropout).  ``width`` scales every stage (64 is the standard network, 11.2M parameters).
    """
    widths = [width, 2 * width, 4 * width, 8 * width]
    layers: list[torch.nn.Module] = [
        torch.nn.Conv2d(in_channels, width, 3, padding=1, bias=False),
        torch.nn.GroupNorm(min(groups, width), width),
        torch.nn.ReLU(),
    ]
    c_in = width
    for i, c in enumerate(widths):
        stride = 1 if i == 0 else 2
        layers += [BasicBlock(c_in, c, stride, groups), BasicBlock(c, c, 1, groups)]
        c_in = c
    layers += [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()]
    if dropout is not None:
        layers.append(torch.nn.Dropout(dropout))
    layers.append(torch.nn.Linear(c_in, num_classes))
    return torch.nn.Sequential(*layers)


def small_cnn(dropout: float | None = None) -> torch.nn.Module:
    """The CPU CNN; ``dropout=p`` adds ``nn.Dropout(p)`` after each pooling layer (MC dropout)."""

    def drop() -> list[torch.nn.Module]:
        return [] if dropout is None else [torch.nn.Dropout(dropout)]

    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 5),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        *drop(),
        torch.nn.Conv2d(16, 32, 5),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        *drop(),
        torch.nn.Flatten(),
        torch.nn.Linear(512, 10),
    )
