"""Measurement-point sampling: counts, box, reproducibility, deduplication, sources, fixed sets."""

import json
import math

import pytest
import torch

from bnnkit.core.errors import BnnkitError
from bnnkit.functional import FixedMeasurementPoints, GPPrior, MeasurementPoints, dedupe_rows


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def train(n=100, d=2, seed=0):
    g = gen(seed)
    return torch.stack([torch.rand(n, generator=g) * 4 - 1, torch.randn(n, generator=g) * 3][:d], dim=1)


def is_row_of(rows, pool):
    """For each row of ``rows``: does it equal some row of ``pool``?"""
    return (rows[:, None, :] == pool[None, :, :]).all(-1).any(-1)


def test_counts_sources_and_box():
    x = train()
    bound = MeasurementPoints(num_from_data=10, num_uniform=20).bind(x)
    lo, hi = x.min(0).values, x.max(0).values
    torch.testing.assert_close(bound.low, lo - 0.1 * (hi - lo))
    torch.testing.assert_close(bound.high, hi + 0.1 * (hi - lo))
    xm = bound.sample(None, gen())
    assert xm.shape == (30, 2) and xm.dtype == x.dtype
    data_rows, uniform_rows = xm[:10], xm[10:]
    assert is_row_of(data_rows, x).all()
    assert len(dedupe_rows(data_rows)) == 10  # without replacement
    assert not is_row_of(uniform_rows, x).any()
    assert ((uniform_rows >= bound.low) & (uniform_rows <= bound.high)).all()


def test_uniform_points_fill_the_box_and_explicit_bounds_replace_it():
    x = train()
    bound = MeasurementPoints(num_from_data=0, num_uniform=4000, margin=0.5).bind(x)
    u = bound.sample(None, gen(1))
    width = bound.high - bound.low
    assert ((u >= bound.low) & (u <= bound.high)).all()
    # 4000 uniform draws reach within 1% of both ends of every dimension.
    assert ((u.min(0).values - bound.low) < 0.01 * width).all()
    assert ((bound.high - u.max(0).values) < 0.01 * width).all()
    # Points outside the data range exist (margin 0.5 widens it by half its width each side).
    assert (u < x.min(0).values).any() and (u > x.max(0).values).any()
    explicit = MeasurementPoints(num_from_data=0, num_uniform=500, low=-5.0, high=[5.0, 7.0]).bind(x)
    torch.testing.assert_close(explicit.low, torch.tensor([-5.0, -5.0]))
    torch.testing.assert_close(explicit.high, torch.tensor([5.0, 7.0]))
    v = explicit.sample(None, gen(2))
    assert (v >= -5).all() and (v[:, 0] <= 5).all() and (v[:, 1] <= 7).all() and (v[:, 1] > 5).any()
    # One explicit side keeps the data-derived other side.
    half = MeasurementPoints(low=-10.0).bind(x)
    torch.testing.assert_close(half.high, MeasurementPoints().bind(x).high)


def test_edge_points_move_one_input_of_a_training_row_past_its_range_into_the_margin():
    x = train(d=2)
    bound = MeasurementPoints(num_from_data=0, num_uniform=0, num_edge=4000, margin=0.25).bind(x)
    e = bound.sample(None, gen(3))
    assert e.shape == (4000, 2)
    lo, hi = x.min(0).values, x.max(0).values
    outside = (e < lo) | (e > hi)
    assert (outside.sum(1) == 1).all()  # exactly one input past the range, the other a row's own
    for j in range(2):
        moved = outside[:, j]
        other = e[moved][:, 1 - j]
        assert torch.isin(other, x[:, 1 - j]).all()
        assert (e[moved, j] >= bound.low[j]).all() and (e[moved, j] <= bound.high[j]).all()
        # both sides, each dimension about half the time, spread over the whole margin
        assert 0.45 < moved.double().mean() < 0.55
        up = e[moved, j] > hi[j]
        assert 0.45 < up.double().mean() < 0.55
        assert (e[moved][up, j] - hi[j]).max() > 0.24 * (hi[j] - lo[j])
    assert torch.equal(bound.sample(None, gen(3)), e)  # from the generator alone
    assert MeasurementPoints(num_from_data=0, num_uniform=0, num_edge=1).max_points == 1


def test_same_generator_state_same_points_and_fresh_points_each_call():
    x = train()
    bound = MeasurementPoints(num_from_data=15, num_uniform=15).bind(x)
    a, b = bound.sample(None, gen(3)), bound.sample(None, gen(3))
    torch.testing.assert_close(a, b)
    assert not torch.equal(a, bound.sample(None, gen(4)))
    g = gen(3)
    first, second = bound.sample(None, g), bound.sample(None, g)
    torch.testing.assert_close(first, a)
    assert not torch.equal(first, second)
    # The global RNG plays no part.
    torch.manual_seed(0)
    c = bound.sample(None, gen(3))
    torch.manual_seed(1)
    torch.testing.assert_close(c, bound.sample(None, gen(3)))


def test_draws_without_replacement_when_enough_rows_and_with_replacement_otherwise():
    x = train(n=20)
    everything = MeasurementPoints(num_from_data=20, num_uniform=0).bind(x).sample(None, gen())
    assert len(dedupe_rows(everything)) == 20 and is_row_of(x, everything).all()  # a permutation
    many = MeasurementPoints(num_from_data=40, num_uniform=0, dedupe=False).bind(x).sample(None, gen())
    assert many.shape == (40, 2) and is_row_of(many, x).all()
    assert len(dedupe_rows(many)) < 40  # repeats: sampled with replacement
    deduped = MeasurementPoints(num_from_data=40, num_uniform=0).bind(x).sample(None, gen())
    assert len(deduped) == len(dedupe_rows(many)) and len(dedupe_rows(deduped)) == len(deduped)


