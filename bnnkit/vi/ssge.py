"""Spectral Stein gradient estimator (Shi, Sun & Zhu 2018) of the score ``grad log q(x)``.

From samples ``x_1..x_S ~ q`` only (``q`` implicit).  With an RBF kernel ``k`` of bandwidth ``h``
(median heuristic), the Gram matrix ``K = U diag(lambda) U^T`` gives Nystrom estimates of the
eigenfunctions of the kernel operator under ``q``::

    psi_j(x) = sqrt(S) / lambda_j * sum_m k(x, x_m) U_mj

Stein's identity ``E_q[grad psi_j] = -E_q[psi_j grad log q]`` and orthonormality of the ``psi_j``
give the expansion ``grad log q(x) ~ sum_{j<=J} beta_j psi_j(x)`` with
``beta_j = -(1/S) sum_m grad psi_j(x_m)``.  ``J`` keeps the eigenvalues holding
``1 - eta`` of the spectrum (or a fixed number).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..core.errors import BnnkitError


def _median_bandwidth(x: Tensor) -> Tensor:
    d2 = torch.cdist(x, x).square()
    s = x.shape[0]
    off = d2[~torch.eye(s, dtype=torch.bool, device=x.device)]
    return (off.median() / 2).clamp_min(1e-12).sqrt()  # k = exp(-d^2 / (2 h^2)), h^2 = median(d^2) / 2


def ssge_score(
    samples: Tensor, points: Tensor | None = None, num_eigen: int | None = None, threshold: float = 0.9
) -> Tensor:
    """Estimate ``grad log q`` at ``points`` (default: the samples) from ``samples [S, D]``.

    Args:
        samples: draws ``[S, D]`` from ``q`` (no gradient is taken through them).
        points: where to evaluate the score, ``[P, D]``.
        num_eigen: number of eigenfunctions ``J``; by default the smallest ``J`` whose eigenvalues
            hold ``threshold`` of the Gram matrix's trace.
    """
    if samples.ndim != 2 or samples.shape[0] < 3:
        raise BnnkitError(f"ssge_score needs samples [S, D] with S >= 3, got shape {tuple(samples.shape)}.")
    x = samples.detach().double()
    y = x if points is None else points.detach().double()
    s = x.shape[0]
    h = _median_bandwidth(x)
    kxx = torch.exp(-torch.cdist(x, x).square() / (2 * h * h))
    lam, u = torch.linalg.eigh(kxx)
    lam, u = lam.flip(0), u.flip(1)  # descending
    if num_eigen is None:
        frac = torch.cumsum(lam.clamp_min(0), 0) / lam.clamp_min(0).sum()
        num_eigen = int((frac < threshold).sum()) + 1
    j = max(1, min(num_eigen, s - 1))
    lam, u = lam[:j].clamp_min(1e-12), u[:, :j]
    scale = s**0.5 / lam  # [J]

    def psi_and_grad(z: Tensor) -> tuple[Tensor, Tensor]:
        kzx = torch.exp(-torch.cdist(z, x).square() / (2 * h * h))  # [P, S]
        psi = kzx @ u * scale  # [P, J]
        # grad_z k(z, x_m) = -(z - x_m) / h^2 k(z, x_m)
        diff = z[:, None, :] - x[None, :, :]  # [P, S, D]
        gk = -diff / (h * h) * kzx[..., None]  # [P, S, D]
        gpsi = torch.einsum("psd,sj->pjd", gk, u) * scale[None, :, None]  # [P, J, D]
        return psi, gpsi

    _, gpsi_x = psi_and_grad(x)
    beta = -gpsi_x.mean(0)  # [J, D]
    psi_y, _ = psi_and_grad(y)
    return (psi_y @ beta).to(samples.dtype)  # [P, D]
