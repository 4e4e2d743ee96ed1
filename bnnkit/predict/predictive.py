"""Posterior predictive distributions from draws (MCMC, importance sampling or VI).

Regression (Gaussian likelihood): a mixture of Gaussians over draws ``s`` with weights ``w_s``
(``1/S`` for MCMC, the normalised importance weights for importance sampling)::

    mean      = sum_s w_s f_s(x)
    epistemic = sum_s w_s (f_s(x) - mean)^2
    aleatoric = sum_s w_s sigma_s^2
    NLL(y)    = -log sum_s w_s N(y; f_s(x), sigma_s^2)        (log-sum-exp over draws)

Classification (Bernoulli / Categorical): ``p(y | x) = sum_s w_s softmax(f_s(x))``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from ..core.errors import BnnkitError
from ..core.posterior import Posterior
from ..core.samples import Samples
from ..likelihoods import Bernoulli, Categorical, Gaussian
from .metrics import nonfinite_rows

LOG_2PI = math.log(2 * math.pi)


def _draws(samples: Samples | Tensor) -> Tensor:
    if isinstance(samples, Samples):
        return samples.flat()
    if samples.ndim == 1:
        return samples.unsqueeze(0)
    return samples.reshape(-1, samples.shape[-1])


def _draw_chunks(samples: Samples | Tensor, chunk: int) -> Iterator[Tensor]:
    """Flat draws ``[n, D]`` a chunk at a time; stored runs are read from disk chunk by chunk."""
    if isinstance(samples, Samples):
        yield from samples.iter_flat(chunk)
        return
    draws = _draws(samples)
    for i in range(0, draws.shape[0], chunk):
        yield draws[i : i + chunk]


def _log_weights(samples: Samples | Tensor, num: int, weights: Tensor | None) -> Tensor:
    if weights is not None:
        w = torch.as_tensor(weights, dtype=torch.float64).reshape(-1)
        if w.numel() != num or (w < 0).any() or not bool(w.sum() > 0):
            raise BnnkitError(f"weights must be {num} non-negative numbers with a positive sum.")
        lw = torch.log(w)
        return lw - torch.logsumexp(lw, 0)
    if isinstance(samples, Samples) and samples.log_weights is not None:
        return samples.log_weights
    return torch.full((num,), -math.log(num), dtype=torch.float64)


# A vmapped call's inputs (draws x rows x numbers a row): 16,384 pairs of a 32-feature row.  The
# activations scale with it: the MNIST CNN's 16,384 pairs a call (600 MB of activations) predicted
# 2.75x slower than the 668 this budget gives, with equal outputs.
INPUT_BUDGET = 1 << 19
MAX_PAIRS = 16384
MIN_ROWS = 8


def network_outputs(
    posterior: Posterior,
    samples: Samples | Tensor,
    inputs: Tensor,
    chunk: int = 256,
    max_pairs: int | None = None,
    progress: bool = False,
) -> Tensor:
    """Network outputs ``[S, N, ...]`` for every draw (no gradient), ``torch.func.vmap`` over draws.

    Draws are read ``chunk`` at a time, so a :class:`~bnnkit.StoredSamples` run is never loaded
    whole, and each vmapped call sees at most ``max_pairs`` (draw, input) pairs: its intermediate
    activations are ``draws x rows`` copies of the network's (40 draws of the MNIST CNN over 10,000
    test images in one call needed over 20 GB), so memory is that of the outputs plus one block.
    By default ``max_pairs`` holds a call's inputs to :data:`INPUT_BUDGET` numbers (at most 16,384
    pairs): a small-input MLP takes 16,384 pairs a call, an MNIST image 668.  ``progress``: a
    progress bar over the draws.
    """
    from tqdm.auto import tqdm

    if not (hasattr(posterior, "forward") and hasattr(posterior, "split")):
        raise BnnkitError(
            f"predicting needs the bnnkit.Posterior the draws were taken from, got {type(posterior).__name__}."
        )
    if hasattr(posterior, "check_inputs"):
        inputs = posterior.check_inputs(inputs)
    if not isinstance(samples, (Samples, Tensor)):
        raise BnnkitError(
            f"samples must be a bnnkit.Samples (what bnnkit.sample returns) or a tensor of flat draws [..., "
            f"{posterior.view.size}], got {type(samples).__name__}."
        )

    def one(x: Tensor, rows: Tensor) -> Tensor:
        return posterior.forward(posterior.split(x)[0], rows)

    batched = torch.func.vmap(one, in_dims=(0, None))
    if max_pairs is None:
        row = max(1, inputs[:1].numel())
        max_pairs = min(MAX_PAIRS, max(1, INPUT_BUDGET // row))
    outs = []
    total = samples.num_chains * samples.num_draws if isinstance(samples, Samples) else None
    bar = tqdm(total=total, desc="predicting", unit="draw", disable=not progress, leave=False)
    with torch.no_grad(), bar:
        for draws in _draw_chunks(samples, chunk):
            if draws.shape[-1] != posterior.view.size:
                raise BnnkitError(
                    f"draws have {draws.shape[-1]} parameters but the posterior has {posterior.view.size}; "
                    "use the posterior the samples were drawn from."
                )
            # at least MIN_ROWS rows a call: fewer draws a call where the rows are large
            per_call = max(1, min(draws.shape[0], max_pairs // MIN_ROWS))
            step = max(1, max_pairs // per_call)
            blocks = [inputs[i : i + step] for i in range(0, inputs.shape[0], step)] or [inputs]
            try:
                outs.append(
                    torch.cat(
                        [
                            torch.cat([batched(part, rows) for rows in blocks], 1)
                            for part in draws.split(per_call)
                        ]
                    )
                )
            except (RuntimeError, ValueError):  # modules vmap cannot trace: loop over draws
                try:
                    outs.append(torch.stack([torch.cat([one(x, rows) for rows in blocks]) for x in draws]))
                except RuntimeError as err:
                    raise BnnkitError(
                        f"the model failed on inputs of shape {tuple(inputs.shape)}: {err}. Check that the inputs "
                        "are shaped as for training (one row per example, the same features)."
                    ) from err
            bar.update(draws.shape[0])
    return torch.cat(outs)


class GaussianSummary:
    """What a regression predictive derives from its ``mean``, ``epistemic_variance``,
    ``aleatoric_variance`` and per-point ``log_prob``: the total variance, its standard
    deviation, the mean NLL and a central interval."""

    @property
    def variance(self) -> Tensor:
        """Total predictive variance = aleatoric + epistemic."""
        return self.aleatoric_variance + self.epistemic_variance

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def nll(self, y: Tensor) -> float:
        """Mean negative log predictive density."""
        return float(-self.log_prob(y).mean())

    def interval(self, level: float = 0.95) -> tuple[Tensor, Tensor]:
        """Central interval of a Gaussian with the predictive's mean and total variance."""
        return gaussian_interval(self.mean, self.stddev, level)


