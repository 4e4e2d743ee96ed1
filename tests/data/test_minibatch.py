"""Minibatch streams: epochs, the short last batch in the N/M scaling, DataLoader input, resume."""

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import bnnkit
from bnnkit.core.errors import BnnkitError
from bnnkit.data import LoaderStream, Minibatches, minibatches
from bnnkit.sgmcmc import SGHMC, SGLD
from tests.helpers import Interrupted, linear_problem

PROB = linear_problem(n=23, d=2)


def test_each_epoch_visits_every_row_once_with_a_short_last_batch():
    x = torch.arange(23.0)[:, None]
    s = Minibatches(x, batch_size=5)
    gen = torch.Generator().manual_seed(0)
    for _epoch in range(3):
        rows = [s.next(gen) for _ in range(s.batches_per_epoch)]
        assert [r.shape[0] for r in rows] == [5, 5, 5, 5, 3]
        assert sorted(torch.cat(rows).flatten().tolist()) == list(range(23))


def test_drop_last_and_no_shuffle():
    x = torch.arange(23.0)[:, None]
    s = Minibatches(x, batch_size=5, shuffle=False, drop_last=True)
    gen = torch.Generator().manual_seed(0)
    rows = [s.next(gen) for _ in range(5)]
    assert [r.shape[0] for r in rows] == [5] * 5
    assert rows[0].flatten().tolist() == [0, 1, 2, 3, 4] and rows[4].flatten().tolist() == [0, 1, 2, 3, 4]


def test_minibatch_log_likelihood_is_scaled_by_n_over_m_including_the_short_batch():
    """Summed over one epoch with weights M_b / N, the scaled minibatch log-likelihoods must give
    the full-data log-likelihood: the short last batch is scaled by N / 3, not N / 5."""
    post = PROB.posterior(num_data=23)
    x = torch.tensor([0.3, -0.1], dtype=torch.float64)
    s = Minibatches(PROB.X, PROB.y, batch_size=5)
    gen = torch.Generator().manual_seed(1)
    total = 0.0
    for _ in range(s.batches_per_epoch):
        batch = s.next(gen)
        m = batch[0].shape[0]
        assert post.scale(batch) == pytest.approx(23 / m)
        total += m / 23 * float(post.log_likelihood_flat(x, batch))
    full = float(post.log_likelihood_flat(x, (PROB.X, PROB.y)))
    assert total == pytest.approx(full, rel=1e-12)


@pytest.mark.parametrize("stop_after", [3, 17, 40])
def test_interrupted_minibatch_run_resumes_bit_identical(tmp_path, stop_after):
    kw = dict(num_samples=12, num_warmup=6, thin=2, num_chains=2, seed=4, progress=False, chunk_size=5)
    post = PROB.posterior(num_data=23)
    alg = SGHMC(0.01, friction=10.0, noise_estimate="online")
    ref = bnnkit.sample(alg, post, Minibatches(PROB.X, PROB.y, batch_size=5), **kw)
    out = str(tmp_path / "run")
    with pytest.raises(KeyboardInterrupt):
        bnnkit.sample(
            Interrupted(alg, stop_after), post, Minibatches(PROB.X, PROB.y, batch_size=5), output=out, **kw
        )
    resumed = bnnkit.sample(alg, post, Minibatches(PROB.X, PROB.y, batch_size=5), output=out, **kw)
    assert torch.equal(resumed.positions, ref.positions)


def test_each_chain_starts_the_stream_afresh():
    """Chain 1's draws must not depend on chain 0 having run first in the same process."""
    kw = dict(num_samples=10, num_warmup=0, seed=4, progress=False)
    post = PROB.posterior(num_data=23)
    two = bnnkit.sample(SGLD(1e-3), post, Minibatches(PROB.X, PROB.y, batch_size=5), num_chains=2, **kw)
    stream = Minibatches(PROB.X, PROB.y, batch_size=5)
    bnnkit.sample(SGLD(1e-3), post, stream, num_chains=1, **kw)  # leaves the stream mid-epoch
    again = bnnkit.sample(SGLD(1e-3), post, stream, num_chains=2, **kw)
    assert torch.equal(two.positions, again.positions)


