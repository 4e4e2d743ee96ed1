"""bnnkit.core.fast_tanh: accuracy against float64 tanh, special values, gradient, and the fused
loop that uses it (float32 chain against the step-at-a-time chain)."""

import pytest
import torch

import bnnkit
from bnnkit.core.fast_tanh import fast_tanh


def _ulps(y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    ref = torch.tanh(x.double())
    rf = ref.float().abs()
    ulp = (torch.nextafter(rf, torch.tensor(2.0)) - rf).double()
    return (y.double() - ref).abs() / ulp


@pytest.mark.slow  # over 2.5 s: the default run stays under 3 min
def test_fast_tanh_within_one_and_a_half_ulp_of_float64_tanh():
    x = torch.cat(
        [
            torch.linspace(-12, 12, 400_001),
            torch.logspace(-30, 1, 20_000),
            -torch.logspace(-30, 1, 20_000),
            torch.tensor([0.0, -0.0, 0.3, -0.3, 0.29999998, 9.0, 9.5]),
        ]
    )
    y = fast_tanh(x)
    assert y.dtype == torch.float32
    assert _ulps(y, x).max() <= 1.5
    assert torch.equal(torch.signbit(y), torch.signbit(x))  # signed zeros and signs kept
    # eager and compiled agree to an ulp (Inductor vectorises the same formula)
    yc = torch.compile(fast_tanh)(x)
    assert _ulps(yc, x).max() <= 1.5


def test_fast_tanh_special_values_and_other_dtypes():
    y = fast_tanh(torch.tensor([float("nan"), float("inf"), -float("inf")]))
    assert torch.isnan(y[0]) and y[1] == 1 and y[2] == -1
    x64 = torch.linspace(-5, 5, 1001, dtype=torch.float64)
    assert torch.equal(fast_tanh(x64), torch.tanh(x64))  # float64: torch.tanh itself


def test_fast_tanh_gradient_is_tanh_backward_and_vmaps():
    x = torch.randn(64, 7, generator=torch.Generator().manual_seed(0)) * 3
    g = torch.randn(64, 7, generator=torch.Generator().manual_seed(1))
    t = fast_tanh(x)
    (dx,) = torch.autograd.grad(fast_tanh(x.requires_grad_()), x, g)
    # the same formula; aten's vectorised kernel may fuse a multiply-add (float rounding)
    torch.testing.assert_close(dx, torch.ops.aten.tanh_backward(g, t), rtol=0, atol=1e-6)
    # under torch.func (the fused step's grad_and_value, vmapped over chains)
    gv = torch.func.vmap(torch.func.grad(lambda v: fast_tanh(v).sum()))(x.detach())
    torch.testing.assert_close(gv, 1 - t * t, rtol=0, atol=1e-6)


@pytest.mark.slow  # over 3 s: the default run stays under 3 min
def test_fused_float32_mlp_chain_matches_step_at_a_time():
    """The fused loop's MLP log density uses fast_tanh in float32; the step-at-a-time kernel uses
    torch.tanh. Same seed, same draws: the chains agree to float32 rounding over 40 steps."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    X = torch.randn(64, 3)
    y = torch.sin(X.sum(-1, keepdim=True))
    post = bnnkit.Posterior(net, bnnkit.Gaussian(0.5), bnnkit.GaussianPrior(1.0), num_data=64)
    x0 = torch.cat([p.detach().flatten() for p in net.parameters()])
    alg = bnnkit.SGLD(1e-3)
    full = (X, y)
    ref_kernel = alg.build(post.target())
    s = ref_kernel.init(x0.clone(), full)
    gen = torch.Generator().manual_seed(3)
    ref = []
    for _ in range(40):
        s, _ = ref_kernel.step(s, full, gen)
        ref.append(s.position)
    fk = bnnkit.sgmcmc.Fused(alg, block=40).build(post)
    out = fk.run_block(fk.init(x0.clone(), full), full, torch.Generator().manual_seed(3), 40, keep=[9, 39])
    torch.testing.assert_close(out.positions, torch.stack([ref[9], ref[39]]), rtol=1e-5, atol=1e-5)
