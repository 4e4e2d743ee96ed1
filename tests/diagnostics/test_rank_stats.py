"""The vectorised rank-normalised R-hat and bulk ESS give ArviZ's numbers, bit for bit."""

import warnings

import numpy as np
import pytest

from bnnkit.diagnostics.rank_stats import bulk_ess, rank_rhat


def _arviz(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import arviz as az

        ds = az.convert_to_dataset(draws)
        return (np.asarray(az.rhat(ds)["x"].values).reshape(-1),
                np.asarray(az.ess(ds, method="bulk")["x"].values).reshape(-1))  # fmt: skip


def _draws(chains: int, n: int, q: int, seed: int) -> np.ndarray:
    """AR(1) chains of q quantities, each chain offset differently so that R-hat moves away from 1,
    with some quantities rounded (ties), one constant and one a random walk (long correlations)."""
    rng = np.random.default_rng(seed)
    x = np.zeros((chains, n, q))
    e = rng.normal(size=(chains, n, q))
    phi = rng.uniform(0.0, 0.95, size=q)
    for t in range(1, n):
        x[:, t] = phi * x[:, t - 1] + e[:, t]
    x += rng.normal(scale=0.5, size=(chains, 1, q)) * rng.uniform(0, 2, size=q)
    x[..., : q // 4] = np.round(x[..., : q // 4])
    x[..., q // 4] = 3.0
    x[..., q // 4 + 1] = e[..., 0].cumsum(axis=1)
    return x


@pytest.mark.parametrize(
    ("chains", "n", "q", "seed"),
    [(4, 100, 60, 0), (4, 101, 20, 1), (2, 25, 30, 2), (8, 200, 10, 3), (3, 7, 12, 4)],
)
def test_rhat_and_bulk_ess_equal_arviz_bit_for_bit(chains, n, q, seed):
    x = _draws(chains, n, q, seed)
    r_ref, e_ref = _arviz(x)
    np.testing.assert_array_equal(rank_rhat(x), r_ref)
    np.testing.assert_array_equal(bulk_ess(x), e_ref)
    assert np.isnan(r_ref[q // 4]) and e_ref[q // 4] == chains * (n // 2) * 2  # the constant one


def test_trailing_dimensions_nan_and_too_few_draws_as_arviz():
    x = _draws(4, 40, 12, 5).reshape(4, 40, 3, 4)
    x[1, 7, 2, 1] = np.nan
    r_ref, e_ref = _arviz(x)
    r, e = rank_rhat(x), bulk_ess(x)
    assert r.shape == e.shape == (12,) and np.isnan(r[9]) and np.isnan(e[9])
    np.testing.assert_array_equal(r, r_ref)
    np.testing.assert_array_equal(e, e_ref)
    one = x[:1, :, 0, :2]  # one chain: no R-hat, but an ESS
    assert np.isnan(rank_rhat(one)).all()
    np.testing.assert_array_equal(bulk_ess(one), _arviz(one)[1])
    assert np.isnan(rank_rhat(x[:, :3])).all() and np.isnan(bulk_ess(x[:, :3])).all()  # 3 draws
    for empty in (np.full((4, 10, 3), np.nan), np.zeros((4, 10, 0))):  # nothing to compute
        assert rank_rhat(empty).shape == bulk_ess(empty).shape == (empty.shape[2],)
        assert np.isnan(rank_rhat(empty)).all() and np.isnan(bulk_ess(empty)).all()
    with pytest.raises(ValueError, match=r"\[chain, draw"):
        rank_rhat(np.zeros(5))
