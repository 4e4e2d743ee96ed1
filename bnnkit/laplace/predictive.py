"""The linearised (GLM) predictive of the Laplace approximation.

Linearising the network at the MAP, ``f(x; theta) ~ f(x; theta*) + J(x) (theta - theta*)``, turns
the Gaussian weight posterior into a Gaussian over outputs (Immer et al. 2021):

.. math::

    f(x) \\sim N\\bigl(f(x; \\theta^*),\\; V(x) = J(x)\\,\\Lambda^{-1} J(x)^T\\bigr).

* regression: ``y ~ N(f(x; theta*), diag V(x) + 1/tau)`` in closed form;
* classification, probit: ``p(y | x) ~ softmax(f / sqrt(1 + pi/8 diag V))`` (MacKay 1992; the
  sigmoid version is exact in the limit of the probit link);
* classification, MC: average ``softmax(f_s)`` over ``f_s ~ N(f, V)``, drawn from a generator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ..core.errors import BnnkitError
from ..likelihoods import Bernoulli, Gaussian
from ..predict.predictive import ClassificationPredictive, GaussianSummary, _as_targets, gaussian_log_density
from .curvature import jacobian_chunks


@dataclass
class GLMRegressionPredictive(GaussianSummary):
    """Gaussian predictive ``N(mean, epistemic + aleatoric)`` per input (same interface as
    :class:`~bnnkit.predict.predictive.RegressionPredictive`)."""

    mean: Tensor
    epistemic_variance: Tensor
    noise_var: Tensor  # scalar

    @property
    def aleatoric_variance(self) -> Tensor:
        return self.noise_var.expand_as(self.mean)

    @property
    def variance(
        self,
    ) -> Tensor:  # the scalar noise broadcast as the sum promotes it: the result's dtype is V's
        return self.epistemic_variance + self.noise_var

    def log_prob(self, y: Tensor) -> Tensor:
        return gaussian_log_density(_as_targets(y, self.mean.shape), self.mean, self.variance)


def glm_predict(la, inputs: Tensor, link: str, num_samples: int, gen: torch.Generator):
    """The GLM predictive of the fitted Laplace ``la`` at ``inputs``."""
    if link not in ("probit", "mc"):
        raise BnnkitError(f"link must be 'probit' or 'mc', got {link!r}.")
    s, m = la._lik_scale(la._log_tau), la._log_m.exp()
    fs, vs = [], []
    for _, f, J in jacobian_chunks(la._base, la.map_params, la.subset, inputs, la.num_params):
        fs.append(f)
        vs.append(la._structure.functional_variance(J, s, m))
    f, V = torch.cat(fs), torch.cat(vs)
    lik = la._base.likelihood
    if isinstance(lik, Gaussian):
        var = torch.diagonal(V, dim1=1, dim2=2)
        if f.shape[1] == 1:
            f, var = f[:, 0], var[:, 0]
        return GLMRegressionPredictive(f, var, (-la._log_tau).exp().to(f.dtype))
    if link == "probit":
        kappa = (1 + math.pi / 8 * torch.diagonal(V, dim1=1, dim2=2)).rsqrt()
        logits = f * kappa
        if isinstance(lik, Bernoulli):
            p1 = torch.sigmoid(logits[:, 0])
            return ClassificationPredictive(torch.stack([1 - p1, p1], -1))
        return ClassificationPredictive(torch.softmax(logits, -1))
    jitter = 1e-10 * torch.eye(V.shape[-1], dtype=V.dtype)
    L = torch.linalg.cholesky(V + jitter)
    eps = torch.randn(num_samples, *f.shape, generator=gen, dtype=f.dtype)
    fsamp = f + torch.einsum("bcd,sbd->sbc", L, eps)
    if isinstance(lik, Bernoulli):
        p1 = torch.sigmoid(fsamp[..., 0]).mean(0)
        return ClassificationPredictive(torch.stack([1 - p1, p1], -1))
    return ClassificationPredictive(torch.softmax(fsamp, -1).mean(0))
