"""Rank-normalised split R-hat and bulk ESS of many quantities at once, with ArviZ's numbers.

Vehtari, Gelman, Simpson, Carpenter and Buerkner (2021).  For draws ``x[c, s]`` of one quantity,
each of the C chains is split in half (the middle draw of an odd chain is dropped), giving 2C
chains of n draws; ranks r over all 2Cn draws (ties averaged) are mapped to normal scores::

    z = Phi^-1((r - 3/8) / (2Cn + 1/4))

    R-hat(z) = sqrt((B / W + n - 1) / n),   B = n var_c(mean_s z),   W = mean_c var_s(z)
    R-hat    = max(R-hat(z of x), R-hat(z of |x - median x|))           (bulk, then tails)

    ESS_bulk = 2Cn / tau,   tau = -1 + 2 sum_t rho_t   (autocorrelations of z, combined over
               chains, cut by Geyer's initial positive sequence and made monotone; at least
               1 / log10(2Cn))

ArviZ (``arviz.rhat``, ``arviz.ess(method="bulk")``) evaluates these one quantity at a time in
Python: on the 100 network outputs the default recipe checks, 50-90 ms a call, and a fit calls it
about 20 times (the stopping rule every 25 draws, the final diagnosis and its R-hat trace), 1.6-2.5
s of a 16-19 s fit on UCI yacht.  Here the ranks, normal scores, FFTs and variances run over all
quantities at once, and every reduction runs over the same contiguous numbers in the same order as
ArviZ's, so the results are ArviZ's bit for bit (``tests/diagnostics/test_rank_stats.py`` compares
them on random, tied, constant, NaN and odd-length draws).  ArviZ's own array backend
(``arviz-stats`` 0.8) loops over quantities too and was no faster (55 ms a call, measured).
"""

from __future__ import annotations

import numpy as np
from scipy import special, stats
from scipy.fftpack import next_fast_len  # 5-smooth lengths, as ArviZ pads (scipy.fft's are 11-smooth)

_BLOM = 3 / 8  # Blom's offset of the rank-to-normal-score map


def _as_quantities(draws: np.ndarray) -> np.ndarray:
    """Draws ``[C, S, ...]`` as ``[Q, C, S]`` float64, C-contiguous (Q: the trailing dimensions
    flattened)."""
    arr = np.asarray(draws, dtype=float)
    if arr.ndim < 2:
        raise ValueError(f"draws must be shaped [chain, draw, ...], got shape {arr.shape}.")
    c, s = arr.shape[:2]
    return np.ascontiguousarray(np.moveaxis(arr.reshape(c, s, -1), 2, 0))


def _split(q: np.ndarray) -> np.ndarray:
    """``[Q, C, S] -> [Q, 2C, S // 2]``: first halves of the chains, then their second halves."""
    half = q.shape[2] // 2
    return np.concatenate([q[:, :, :half], q[:, :, q.shape[2] - half :]], axis=1)


def _z_scale(q: np.ndarray) -> np.ndarray:
    """Normal scores of the ranks of each quantity's draws ``[Q, M, n]`` over its M n draws."""
    flat = q.reshape(q.shape[0], -1)
    rank = stats.rankdata(flat, method="average", axis=1)
    size = flat.shape[1]
    return special.ndtri((rank - _BLOM) / (size - 2 * _BLOM + 1)).reshape(q.shape)


