"""The bandit's functional agents: the weight term option and the action columns' lengthscale."""

import json
import math
from pathlib import Path

import pytest
import torch

from bnnkit.bench import bandit
from bnnkit.core.errors import BnnkitError

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
needs_data = pytest.mark.skipif(
    not (DATA / "mushroom" / "agaricus-lepiota.data").exists(), reason="needs ../shared/data/mushroom"
)
BLOCKS = [(0, 3), (3, 5)]  # two one-hot attributes (3 and 2 levels): inputs of 5 + 2 action columns
D = 7


def _agent(method, **overrides):
    cfg = {**bandit.DEFAULTS, **bandit.QUICK, **overrides}
    return bandit.make_agent(method, D, cfg, 0, BLOCKS)


def _weight_log_prob(agent, w):
    return float(agent.posterior.bound_prior.log_prob(w, {}))


def test_the_default_weight_term_is_the_isotropic_gaussian():
    agent = _agent("fsgld")
    w = torch.randn(agent.posterior.d_net, generator=torch.Generator().manual_seed(0))
    scale = bandit.DEFAULTS["fsgld_weight_scale"]
    assert _weight_log_prob(agent, w) == pytest.approx(-float(w @ w) / (2 * scale**2), rel=1e-6)


@pytest.mark.parametrize("method", ["fsgld", "fsghmc"])
def test_the_sgld_weight_term_is_sgld_s_weight_prior(method):
    agent = _agent(method, fsgld_weight_term="sgld")
    sgld = _agent("sgld")
    assert agent.posterior.d_net == sgld.posterior.d_net
    w = torch.randn(sgld.posterior.d_net, generator=torch.Generator().manual_seed(1)) * 0.3
    lp_sgld = float(sgld.posterior.bound_prior.log_prob(w, {}))
    assert _weight_log_prob(agent, w) == pytest.approx(lp_sgld, rel=1e-6)
    # ... and the gradient the sampler sees: the weight term's part of the functional target
    buf = bandit.Buffer(8, D)
    gen = torch.Generator().manual_seed(2)
    x = torch.zeros(D)
    x[[0, 3, 5]] = 1.0
    buf.add(x, 0.25)
    agent.update(buf, {**bandit.DEFAULTS, **bandit.QUICK, "fsgld_weight_term": "sgld"}, gen)
    assert agent.finite()
    # the GP prior is still there: the posterior is functional
    assert hasattr(agent.posterior, "gp") and hasattr(agent.posterior.with_num_data(3), "gp")
    assert agent.posterior.with_num_data(3).bound_prior is agent.posterior.bound_prior


def test_an_unknown_weight_term_is_refused():
    with pytest.raises(BnnkitError, match="fsgld_weight_term"):
        _agent("fsgld", fsgld_weight_term="layerwise")


def test_the_action_lengthscale_decouples_eat_and_reject():
    x = torch.zeros(2, D)
    x[:, [0, 3]] = 1.0
    x[0, 5], x[1, 6] = 1.0, 1.0  # one mushroom, eat and reject
    iso = _agent("fsgld").posterior.gp.covariance(x)
    ard = _agent("fsgld", gp_action_lengthscale=0.5).posterior.gp.covariance(x)
    ls, scale = bandit.DEFAULTS["gp_lengthscale"], bandit.DEFAULTS["gp_outputscale"]
    # squared distance 2 between the one-hot actions: correlation exp(-2 / (2 l^2))
    assert float(iso[0, 1]) == pytest.approx(scale * math.exp(-1 / ls**2), rel=1e-6)
    assert float(ard[0, 1]) == pytest.approx(scale * math.exp(-1 / 0.5**2), rel=1e-6)
    # the attribute columns keep gp_lengthscale: another attribute level, same action
    y = x.clone()
    y[:, [0, 1]] = torch.tensor([0.0, 1.0])
    k = _agent("fsgld", gp_action_lengthscale=0.5).posterior.gp.kernel
    between = k(x[:1].double(), y[:1].double()).to_dense()
    assert float(between) == pytest.approx(scale * math.exp(-1 / ls**2), rel=1e-6)


def test_records_without_the_new_keys_are_read_with_the_old_behaviour():
    base = bandit.plain_config()
    old = {k: v for k, v in base.items() if k not in ("fsgld_weight_term", "gp_action_lengthscale")}
    record = {"method": "fsgld", "pattern": 0.5, "seed": 0, "steps": 10, "config": old}
    assert bandit.same_run(record, "fsgld", 0.5, 0, 10, base, base)
    fixed = {**base, "fsgld_weight_term": "sgld"}
    assert not bandit.same_run(record, "fsgld", 0.5, 0, 10, fixed, base)
    assert bandit.same_run(dict(record, config=fixed), "fsgld", 0.5, 0, 10, fixed, base)


@needs_data
def test_a_run_with_the_sgld_weight_term_is_reproducible_and_recorded(tmp_path):
    cfg = {"fsgld_weight_term": "sgld", "fsgld_max_step": 1e-3}
    args = dict(methods=("fsgld",), patterns=(0.5,), seeds=(0,), steps=40, quick=True, root=str(DATA))
    kw = dict(progress=False, log=lambda _: None, config=cfg)
    a = bandit.run_bandit(out=tmp_path / "a", **args, **kw)
    b = bandit.run_bandit(out=tmp_path / "b", **args, **kw)
    assert a["runs"][0]["curve"] == b["runs"][0]["curve"]
    record = json.loads((tmp_path / "a" / bandit.RUNS_FILE).read_text())
    assert record["config"]["fsgld_weight_term"] == "sgld"
    assert "sgld's weight prior" in a["protocol"]["fsgld_prior"]
    # the record is this configuration's, not the default one's
    with pytest.raises(BnnkitError, match="holds no run"):
        bandit.run_bandit(
            out=tmp_path / "c", from_runs=tmp_path / "a" / bandit.RUNS_FILE, progress=False,
            log=lambda _: None, **args,
        )  # fmt: skip
