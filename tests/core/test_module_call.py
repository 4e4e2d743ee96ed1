"""ModuleCaller: the layer-by-layer call of a plain MLP gives the module's own output, and steps
aside when a forward is patched or hooked after it was built."""

from __future__ import annotations

import torch

from bnnkit.core.module_call import ModuleCaller
from bnnkit.nets import mlp


def _caller():
    torch.manual_seed(0)
    net = mlp(3, 5).double()
    names = [n for n, _ in net.named_parameters()]
    return net, ModuleCaller(net, names, {}), names


def test_layer_by_layer_call_equals_the_module_bit_for_bit():
    net, caller, names = _caller()
    assert caller.plan is not None
    x = torch.randn(7, 3, dtype=torch.float64)
    params = [torch.randn_like(p) for p in net.parameters()]
    with torch.no_grad():
        for p, v in zip(net.parameters(), params):
            p.copy_(v)
        expected = net(x)
    assert torch.equal(caller(params, x), expected)


def test_a_patched_or_hooked_forward_is_honoured():
    net, caller, _ = _caller()
    x = torch.randn(4, 3, dtype=torch.float64)
    params = [p.detach().clone() for p in net.parameters()]
    first = net[0]
    first.forward = lambda inp: torch.zeros(inp.shape[0], 5, dtype=inp.dtype)  # as flipout patches a layer
    try:
        out = caller(params, x)
    finally:
        del first.forward
    assert torch.equal(out, net[2:](torch.zeros(4, 5, dtype=torch.float64)).detach())
    handle = net[-1].register_forward_hook(lambda mod, inp, out: out * 0)
    try:
        assert torch.equal(caller(params, x), torch.zeros(4, 1, dtype=torch.float64))
    finally:
        handle.remove()
    assert not torch.equal(caller(params, x), torch.zeros(4, 1, dtype=torch.float64))
