"""Runs that end when the chains agree in function space, or when their budget is spent."""

import pytest
import torch

import bnnkit
from bnnkit.core.errors import BnnkitError
from bnnkit.data import Minibatches
from bnnkit.diagnostics import FunctionSpaceConvergence, ess, rhat
from tests.helpers import linear_problem

PROB = linear_problem(n=40, d=2)
VEC = dict(num_chains=4, chain_method="vectorized", progress=False, chunk_size=25, seed=2)


def _post():
    return PROB.posterior(num_data=40)


def test_a_mixing_run_stops_on_its_rule_and_the_rule_holds_on_what_it_returns():
    post = _post()
    rule = FunctionSpaceConvergence(post, PROB.X[:10], rhat=1.05, ess=200)
    s = bnnkit.sample(
        bnnkit.SGLD(2e-3),
        post,
        Minibatches(PROB.X, PROB.y, batch_size=40),
        num_samples=5000,
        stop_when=rule,
        **VEC,
    )
    assert s.config["stopped"]["reason"].startswith("converged")
    assert s.num_draws < 5000 and s.num_draws % 25 == 0  # checked every chunk
    f = torch.einsum("kdn,pn->kdp", s.positions, PROB.X[:10].to(s.positions))  # the linear model's outputs
    assert rhat(f).max() <= 1.05 and ess(f).min() >= 200  # recomputed independently of the rule


def test_a_run_that_cannot_meet_its_rule_stops_at_the_budget_and_says_so():
    post = _post()
    rule = FunctionSpaceConvergence(post, PROB.X[:10], rhat=1.0001, ess=1e6)
    s = bnnkit.sample(
        bnnkit.SGLD(2e-3),
        post,
        Minibatches(PROB.X, PROB.y, batch_size=40),
        num_samples=100,
        stop_when=rule,
        **VEC,
    )
    stopped = s.config["stopped"]
    assert s.num_draws == 100 and stopped["reason"].startswith("budget spent: max function-space R-hat")
    assert stopped["rhat"] > 1.0001


@pytest.mark.slow  # over 3 s: the default run stays under 3 min
def test_the_rule_survives_an_interruption_and_stops_at_the_same_draw(tmp_path):
    post = _post()
    data = Minibatches(PROB.X, PROB.y, batch_size=40)

    def run(output=None):  # a fresh rule each call, as a new process would have
        return bnnkit.sample(
            bnnkit.SGLD(2e-3),
            post,
            data,
            num_samples=5000,
            output=output,
            stop_when=FunctionSpaceConvergence(post, PROB.X[:10], rhat=1.05, ess=200),
            **VEC,
        )

    full = run()
    out = tmp_path / "run"
    first = run(str(out))
    assert torch.equal(first.positions, full.positions)
    # lose everything after the third chunk, as a kill would, and resume
    for c in range(4):
        (out / f"chain_{c:03d}" / "done").unlink()
    store = bnnkit.core.storage.RunStore.open(out)
    for c in range(4):
        store._truncate(c, 3)
    index = store.read_index(0)
    index["checkpoints"] = [e for e in index["checkpoints"] if e["num_chunks"] <= 3]
    store._write_index(0, index)
    resumed = run(str(out))
    assert torch.equal(resumed.positions, full.positions)
    assert resumed.config["stopped"]["reason"] == full.config["stopped"]["reason"]


def test_stop_when_needs_the_chains_to_run_together():
    post = _post()
    rule = FunctionSpaceConvergence(post, PROB.X[:10])
    with pytest.raises(BnnkitError, match="chain_method='vectorized'"):
        bnnkit.sample(
            bnnkit.SGLD(2e-3),
            post,
            Minibatches(PROB.X, PROB.y, batch_size=40),
            num_samples=10,
            num_chains=2,
            stop_when=rule,
            progress=False,
        )


def test_bad_rule_arguments():
    with pytest.raises(BnnkitError, match="rhat must exceed 1"):
        FunctionSpaceConvergence(_post(), PROB.X, rhat=1.0)
    with pytest.raises(BnnkitError, match="held-out inputs"):
        FunctionSpaceConvergence(_post(), PROB.X[:0])