def test_draws_from_training_rows_that_repeat_are_still_deduplicated():
    # Distinct training rows drawn without replacement cannot repeat (the sampler skips the
    # row-wise unique there); training data with repeated rows must still be deduplicated.
    x = train(30)
    distinct = MeasurementPoints(num_from_data=25, num_uniform=0).bind(x)
    assert distinct.train_distinct
    xm = distinct.sample(None, gen(1))
    assert xm.shape == (25, 2) and len(dedupe_rows(xm)) == 25
    repeated = MeasurementPoints(num_from_data=25, num_uniform=0).bind(torch.cat([x, x]))
    assert not repeated.train_distinct
    sizes = [len(repeated.sample(None, gen(s))) for s in range(5)]
    for s in range(5):
        xm = repeated.sample(None, gen(s))
        assert len(dedupe_rows(xm)) == len(xm) and is_row_of(xm, x).all()
    assert min(sizes) < 25  # 25 of 60 rows that come in pairs: some pair is drawn twice


def test_dedupe_keeps_first_occurrences_in_order_and_makes_k_factorisable():
    x = torch.tensor([[1.0, 0.0], [2.0, 0.0], [1.0, 0.0], [0.5, 1.0], [2.0, 0.0]])
    torch.testing.assert_close(dedupe_rows(x), x[[0, 1, 3]])
    # The paper's 1-D setting: 40 points from 20 inputs plus 40 uniform ones.
    x1 = torch.linspace(-1, 1, 20, dtype=torch.float64).reshape(-1, 1)
    xm = MeasurementPoints().bind(x1).sample(None, gen(5))
    assert 20 + 1 <= len(xm) <= 20 + 40 and len(dedupe_rows(xm)) == len(xm)
    gp = GPPrior("rbf", lengthscale=0.3)
    _, delta = gp.cholesky(xm)
    assert delta == pytest.approx(1e-6 * float(gp.covariance(xm).diagonal().mean()))


def test_batch_source_draws_from_the_minibatch_and_keeps_the_training_box():
    x = train()
    spec = MeasurementPoints(num_from_data=8, num_uniform=4, source="batch")
    bound = spec.bind(x)
    batch = x[:10]
    xm = bound.sample(batch, gen())
    assert is_row_of(xm[:8], batch).all()
    torch.testing.assert_close(bound.low, MeasurementPoints().bind(x).low)
    from_train = MeasurementPoints(num_from_data=60, num_uniform=0).bind(x).sample(batch, gen())
    assert not is_row_of(from_train, batch).all()  # source="train" ignores the minibatch
    with pytest.raises(BnnkitError, match="minibatch inputs"):
        bound.sample(None, gen())
    with pytest.raises(BnnkitError, match="3 columns"):
        bound.sample(torch.zeros(5, 3), gen())
    with pytest.raises(BnnkitError, match="torch.Generator"):
        bound.sample(batch, 0)


def test_fixed_points_are_constant_and_deduplicated():
    x = train(n=30)
    xx = torch.cat([x, x[:5]])
    fixed = MeasurementPoints.fixed(xx)
    assert isinstance(fixed, FixedMeasurementPoints) and fixed.bind(x) is fixed
    a = fixed.sample(x[:4], gen(0))
    torch.testing.assert_close(a, x)
    torch.testing.assert_close(fixed.sample(None, gen(1)), a)
    assert MeasurementPoints.fixed(xx, dedupe=False).sample().shape == (35, 2)
    with pytest.raises(BnnkitError, match="2 columns but train_x has 1"):
        fixed.bind(torch.zeros(3, 1))
    json.dumps(fixed.config())


def test_one_dimensional_inputs_and_dtype_are_kept():
    x = torch.linspace(0, 1, 11, dtype=torch.float64)
    bound = MeasurementPoints(num_from_data=3, num_uniform=3, margin=0.0).bind(x)
    xm = bound.sample(None, gen())
    assert xm.shape == (6, 1) and xm.dtype == torch.float64
    assert (xm >= 0).all() and (xm <= 1).all()
    json.dumps(bound.config())
    assert MeasurementPoints().max_points == 80


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(num_from_data=-1), "num_from_data must be an integer >= 0"),
        (dict(num_uniform=-3), "num_uniform must be an integer >= 0"),
        (dict(num_from_data=2.5), "num_from_data"),
        (dict(num_from_data=0, num_uniform=0), "at least 1"),
        (dict(margin=-0.1), "margin"),
        (dict(margin=math.nan), "margin"),
        (dict(low=1.0, high=0.0), "low must be < high"),
        (dict(low=[0.0, 1.0], high=[1.0, 1.0]), "low must be < high"),
        (dict(low=[0.0, 0.0], high=[1.0, 1.0, 1.0]), "matching lengths"),
        (dict(low=math.inf), "finite"),
        (dict(source="test"), "source must be 'train' or 'batch'"),
    ],
)
def test_bad_arguments_raise(kwargs, match):
    with pytest.raises(BnnkitError, match=match):
        MeasurementPoints(**kwargs)


def test_bad_bind_inputs_raise():
    x = train()
    with pytest.raises(BnnkitError, match="3 values but the inputs have 2 columns"):
        MeasurementPoints(low=[0.0, 0.0, 0.0]).bind(x)
    with pytest.raises(BnnkitError, match="low < high"):
        MeasurementPoints(low=100.0).bind(x)  # above the data-derived upper bound
    bad = x.clone()
    bad[2, 1] = math.nan
    with pytest.raises(BnnkitError, match="NaN"):
        MeasurementPoints().bind(bad)
    with pytest.raises(BnnkitError, match="2-D"):
        MeasurementPoints().bind(torch.zeros(0, 2))
