"""Draws streamed to disk stay there: lazy StoredSamples, chunked predictive, merge on read."""

import pytest
import torch

import bnnkit
from bnnkit.core.errors import BnnkitError
from bnnkit.predict import predict
from tests.helpers import linear_problem

PROB = linear_problem(n=20, d=2)
DATA = (PROB.X, PROB.y)
RUN = dict(num_samples=45, num_warmup=10, num_chains=4, seed=5, progress=False, chunk_size=10)


def run(**kw):
    return bnnkit.sample(bnnkit.HMC(num_steps=3), PROB.posterior(), DATA, **{**RUN, **kw})


def test_streamed_run_returns_lazy_samples_whose_predictive_reads_chunks(tmp_path):
    mem = run()
    stored = run(output=str(tmp_path / "r"))
    assert isinstance(stored, bnnkit.StoredSamples)
    assert stored.num_chains == 4 and stored.num_draws == 45
    chunks = list(stored.iter_flat(7))
    assert max(c.shape[0] for c in chunks) <= 7 and sum(c.shape[0] for c in chunks) == 180
    Xs = torch.randn(5, 2, dtype=torch.float64)
    p_mem, p_stored = predict(PROB.posterior(), mem, Xs), predict(PROB.posterior(), stored, Xs)
    assert stored._positions is None  # the predictive never loaded the draws whole
    torch.testing.assert_close(p_stored.mean, p_mem.mean)
    torch.testing.assert_close(p_stored.variance, p_mem.variance)
    assert torch.equal(stored.positions, mem.positions)  # on demand, everything
    assert torch.equal(stored.stats["accept_prob"], mem.stats["accept_prob"])


def test_chain_parallel_parts_in_one_directory_merge_on_read(tmp_path):
    full = run()
    out = str(tmp_path / "shared")
    run(output=out, chains=[0, 2])  # e.g. rank 0
    run(output=out, chains=[1, 3])  # rank 1
    merged = bnnkit.load_samples(out)
    assert merged.chains == [0, 1, 2, 3]
    assert torch.equal(merged.positions, full.positions)
    assert merged.view.names == full.view.names


def test_load_samples_of_a_partial_or_foreign_directory(tmp_path):
    with pytest.raises(BnnkitError, match="not a bnnkit run directory"):
        bnnkit.load_samples(tmp_path)
    out = str(tmp_path / "r")
    run(output=out, chains=[1])
    with pytest.warns(UserWarning, match="1 of 4 chains"):
        part = bnnkit.load_samples(out)
    assert part.chains == [1]
    with pytest.raises(BnnkitError, match=r"chains \[0\].*not finished"):
        bnnkit.load_samples(out, chains=[0, 1])
