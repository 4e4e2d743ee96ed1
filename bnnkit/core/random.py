"""Random draws that take an explicit ``torch.Generator`` (reproducible per chain).

Nothing here changes the caller's global random state: :func:`init_module_` draws a module's
initial weights from a generator, and :func:`global_rng_seeded` runs code that can only use the
global RNG (``torch.nn`` layer construction) in a fork of it.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import init
from torch.nn.modules.batchnorm import _NormBase
from torch.nn.modules.conv import _ConvNd


def chain_seed(seed: int, chain: int) -> int:
    """Independent 63-bit seed for ``chain`` of a run seeded with ``seed`` (NumPy SeedSequence)."""
    return int(np.random.SeedSequence([int(seed), int(chain)]).generate_state(1, dtype=np.uint64)[0] >> 1)


def make_generator(seed: int, chain: int = 0, device: str | torch.device = "cpu") -> torch.Generator:
    return torch.Generator(device=device).manual_seed(chain_seed(seed, chain))


def gamma(shape: float | Tensor, rate: Tensor, gen: torch.Generator) -> Tensor:
    """Gamma(shape, rate) draw from an explicit generator (Marsaglia-Tsang, shape >= 1 boosted)."""
    shape = float(shape)
    boost = shape < 1.0
    k = shape + 1.0 if boost else shape
    d = k - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    while True:
        z = float(torch.randn((), generator=gen, dtype=torch.float64))
        v = (1.0 + c * z) ** 3
        if v <= 0:
            continue
        u = float(torch.rand((), generator=gen, dtype=torch.float64))
        if math.log(u) < 0.5 * z * z + d - d * v + d * math.log(v):
            g = d * v
            break
    if boost:
        u = float(torch.rand((), generator=gen, dtype=torch.float64))
        g *= u ** (1.0 / shape)
    return torch.as_tensor(g, dtype=torch.float64) / rate.double()


@contextlib.contextmanager
def global_rng_seeded(seed: int) -> Iterator[None]:
    """Run a block with the global CPU RNG seeded with ``seed``; the caller's state is restored after.

    For code that can only draw from the global RNG, such as the default initialisation of
    ``torch.nn`` layers at construction: ``with global_rng_seeded(0): net = nn.Linear(2, 3)``
    gives the weights that seeding the global RNG with 0 and then constructing the layer gives, and
    leaves the caller's random state as it was (``torch.random.fork_rng(devices=[])``: the CPU
    generator is forked and seeded; CUDA generators are neither seeded nor touched).
    """
    with torch.random.fork_rng(devices=[]):
        torch.random.default_generator.manual_seed(int(seed))
        yield


# reset_parameters that set ones and zeros (norm layers): they draw nothing
_NO_DRAWS = tuple(
    cls.reset_parameters
    for cls in (_NormBase, nn.GroupNorm, nn.LayerNorm, getattr(nn, "RMSNorm", None))
    if cls is not None
)


def init_module_(module: nn.Module, generator: torch.Generator) -> nn.Module:
    """Re-initialise ``module`` in place, as ``reset_parameters`` of each submodule would, with the
    random numbers drawn from ``generator``; returns ``module``.

    ``nn.Linear``, the convolutions and ``nn.Embedding`` draw from ``generator`` directly (their
    ``reset_parameters``, with the ``generator=`` keyword of ``torch.nn.init``); norm layers draw
    nothing.  Any other submodule with a ``reset_parameters`` runs it with the global CPU RNG set
    to ``generator``'s state inside a fork, and ``generator`` then continues from where the
    reset left it.  So, on the CPU, ``init_module_(m, torch.Generator().manual_seed(s))`` gives the
    weights that seeding the global RNG with ``s`` and then calling every submodule's
    ``reset_parameters()`` in ``module.modules()`` order gives, without touching the caller's
    random state.  Parameters on another device than ``generator`` are drawn on the generator's
    device and copied.
    """
    with torch.no_grad():
        for sub in module.modules():
            reset = getattr(sub, "reset_parameters", None)
            if not callable(reset):
                continue
            method = getattr(type(sub), "reset_parameters", None)
            if method is nn.Linear.reset_parameters or method is _ConvNd.reset_parameters:
                _kaiming_like_(sub, generator)
            elif method is nn.Embedding.reset_parameters:
                _draw_into(sub.weight, generator, lambda t: init.normal_(t, generator=generator))
                sub._fill_padding_idx_with_zero()
            elif method in _NO_DRAWS:
                reset()
            else:
                _reset_from_generator(sub, reset, generator)
    return module


def _kaiming_like_(layer: nn.Module, generator: torch.Generator) -> None:
    """``nn.Linear`` / ``_ConvNd`` ``reset_parameters``: Kaiming-uniform weight, uniform bias."""
    weight = layer.weight
    _draw_into(weight, generator, lambda t: init.kaiming_uniform_(t, a=math.sqrt(5), generator=generator))
    if layer.bias is not None:
        fan_in, _ = init._calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        _draw_into(layer.bias, generator, lambda t: init.uniform_(t, -bound, bound, generator=generator))


def _draw_into(param: Tensor, generator: torch.Generator, fill) -> None:
    """``fill`` a contiguous tensor on the generator's device, then copy it into ``param``."""
    if param.device == generator.device and param.is_contiguous():
        fill(param)
        return
    tmp = torch.empty(param.shape, dtype=param.dtype, device=generator.device)
    fill(tmp)
    param.copy_(tmp)


def _reset_from_generator(sub: nn.Module, reset, generator: torch.Generator) -> None:
    """Run ``sub``'s own ``reset_parameters`` on the global RNG, forked and set from ``generator``."""
    cuda = sorted({p.device.index or 0 for p in sub.parameters() if p.device.type == "cuda"})
    with torch.random.fork_rng(devices=cuda):
        cpu = torch.random.default_generator
        if generator.device.type == "cpu":
            cpu.set_state(generator.get_state())
        else:
            cpu.manual_seed(int(torch.randint(0, 2**62, (), generator=generator, device=generator.device)))
        for i in cuda:  # a module on the GPU draws there: seed those generators from the stream too
            torch.cuda.default_generators[i].manual_seed(int(torch.randint(0, 2**62, (), generator=cpu)))
        reset()
        if generator.device.type == "cpu":
            generator.set_state(cpu.get_state())