def test_dataloader_stream_runs_reproducibly_and_resumes(tmp_path):
    def loader():
        ds = TensorDataset(PROB.X, PROB.y)
        return DataLoader(ds, batch_size=5, shuffle=True, generator=torch.Generator().manual_seed(9))

    kw = dict(num_samples=12, num_warmup=6, num_chains=2, seed=4, progress=False, chunk_size=5)
    post = PROB.posterior(num_data=23)
    a = bnnkit.sample(SGLD(1e-3), post, minibatches(loader()), **kw)
    b = bnnkit.sample(SGLD(1e-3), post, LoaderStream(loader()), **kw)
    assert torch.equal(a.positions, b.positions)
    out = str(tmp_path / "run")
    with pytest.raises(KeyboardInterrupt):
        bnnkit.sample(Interrupted(SGLD(1e-3), 14), post, LoaderStream(loader()), output=out, **kw)
    resumed = bnnkit.sample(SGLD(1e-3), post, LoaderStream(loader()), output=out, **kw)
    assert torch.equal(resumed.positions, a.positions)


def test_dataloader_with_global_shuffle_warns():
    with pytest.warns(UserWarning, match="generator="):
        LoaderStream(DataLoader(TensorDataset(PROB.X, PROB.y), batch_size=5, shuffle=True))


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Minibatches(PROB.X, PROB.y, batch_size=0), "batch_size"),
        (lambda: Minibatches(PROB.X, PROB.y, batch_size=24), "larger than the data set"),
        (lambda: Minibatches(PROB.X[:0], PROB.y[:0], batch_size=1), "empty"),
        (lambda: Minibatches(PROB.X, PROB.y[:5], batch_size=2), "same number of rows"),
        (lambda: Minibatches(batch_size=2), "at least one tensor"),
        (lambda: LoaderStream(DataLoader(TensorDataset(PROB.X[:0]), batch_size=2)), "empty"),
        (lambda: minibatches((PROB.X, PROB.y)), "batch_size"),
    ],
)
def test_bad_streams(make, message):
    with pytest.raises(BnnkitError, match=message):
        make()


@pytest.mark.parametrize("num_data, message", [(None, "num_data=23"), (50, "num_data=50")])
def test_stream_and_posterior_must_agree_on_n(num_data, message):
    post = PROB.posterior(num_data=num_data) if num_data else PROB.posterior()
    with pytest.raises(BnnkitError, match=message):
        bnnkit.sample(
            SGLD(1e-3), post, Minibatches(PROB.X, PROB.y, batch_size=5), num_samples=2, progress=False
        )


def test_stream_fingerprints_name_the_data_and_leave_the_stream_as_it_was():
    """A run directory identifies a stream's data by ``fingerprint()``: equal for equal data, other
    for other rows or batching, and taking it changes neither the stream nor the loader's generator."""
    from bnnkit.core.driver import _digest

    s = Minibatches(PROB.X, PROB.y, batch_size=5)
    gen = torch.Generator().manual_seed(0)
    s.next(gen)
    state = s.state_dict()
    desc, batch = s.fingerprint()
    assert s.state_dict() is not None and s.state_dict()["pos"] == state["pos"]
    assert torch.equal(s.state_dict()["perm"], state["perm"])
    assert torch.equal(batch[0], PROB.X[:5])
    same = Minibatches(PROB.X.clone(), PROB.y.clone(), batch_size=5).fingerprint()[0]
    assert _digest(desc) == _digest(same)
    assert _digest(desc) != _digest(Minibatches(PROB.X, PROB.y, batch_size=6).fingerprint()[0])

    lgen = torch.Generator().manual_seed(9)
    loader = DataLoader(TensorDataset(PROB.X, PROB.y), batch_size=5, shuffle=True, generator=lgen)
    stream = LoaderStream(loader)
    before = lgen.get_state()
    desc, batch = stream.fingerprint()
    assert torch.equal(lgen.get_state(), before)
    assert torch.equal(batch[0], PROB.X[:5])
    global_shuffle = DataLoader(TensorDataset(PROB.X, PROB.y), batch_size=5, shuffle=False)
    assert _digest(desc) == _digest(LoaderStream(global_shuffle).fingerprint()[0])  # the data, not the order
