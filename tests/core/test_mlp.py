"""bnnkit.core.mlp: the layers it reads off a module, and its forward against the module's own."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from bnnkit.core.mlp import activation, forward, mlp_layers


def _net():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(3, 8),
        nn.Tanh(),
        nn.Identity(),
        nn.Sequential(nn.Linear(8, 6), nn.ReLU()),
        nn.Linear(6, 2, bias=False),
    )


def test_layers_in_call_order_located_by_where():
    net = _net()
    names = [n for n, _ in net.named_parameters()]
    layers = mlp_layers(net, names, names.index)
    assert [(la.w, la.b, la.shape, la.act) for la in layers] == [
        (0, 1, (8, 3), nn.Tanh),
        (2, 3, (6, 8), nn.ReLU),
        (4, None, (2, 6), None),
    ]
    assert mlp_layers(net, names)[0].w == "0.weight"


@pytest.mark.parametrize(
    "net, names",
    [
        (nn.Sequential(nn.Linear(3, 4), nn.GELU(), nn.Linear(4, 1)), None),  # unsupported activation
        (nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Tanh(), nn.Linear(4, 1)), None),  # two in a row
        (
            nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)),
            ["0.weight", "2.weight", "2.bias"],
        ),  # fixed
    ],
)
def test_anything_else_is_not_an_mlp(net, names):
    names = names if names is not None else [n for n, _ in net.named_parameters()]
    assert mlp_layers(net, names) is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_forward_is_the_modules_output_bit_for_bit(dtype):
    net = _net().to(dtype)
    params = dict(net.named_parameters())
    x = torch.randn(5, 3, dtype=dtype)
    hidden: list[torch.Tensor] = []
    layers = mlp_layers(net, list(params))
    out = forward(
        x,
        [(params[la.w], None if la.b is None else params[la.b], activation(la.act)) for la in layers],
        hidden=hidden,
    )
    with torch.no_grad():
        assert torch.equal(out, net(x))
        assert torch.equal(hidden[1], net[1](net[0](x)))
    assert len(hidden) == 4 and hidden[0] is x and hidden[-1] is out
