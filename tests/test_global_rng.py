"""No library call changes the caller's global random state.

Initial weights are drawn from explicit generators (:func:`bnnkit.core.random.init_module_`) or,
where only the global RNG can be used (``torch.nn`` construction), in a seeded fork of it
(:func:`bnnkit.core.random.global_rng_seeded`).
"""

import copy

import torch
from torch import nn

import bnnkit
from bnnkit.core.random import global_rng_seeded, init_module_, make_generator
from bnnkit.vi import DeepEnsemble


class _OwnInit(nn.Module):
    """A module whose reset_parameters bnnkit does not know: it draws from the global RNG."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.empty(4))
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.normal_(self.w)


def _zoo() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 4, 3),
        nn.GroupNorm(2, 4),
        nn.BatchNorm2d(4),
        nn.Flatten(),
        nn.Linear(4, 5),
        _OwnInit(),
        nn.Embedding(7, 3, padding_idx=0),
        nn.Linear(5, 2, bias=False),
        nn.LayerNorm(2),
    )


def _seeded_resets(module: nn.Module, seed: int) -> nn.Module:
    """The old way: seed the global RNG, then every submodule's reset_parameters()."""
    with torch.random.fork_rng(devices=[]):
        torch.random.default_generator.manual_seed(seed)
        with torch.no_grad():
            for sub in module.modules():
                reset = getattr(sub, "reset_parameters", None)
                if callable(reset):
                    reset()
    return module


def test_init_module_draws_from_the_generator_as_a_seeded_reset_would():
    ref = _seeded_resets(_zoo(), 123)
    module = _zoo()
    state = torch.get_rng_state()
    out = init_module_(module, torch.Generator().manual_seed(123))
    assert out is module
    assert torch.equal(torch.get_rng_state(), state)
    for (name, a), (_, b) in zip(ref.state_dict().items(), module.state_dict().items()):
        assert torch.equal(a, b), name
    other = init_module_(_zoo(), torch.Generator().manual_seed(124))
    assert not torch.equal(other[4].weight, module[4].weight)


def test_global_rng_seeded_reproduces_seeded_construction_and_restores_the_state():
    with torch.random.fork_rng(devices=[]):
        torch.random.default_generator.manual_seed(7)
        ref = nn.Linear(3, 4)
    torch.rand(3)  # some caller state
    state = torch.get_rng_state()
    with global_rng_seeded(7):
        net = nn.Linear(3, 4)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(net.weight, ref.weight) and torch.equal(net.bias, ref.bias)


def test_fitting_an_ensemble_leaves_the_global_rng_alone_and_keeps_its_members():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(30, 2, generator=g, dtype=torch.float64)
    y = torch.tanh(X @ torch.tensor([1.0, -2.0], dtype=torch.float64))
    module = nn.Sequential(nn.Linear(2, 6), nn.Tanh(), nn.Linear(6, 1)).double()
    post = bnnkit.Posterior(module, bnnkit.Gaussian(0.3), bnnkit.GaussianPrior(1.0))
    ens = DeepEnsemble(num_members=3, lr=0.02, num_epochs=2, batch_size=10)
    state = torch.get_rng_state()
    a = ens.fit(post, (X, y), seed=5, progress=False)
    assert torch.equal(torch.get_rng_state(), state)
    b = ens.fit(post, (X, y), seed=5, progress=False)
    assert torch.equal(a.positions, b.positions)
    # the initial members are the module re-initialised under seeds drawn from make_generator(5, k),
    # the same weights as the former global-RNG seeding gave
    gens = [make_generator(5, k) for k in range(3)]
    start = ens._initial(post, gens, None)
    assert torch.equal(torch.get_rng_state(), state)
    for k in range(3):
        s = int(torch.randint(0, 2**62, (1,), generator=make_generator(5, k)))
        member = _seeded_resets(copy.deepcopy(module), s)
        assert torch.equal(start[k], post.view.ravel({n: p.detach() for n, p in member.named_parameters()}))


def test_bandit_agents_are_built_without_touching_the_global_rng():
    from bnnkit.bench import bandit

    cfg = {**bandit.DEFAULTS, **bandit.QUICK}
    state = torch.get_rng_state()
    agents = [bandit.make_agent(m, 119, cfg, 3, [(0, 117)]) for m in ("sgld", "greedy0")]
    assert torch.equal(torch.get_rng_state(), state)
    sgld, greedy = agents
    first = dict(greedy.net.named_parameters())["0.weight"]
    assert torch.equal(sgld.posterior.split(sgld.x0)[0]["0.weight"], first)  # same weights per seed
