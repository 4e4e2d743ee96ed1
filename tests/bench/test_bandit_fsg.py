"""The bandit's functional agents' weight term, and the keys retired from the protocol."""

import json
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


def test_records_with_retired_keys_at_their_old_values_are_the_same_run():
    base = bandit.plain_config()
    record = {"method": "fsgld", "pattern": 0.5, "seed": 0, "steps": 10, "config": {**base, **bandit.RETIRED}}
    assert bandit.same_run(record, "fsgld", 0.5, 0, 10, base, base)
    for key, other in (
        ("fsgld_weight_term", "sgld"),
        ("sg_recipe", "adaptive"),
        ("gp_action_lengthscale", 0.5),
    ):
        changed = dict(record, config={**record["config"], key: other})  # a run of a retired option
        assert not bandit.same_run(changed, "fsgld", 0.5, 0, 10, base, base)


@needs_data
def test_the_stored_default_agent_runs_rebuild_their_table(tmp_path):
    """The default agent's runs of commit 70ef6bd were written while the retired keys were in
    DEFAULTS; they still rebuild, as do the current ones of docs/results/bandit/default.jsonl."""
    root = Path(__file__).resolve().parents[2]
    old = root / "experiments" / "results" / "bandit_default_70ef6bd.jsonl"
    assert "sg_recipe" in json.loads(old.read_text().splitlines()[0])["config"]
    for i, stored in enumerate((old, root / "docs" / "results" / "bandit" / "default.jsonl")):
        report = bandit.run_bandit(
            methods=("default",),
            out=tmp_path / str(i),
            from_runs=stored,
            root=str(DATA),
            progress=False,
            log=lambda _: None,
        )
        assert len(report["runs"]) == 9  # 3 patterns x 3 seeds


def test_a_retired_config_key_is_refused_with_where_it_runs(tmp_path):
    with pytest.raises(BnnkitError, match="'sg_recipe' has left the protocol.*commit 6fd8c02"):
        bandit.run_bandit(methods=("sgld",), out=tmp_path, config={"sg_recipe": "adaptive"}, progress=False)