@dataclass
class RegressionPredictive(GaussianSummary):
    """Gaussian-mixture predictive at ``N`` inputs; ``f`` are the draws' means ``[S, N]``."""

    f: Tensor
    noise_var: Tensor  # [S, 1] per-draw noise variance
    log_weights: Tensor  # [S]

    @property
    def _w(self) -> Tensor:
        return self.log_weights.exp().to(self.f.dtype).unsqueeze(-1)

    @property
    def mean(self) -> Tensor:
        return (self._w * self.f).sum(0)

    @property
    def epistemic_variance(self) -> Tensor:
        return (self._w * (self.f - self.mean) ** 2).sum(0)

    @property
    def aleatoric_variance(self) -> Tensor:
        return (self._w * self.noise_var).sum(0).expand_as(self.mean)

    def log_prob_draws(self, y: Tensor) -> Tensor:
        """Per-draw, per-point log density ``log N(y_n; f_s(x_n), sigma_s^2)``, ``[S, N]``: the
        pointwise log-likelihood matrix of PSIS-LOO (:func:`bnnkit.diagnostics.psis_loo`)."""
        return gaussian_log_density(_as_targets(y, self.f.shape[1:]), self.f, self.noise_var)

    def log_prob(self, y: Tensor) -> Tensor:
        """Per-point log predictive density (log-sum-exp over draws)."""
        lp = self.log_prob_draws(y)
        return torch.logsumexp(lp + self.log_weights.to(lp.dtype).unsqueeze(-1), 0)


@dataclass
class ClassificationPredictive:
    """Averaged class probabilities ``[N, C]`` (C = 2 for Bernoulli)."""

    probs: Tensor

    @property
    def mean(self) -> Tensor:
        return self.probs

    def nll(self, y: Tensor) -> float:
        """Mean negative log predictive probability of the labels ``y`` (class indices ``[N]``)."""
        from .metrics import _classification

        _, y = _classification("nll", self.probs, y, simplex=False)
        p = self.probs.gather(-1, y.reshape(-1, 1)).squeeze(-1)
        return float(-torch.log(p.clamp_min(1e-40)).mean())

    def predicted_class(self) -> Tensor:
        return self.probs.argmax(-1)

    def entropy(self) -> Tensor:
        p = self.probs.clamp_min(1e-40)
        return -(self.probs * p.log()).sum(-1)


