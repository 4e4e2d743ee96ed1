"""The pure SG-MCMC updates (bnnkit.sgmcmc.updates) that the step-at-a-time kernels and the
fused blocks both call."""

from __future__ import annotations

import pytest
import torch

from bnnkit.sgmcmc.updates import (
    asghmc_noise,
    asghmc_update,
    psgld_update,
    sghmc_noise_scale,
    sghmc_update,
    sgld_update,
)

D = 7


def _tensors(n: int, dtype=torch.float64, d: int = D) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randn(d, generator=g, dtype=dtype) for _ in range(n)]


def _updates(eps, scale, xi, mass=2.0):
    """Each update on the same inputs: name -> (function of the inputs, inputs)."""
    x, r, g, v_hat = _tensors(4)
    v = v_hat.square()
    inv_mass, noise_sd, _ = asghmc_noise(v, 1e-4, 0.05, 1.0, True)
    return {
        "sgld": (lambda: sgld_update(x, g, eps, scale, xi), (x, g, xi)),
        "sghmc": (lambda: sghmc_update(x, r, g, eps, 5.0, mass, scale, xi), (x, r, g, xi)),
        "psgld": (lambda: psgld_update(x, v, g, eps, scale, xi, 0.99, 1e-5, 100.0), (x, v, g, xi)),
        "asghmc": (lambda: asghmc_update(x, r, g, 1e-4, 0.05, inv_mass, noise_sd, xi), (x, r, g, xi)),
    }


NAMES = ["sgld", "sghmc", "psgld", "asghmc"]


@pytest.mark.parametrize("name", NAMES)
def test_an_update_leaves_its_inputs_alone(name):
    (xi,) = _tensors(1)
    fn, inputs = _updates(1e-2, 0.3, xi)[name]
    before = [t.clone() for t in inputs]
    out = fn()
    for t, b in zip(inputs, before):
        assert torch.equal(t, b)
    for o in out if isinstance(out, tuple) else (out,):
        assert all(o.data_ptr() != t.data_ptr() for t in inputs)


@pytest.mark.parametrize("name", NAMES)
def test_no_normals_is_zero_noise(name):
    """xi=None (step at a time, no noise) is what a fused block's zero normals give."""
    (zeros,) = [torch.zeros(D, dtype=torch.float64)]
    skip, _ = _updates(1e-2, 0.0, None)[name]
    zero, _ = _updates(1e-2, 0.0, zeros)[name]
    for a, b in zip(*(o if isinstance(o, tuple) else (o,) for o in (skip(), zero()))):
        assert torch.equal(a, b)


@pytest.mark.parametrize("name", NAMES)
def test_tensor_coefficients_give_the_update_of_numbers(name):
    """A fused block passes the step size and noise scale as 0-d tensors: the same update, up to
    the rounding of a multiply-add against torch.add's alpha."""
    (xi,) = _tensors(1)
    num, _ = _updates(1e-2, 0.3, xi)[name]
    ten, _ = _updates(torch.tensor(1e-2, dtype=torch.float64), torch.tensor(0.3, dtype=torch.float64), xi)[
        name
    ]
    for a, b in zip(*(o if isinstance(o, tuple) else (o,) for o in (num(), ten()))):
        torch.testing.assert_close(a, b, rtol=1e-14, atol=1e-15)


def test_sghmc_tensor_mass_is_the_scalar_mass_update():
    (xi,) = _tensors(1)
    scalar, _ = _updates(1e-2, 0.3, xi, mass=2.0)["sghmc"]
    tensor, _ = _updates(1e-2, 0.3, xi, mass=torch.full((D,), 2.0, dtype=torch.float64))["sghmc"]
    for a, b in zip(scalar(), tensor()):
        torch.testing.assert_close(a, b, rtol=1e-14, atol=1e-15)
    slack = torch.tensor([-1.0, 0.0, 4.0], dtype=torch.float64)  # B >= C clips the noise at 0
    assert torch.equal(sghmc_noise_scale(0.5, 1.0, slack), torch.tensor([0.0, 0.0, 2.0], dtype=torch.float64))
    assert sghmc_noise_scale(0.5, 1.0, 4.0) == 2.0


def test_number_coefficients_round_as_torch_add_alpha():
    """The step-at-a-time chains' numbers: x + a y with a number a is torch.add's alpha (one
    rounding; a multiply and an add differ in some coordinates of a vector this long), in
    float32 as the benchmarks run."""
    x, r, g, xi = _tensors(4, torch.float32, d=1000)
    eps, s, c, m = 3e-3, 0.7, 5.0, 1.5
    want = torch.add(torch.add(x, g, alpha=0.5 * eps), xi, alpha=s)
    assert torch.equal(sgld_update(x, g, eps, s, xi), want)
    r_want = torch.add(torch.add(r * (1.0 - eps * c / m), g, alpha=eps), xi, alpha=s)
    x_new, r_new = sghmc_update(x, r, g, eps, c, m, s, xi)
    assert torch.equal(r_new, r_want)
    assert torch.equal(x_new, torch.add(x, r_want, alpha=eps / m))
