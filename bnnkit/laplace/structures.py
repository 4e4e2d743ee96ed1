"""Posterior precisions of the Laplace approximation, one class per curvature structure.

Every structure stores the likelihood curvature ``H`` at unit hyperparameters and represents

.. math::

    \\Lambda(s, m) = s\\,H + m\\,D, \\qquad D = \\operatorname{diag}(b),

where ``b`` is the prior's base precision per weight (``1/scale^2`` of the GaussianPrior), ``m``
the prior-precision multiplier and ``s`` the likelihood scale (the noise precision ``tau`` for a
Gaussian GGN, ``tau^2`` for a Gaussian empirical Fisher, 1 for classification).  Keeping ``s`` and
``m`` out of the stored matrix is what makes the marginal likelihood cheap to optimise: every
structure pre-computes a factorisation once, and ``log det Lambda``, draws ``Lambda^{-1/2} eps``
and the functional variance ``J Lambda^{-1} J^T`` are then closed forms in ``(s, m)``,
differentiable for the marginal-likelihood optimiser.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


class Structure:
    """Interface: ``logdet``, ``sample``, ``functional_variance``, ``covariance`` in ``(s, m)``."""

    name = "base"

    def logdet(self, s: Tensor, m: Tensor) -> Tensor:
        """``log det Lambda(s, m)``."""
        raise NotImplementedError

    def sample(self, eps: Tensor, s: Tensor, m: Tensor) -> Tensor:
        """``Lambda^{-1/2} eps`` for standard normal ``eps`` ``[n, P]``: draws of ``theta - theta*``."""
        raise NotImplementedError

    def functional_variance(self, J: Tensor, s: Tensor, m: Tensor) -> Tensor:
        """``J Lambda^{-1} J^T`` per input: ``J`` is ``[B, C, P]``, the result ``[B, C, C]``."""
        raise NotImplementedError

    def covariance(self, s: Tensor, m: Tensor) -> Tensor:
        """The dense ``Lambda^{-1}`` ``[P, P]`` (small models and tests only)."""
        raise NotImplementedError


class Eigen(Structure):
    """Full (``rank = P``) or low-rank GGN / Fisher in the prior's metric.

    With ``D^{-1/2} H D^{-1/2} = U diag(e) U^T`` (all ``P`` or the top ``k`` eigenpairs),

    .. math::

        \\log\\det\\Lambda = \\sum_i \\log b_i + \\sum_{j \\le k} \\log(s e_j + m) + (P - k) \\log m,

        \\Lambda^{-1} = D^{-1/2}\\,\\tfrac{1}{m}\\bigl(I - U \\operatorname{diag}(\\tfrac{s e}{s e + m})
        U^T\\bigr)\\,D^{-1/2},

    and ``Lambda^{-1/2} eps = D^{-1/2} m^{-1/2} (eps - U diag(1 - sqrt(m / (s e + m))) U^T eps)``.
    The low-rank form drops the curvature outside the top-``k`` subspace (there the posterior is
    the prior).
    """

    def __init__(self, U: Tensor, e: Tensor, b: Tensor, name: str):
        self.U, self.e, self.b, self.name = U, e.clamp_min(0), b, name
        self.P, self.k = U.shape
        self._isq = b.rsqrt()

    def logdet(self, s: Tensor, m: Tensor) -> Tensor:
        return self.b.log().sum() + torch.log(s * self.e + m).sum() + (self.P - self.k) * torch.log(m)

    def sample(self, eps: Tensor, s: Tensor, m: Tensor) -> Tensor:
        shrink = 1 - torch.sqrt(m / (s * self.e + m))
        z = eps - ((eps @ self.U) * shrink) @ self.U.T
        return z * m.rsqrt() * self._isq

    def functional_variance(self, J: Tensor, s: Tensor, m: Tensor) -> Tensor:
        Js = J * self._isq
        JU = Js @ self.U  # [B, C, k]
        if self.k == self.P:  # full rank: the direct form, no cancellation when s e >> m
            return torch.einsum("bck,k,bdk->bcd", JU, 1 / (s * self.e + m), JU)
        w = s * self.e / (s * self.e + m)
        return (Js @ Js.transpose(1, 2) - torch.einsum("bck,k,bdk->bcd", JU, w, JU)) / m

    def covariance(self, s: Tensor, m: Tensor) -> Tensor:
        if self.k == self.P:
            inner = (self.U / (s * self.e + m)) @ self.U.T
        else:
            w = s * self.e / (s * self.e + m)
            inner = (torch.eye(self.P, dtype=self.U.dtype) - (self.U * w) @ self.U.T) / m
        return self._isq[:, None] * inner * self._isq[None, :]


class Diagonal(Structure):
    """Diagonal GGN / Fisher: ``Lambda = diag(s h + m b)``, every operation elementwise."""

    name = "diag"

    def __init__(self, h: Tensor, b: Tensor):
        self.h, self.b = h.clamp_min(0), b

    def _lam(self, s: Tensor, m: Tensor) -> Tensor:
        return s * self.h + m * self.b

    def logdet(self, s: Tensor, m: Tensor) -> Tensor:
        return self._lam(s, m).log().sum()

    def sample(self, eps: Tensor, s: Tensor, m: Tensor) -> Tensor:
        return eps * self._lam(s, m).rsqrt()

    def functional_variance(self, J: Tensor, s: Tensor, m: Tensor) -> Tensor:
        return torch.einsum("bcp,p,bdp->bcd", J, 1 / self._lam(s, m), J)

    def covariance(self, s: Tensor, m: Tensor) -> Tensor:
        return torch.diag(1 / self._lam(s, m))


@dataclass
class KronBlock:
    """One Linear / Conv2d layer (or its weight or bias alone): ``H_block = G (x) A``.

    ``idx`` lists the block's flat positions in the subset in the row-major order of an
    ``[out, inp]`` matrix: the weight viewed as ``[out, in]`` (a conv kernel as
    ``[out, in kh kw]``), with the bias as an extra last column when weight and bias share the
    block (then ``A`` is the covariance of the inputs augmented by a 1); a bias alone has
    ``inp = 1`` and ``A = None``.
    """

    idx: Tensor
    out: int
    inp: int
    qg: Tensor
    g: Tensor
    qa: Tensor | None
    a: Tensor | None
    b: float  # the prior's base precision on this block

    def eig(self) -> Tensor:
        return self.g[:, None] * (self.a[None, :] if self.a is not None else torch.ones_like(self.g)[:, None])


class Kron(Structure):
    """KFAC: block diagonal over parameter tensors, each block a Kronecker product ``G (x) A``.

    With ``G = Q_G diag(g) Q_G^T`` and ``A = Q_A diag(a) Q_A^T`` the block precision
    ``s G (x) A + m b I`` has eigenvectors ``Q_G (x) Q_A`` and eigenvalues ``s g_i a_j + m b``,
    so log-determinant, draws and ``J Lambda^{-1} J^T`` need only the two small factors.
    """

    name = "kron"

    def __init__(self, blocks: list[KronBlock], P: int):
        self.blocks, self.P = blocks, P

    def logdet(self, s: Tensor, m: Tensor) -> Tensor:
        return sum(torch.log(s * bl.eig() + m * bl.b).sum() for bl in self.blocks)

    def _rotate(self, X: Tensor, bl: KronBlock, back: bool) -> Tensor:
        """``Q_G^T X Q_A`` (``back=False``) or ``Q_G X Q_A^T`` for ``X`` of shape ``[..., out, in]``."""
        qg = bl.qg if back else bl.qg.T
        X = qg @ X
        if bl.qa is not None:
            X = X @ (bl.qa.T if back else bl.qa)
        return X

    def sample(self, eps: Tensor, s: Tensor, m: Tensor) -> Tensor:
        out = torch.empty_like(eps)
        for bl in self.blocks:
            z = eps[:, bl.idx].reshape(-1, bl.out, bl.inp) * (s * bl.eig() + m * bl.b).rsqrt()
            out[:, bl.idx] = self._rotate(z, bl, back=True).reshape(eps.shape[0], -1)
        return out

    def functional_variance(self, J: Tensor, s: Tensor, m: Tensor) -> Tensor:
        B, C, _ = J.shape
        var = J.new_zeros(B, C, C)
        for bl in self.blocks:
            Jr = self._rotate(J[..., bl.idx].reshape(B, C, bl.out, bl.inp), bl, back=False)
            var = var + torch.einsum("bcoi,oi,bdoi->bcd", Jr, 1 / (s * bl.eig() + m * bl.b), Jr)
        return var

    def covariance(self, s: Tensor, m: Tensor) -> Tensor:
        cov = torch.zeros(self.P, self.P, dtype=self.blocks[0].g.dtype)
        for bl in self.blocks:
            q = bl.qg if bl.qa is None else torch.kron(bl.qg, bl.qa)
            lam = (s * bl.eig() + m * bl.b).reshape(-1)
            i = bl.idx
            cov[i[:, None], i[None, :]] = (q / lam) @ q.T
        return cov


def structure_state(st: Structure) -> dict:
    """A structure's tensors and sizes (tensors, numbers and strings only: a safe
    ``torch.load(weights_only=True)``); :func:`structure_from_state` rebuilds it."""
    if isinstance(st, Diagonal):
        return {"kind": "diag", "h": st.h, "b": st.b}
    if isinstance(st, Eigen):
        return {"kind": "eigen", "U": st.U, "e": st.e, "b": st.b, "name": st.name}
    if isinstance(st, Kron):
        blocks = [
            {k: v for k, v in vars(bl).items() if v is not None} | {"has_a": bl.a is not None}
            for bl in st.blocks
        ]
        return {"kind": "kron", "P": st.P, "blocks": blocks}
    raise TypeError(f"no saved form for the structure {type(st).__name__}")


def structure_from_state(state: dict) -> Structure:
    kind = state["kind"]
    if kind == "diag":
        return Diagonal(state["h"], state["b"])
    if kind == "eigen":
        return Eigen(state["U"], state["e"], state["b"], state["name"])
    blocks = []
    for b in state["blocks"]:
        fields = {k: v for k, v in b.items() if k != "has_a"}
        fields.setdefault("qa", None)
        fields.setdefault("a", None)
        blocks.append(KronBlock(**fields))
    return Kron(blocks, state["P"])