def _rhat(z: np.ndarray) -> np.ndarray:
    """Classic R-hat of ``[Q, M, n]`` (NaN, as ArviZ's, where every draw is the same)."""
    n = z.shape[2]
    chain_mean = np.ascontiguousarray(z.mean(axis=2))
    chain_var = np.ascontiguousarray(z.var(axis=2, ddof=1))
    between = n * chain_mean.var(axis=1, ddof=1)
    within = chain_var.mean(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sqrt((between / within + n - 1) / n)


def rank_rhat(draws: np.ndarray) -> np.ndarray:
    """Rank-normalised split R-hat of every quantity of ``draws [chain, draw, ...]`` (flattened
    over the trailing dimensions): ``arviz.rhat``'s value for each, NaN where a quantity has a NaN
    draw, or where there are fewer than 2 chains or 4 draws."""
    q = _as_quantities(draws)
    out = np.full(q.shape[0], np.nan)
    if q.shape[1] < 2 or q.shape[2] < 4:
        return out
    ok = ~np.isnan(q).any(axis=(1, 2))
    if not ok.any():
        return out
    split = _split(q[ok])
    bulk = _rhat(_z_scale(split))
    median = np.median(split.reshape(split.shape[0], -1), axis=1)
    tail = _rhat(_z_scale(np.abs(split - median[:, None, None])))
    out[ok] = np.where(tail > bulk, tail, bulk)  # Python's max(bulk, tail), as ArviZ takes it
    return out


def bulk_ess(draws: np.ndarray) -> np.ndarray:
    """Bulk effective sample size of every quantity of ``draws [chain, draw, ...]``:
    ``arviz.ess(method="bulk")``'s value for each, NaN where a quantity has a NaN draw or there
    are fewer than 4 draws."""
    q = _as_quantities(draws)
    out = np.full(q.shape[0], np.nan)
    if q.shape[2] < 4:
        return out
    ok = ~np.isnan(q).any(axis=(1, 2))
    if not ok.any():
        return out
    z = _z_scale(_split(q[ok]))
    out[ok] = _ess(z)
    return out


def _autocov(z: np.ndarray) -> np.ndarray:
    """Autocovariances ``[Q, M, n]`` of every chain at every lag, by FFT (ArviZ's ``autocov``)."""
    n = z.shape[2]
    m = next_fast_len(2 * n)
    centred = z - z.mean(axis=2, keepdims=True)
    f = np.fft.rfft(centred, n=m, axis=2)
    f *= np.conjugate(f)
    cov = np.fft.irfft(f, n=m, axis=2)[:, :, :n]
    cov /= n
    return cov


def _ess(z: np.ndarray) -> np.ndarray:
    """ArviZ's ``_ess`` of normal scores ``[Q, M, n]``, the Geyer sequences run over all quantities
    in lockstep (each stops where its own would)."""
    nq, n_chain, n_draw = z.shape
    acov = _autocov(z)
    lag_mean = np.ascontiguousarray(np.moveaxis(acov, 2, 1)).mean(axis=2)  # [Q, n]: mean over chains
    chain_mean = np.ascontiguousarray(z.mean(axis=2))
    mean_var = lag_mean[:, 0] * n_draw / (n_draw - 1.0)
    var_plus = mean_var * (n_draw - 1.0) / n_draw
    if n_chain > 1:
        var_plus = var_plus + chain_mean.var(axis=1, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = 1.0 - (mean_var[:, None] - lag_mean) / var_plus[:, None]  # every lag's rho_hat
    rho[:, 0] = 1.0
    max_t = _geyer(rho, n_draw)
    ess = float(n_chain * n_draw)
    out = np.empty(nq)
    constant = (z.max(axis=(1, 2)) - z.min(axis=(1, 2))) < np.finfo(float).resolution
    for i in range(nq):  # each sum over its own prefix, pairwise as numpy sums it
        r, mt = rho[i], max_t[i]
        tau = -1.0 + 2.0 * np.sum(r[: mt + 1]) + np.sum(r[mt + 1 : mt + 2])
        tau = max(tau, 1 / np.log10(ess))
        out[i] = np.nan if np.isnan(r).any() else ess / tau
    out[constant] = ess
    return out


def _geyer(rho: np.ndarray, n_draw: int) -> np.ndarray:
    """Geyer's initial positive then monotone sequence, in place on ``rho [Q, n]`` (the lags past
    each quantity's cut zeroed, as ArviZ leaves them); returns each quantity's last lag ``max_t``."""
    full = rho.copy()
    rho[:, 2:] = 0.0
    even = np.ones(rho.shape[0])
    odd = full[:, 1].copy()
    t_end = np.ones(rho.shape[0], dtype=int)
    active = np.ones(rho.shape[0], dtype=bool)
    t = 1
    while t < n_draw - 3:  # the positive sequence: pairs while rho_even + rho_odd > 0
        active &= (even + odd) > 0.0
        if not active.any():
            break
        even = np.where(active, full[:, t + 1], even)
        odd = np.where(active, full[:, t + 2], odd)
        keep = active & ((even + odd) >= 0)
        rho[keep, t + 1], rho[keep, t + 2] = even[keep], odd[keep]
        t_end[active] = t + 2
        t += 2
    max_t = t_end - 2
    last = even > 0
    rho[last, max_t[last] + 1] = even[last]
    t = 1
    while t <= int(max_t.max()) - 2:  # monotone: no pair above the pair before it
        on = t <= max_t - 2
        rise = on & ((rho[:, t + 1] + rho[:, t + 2]) > (rho[:, t - 1] + rho[:, t]))
        rho[rise, t + 1] = (rho[rise, t - 1] + rho[rise, t]) / 2.0
        rho[rise, t + 2] = rho[rise, t + 1]
        t += 2
    return max_t