def predict(
    posterior: Posterior,
    samples: Samples | Tensor,
    inputs: Tensor,
    weights: Tensor | None = None,
    progress: bool = False,
) -> RegressionPredictive | ClassificationPredictive:
    """Posterior predictive at ``inputs`` from draws of ``posterior``.

    ``samples`` is a :class:`~bnnkit.Samples` (importance weights are used when it has them) or a
    tensor of flat draws ``[..., D]``; ``weights`` overrides with explicit non-negative weights.
    ``progress``: a progress bar over the draws (many draws of a large network on many inputs
    take minutes).  A Gaussian posterior with a ``predictive_widening`` (a callable giving a
    variance ``[N]`` at the inputs, e.g. :class:`bnnkit.functional.widening.PriorWidening`) has it
    added to every draw's noise variance.
    """
    out = network_outputs(posterior, samples, inputs, progress=progress)
    lw = _log_weights(samples, out.shape[0], weights).to(out.device)
    lik = posterior.likelihood
    if isinstance(lik, Gaussian):
        f = out.squeeze(-1) if out.ndim == 3 and out.shape[-1] == 1 else out
        if lik.learn_noise:
            idx = posterior.view.slice("likelihood.log_precision")
            log_tau = torch.cat([d[:, idx] for d in _draw_chunks(samples, 4096)])
            noise_var = torch.exp(-log_tau).reshape(-1, *([1] * (f.ndim - 1)))
        else:
            noise_var = torch.full(
                (out.shape[0], *([1] * (f.ndim - 1))), lik.noise**2, dtype=f.dtype, device=f.device
            )
        widen = getattr(posterior, "predictive_widening", None)  # e.g. a functional prior's spread
        if widen is not None:
            v = widen(inputs).to(device=f.device, dtype=f.dtype)
            noise_var = noise_var + v.reshape(1, -1, *([1] * (f.ndim - 2)))
        return RegressionPredictive(f, noise_var.to(f.dtype), lw)
    w = lw.exp().to(out.dtype)
    if isinstance(lik, Bernoulli):
        p1 = torch.sigmoid(out.squeeze(-1) if out.shape[-1] == 1 else out)
        probs = torch.stack([1 - p1, p1], -1)
    elif isinstance(lik, Categorical):
        probs = torch.softmax(out, -1)
    else:
        raise BnnkitError(f"no predictive for likelihood {type(lik).__name__}.")
    return ClassificationPredictive(torch.einsum("s,s...->...", w, probs))


def gaussian_log_density(y: Tensor, mean: Tensor, var: Tensor) -> Tensor:
    """``log N(y; mean, var)``, elementwise (broadcast)."""
    return -0.5 * ((y - mean) ** 2 / var + torch.log(var) + LOG_2PI)


def gaussian_interval(mean: Tensor, stddev: Tensor, level: float) -> tuple[Tensor, Tensor]:
    """The central ``level`` interval ``mean -+ z stddev`` of a Gaussian (``z`` its quantile)."""
    z = math.sqrt(2) * torch.erfinv(torch.tensor(level, dtype=torch.float64)).item()
    return mean - z * stddev, mean + z * stddev


def _as_targets(y: Tensor, shape: torch.Size) -> Tensor:
    """Regression targets ``y`` for predictions of ``shape``: a tensor or NumPy array, finite."""
    if not isinstance(y, Tensor):
        if isinstance(y, (str, bytes)) or not (hasattr(y, "__array__") or isinstance(y, (list, tuple))):
            raise BnnkitError(f"targets must be a torch.Tensor or a NumPy array, got {type(y).__name__}.")
        y = torch.as_tensor(y)
    if y.dtype == torch.bool or y.is_complex():
        raise BnnkitError(f"regression targets must be real numbers, got dtype {y.dtype}.")
    if y.shape != shape:
        if y.numel() != math.prod(shape):
            raise BnnkitError(
                f"targets of shape {tuple(y.shape)} do not match predictions of shape {tuple(shape)}; give one "
                "target per input row."
            )
        y = y.reshape(shape)
    where = nonfinite_rows(y)
    if where is not None:
        raise BnnkitError(f"targets contain NaN or inf {where}; remove those rows before scoring.")
    return y
