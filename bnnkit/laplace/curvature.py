"""Curvature of the negative log-likelihood at the MAP, with curvlinops, in four structures.

For ``-log p(D | theta) = sum_n l(f(x_n; theta), y_n)`` the two curvatures are

.. math::

    \\text{GGN:}\\ H = \\sum_n J_n^T \\nabla_f^2 l_n\\, J_n, \\qquad
    \\text{EF:}\\ H = \\sum_n \\nabla_\\theta l_n \\nabla_\\theta l_n^T,

with ``J_n = d f(x_n) / d theta`` over the Laplace subset.  ``full`` and ``lowrank`` come from
curvlinops' ``GGNLinearOperator`` / ``EFLinearOperator`` (matrix products over the data),
``kron`` from its ``KFACLinearOperator`` (Linear and Conv2d layers).  ``diag`` is the exact
diagonal from per-example Jacobians (curvlinops' core offers only stochastic diagonal estimators,
which draw from the global RNG, and its exact one lives in ``curvlinops.experimental``, which
needs BackPACK).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from ..core.errors import BnnkitError
from ..core.flat import FlatView
from ..core.posterior import Posterior
from ..likelihoods import Bernoulli, Categorical
from .backend import batches, curvlinops, loss_and_unit, module_at, shaped_targets
from .structures import Diagonal, Eigen, Kron, KronBlock, Structure

STRUCTURES = ("full", "diag", "kron", "lowrank")
CURVATURES = ("ggn", "ef")
MAX_FULL = 20_000  # a dense P x P precision beyond this is gigabytes: use another structure
JAC_ELEMENTS = 1 << 22  # per-chunk size of the per-example Jacobians [B, C, P]


def check_names(structure: str, curvature: str) -> None:
    if structure not in STRUCTURES:
        raise BnnkitError(
            f"unknown Hessian structure {structure!r}; choose one of {', '.join(STRUCTURES)} "
            "('kron' is KFAC, 'lowrank' the top eigenpairs)."
        )
    if curvature not in CURVATURES:
        raise BnnkitError(
            f"unknown curvature {curvature!r}; choose 'ggn' (generalised Gauss-Newton) or 'ef' "
            "(empirical Fisher)."
        )


def compute(
    posterior: Posterior,
    net: Mapping[str, Tensor],
    subset: Sequence[str],
    b: Tensor,
    data: tuple[Tensor, Tensor],
    structure: str,
    curvature: str,
    batch_size: int,
    rank: int,
    gen: torch.Generator,
) -> Structure:
    """The likelihood curvature of ``data`` over ``subset`` at ``net`` in ``structure``."""
    check_names(structure, curvature)
    P = int(b.numel())
    if structure == "diag":
        return Diagonal(diagonal(posterior, net, subset, data, curvature, batch_size), b)
    cl = curvlinops()
    module, params = module_at(posterior, net, subset)
    loss, unit = loss_and_unit(posterior.likelihood, curvature)
    inputs, targets = data
    y = shaped_targets(posterior, module, inputs, targets)
    loader = batches(inputs, y, batch_size)
    if structure == "kron":
        return _kron(cl, module, params, subset, loss, unit, loader, curvature, b)
    op_cls = cl.GGNLinearOperator if curvature == "ggn" else cl.EFLinearOperator
    op = op_cls(module, loss, params, loader, check_deterministic=False, num_data=int(inputs.shape[0]))
    isq = b.rsqrt()

    def scaled(M: Tensor) -> Tensor:  # D^{-1/2} H D^{-1/2} M: the curvature in the prior's metric
        return isq[:, None] * (op @ (isq[:, None] * M)) * unit

    if structure == "full":
        if P > MAX_FULL:
            raise BnnkitError(
                f"a full {P} x {P} Hessian is too large; use structure='kron', 'diag' or 'lowrank', or a "
                "smaller subset (subset='last_layer')."
            )
        cols = [scaled(torch.eye(P, dtype=b.dtype)[:, i : i + 512]) for i in range(0, P, 512)]
        H = torch.cat(cols, 1)
        e, U = _eigh(0.5 * (H + H.T))
        return Eigen(U, e, b, "full")
    return _lowrank(scaled, P, rank, b, gen)


def _eigh(H: Tensor) -> tuple[Tensor, Tensor]:
    """Eigenpairs of the symmetric PSD ``H``, in float64: LAPACK's float32 ``syevd`` fails to
    converge on the near-singular curvature of networks with many dead or repeated features
    (measured: the bandit's last layer on one-hot contexts); a relative jitter is the fallback."""
    Hd = H.double()
    try:
        e, U = torch.linalg.eigh(Hd)
    except torch.linalg.LinAlgError:
        jitter = 1e-10 * float(Hd.diagonal().abs().max().clamp_min(1.0))
        e, U = torch.linalg.eigh(Hd + jitter * torch.eye(Hd.shape[0], dtype=Hd.dtype))
        e = e - jitter
    return e.clamp_min(0).to(H.dtype), U.to(H.dtype)


def _lowrank(scaled, P: int, rank: int, b: Tensor, gen: torch.Generator) -> Eigen:
    """Top-``rank`` eigenpairs by a randomised range finder (Halko et al. 2011, two power
    iterations), its test matrix drawn from ``gen``: a few passes over the data in all."""
    if not 1 <= rank < P:
        raise BnnkitError(
            f"rank must lie in [1, {P - 1}] for {P} parameters, got {rank!r}; use 'full' for all."
        )
    k = min(P, rank + 10)
    Q = torch.linalg.qr(scaled(torch.randn(P, k, generator=gen, dtype=b.dtype)))[0]
    for _ in range(2):
        Q = torch.linalg.qr(scaled(Q))[0]
    Bq = Q.T @ scaled(Q)
    e, W = torch.linalg.eigh(0.5 * (Bq + Bq.T))
    top = torch.argsort(e, descending=True)[:rank]
    return Eigen(Q @ W[:, top], e[top], b, "lowrank")


def _kron(cl, module, params, subset, loss, unit, loader, curvature, b) -> Kron:
    """KFAC blocks.  Weight and bias of a layer share one block (augmented inputs), which keeps
    their cross-curvature and makes KFAC exact for a single layer under a Gaussian likelihood;
    they are split only where the prior gives them different precisions."""
    kind = cl.FisherType.TYPE2 if curvature == "ggn" else cl.FisherType.EMPIRICAL
    view = FlatView({n: p for n, p in zip(subset, params)})
    joint = bool((b == b[0]).all())
    try:
        op = cl.KFACLinearOperator(
            module,
            loss,
            params,
            loader,
            fisher_type=kind,
            separate_weight_and_bias=not joint,
            check_deterministic=False,
            num_data=sum(int(x.shape[0]) for x, _ in loader),
        )
    except NotImplementedError as e:
        raise BnnkitError(
            "KFAC ('kron') covers the parameters of Linear and Conv2d layers only; the subset holds others. "
            "Use structure='diag', 'lowrank' or 'full', or restrict subset= to Linear / Conv2d layers."
        ) from e
    op.compute_kronecker_factors()
    state = op.state_dict()
    A, G = state["input_covariances"], state["gradient_covariances"]

    def rows(name: str) -> Tensor:  # flat positions of a tensor as [out, rest]
        sl = view.slice(name)
        return torch.arange(sl.start, sl.stop).reshape(int(view.shapes[view.names.index(name)][0]), -1)

    blocks = []
    for mod_name, pos in op._mapping.items():  # layer -> {"weight": i, "bias": j} into params
        g, qg = torch.linalg.eigh(unit * G[mod_name])  # the unit factor goes into G
        g = g.clamp_min(0)
        if joint and len(pos) == 2:
            idx = torch.cat([rows(subset[pos["weight"]]), rows(subset[pos["bias"]])], 1)
            a, qa = torch.linalg.eigh(A[mod_name])
            blocks.append(
                KronBlock(idx.reshape(-1), idx.shape[0], idx.shape[1], qg, g, qa, a.clamp_min(0), float(b[0]))
            )
            continue
        for pname, i in pos.items():
            idx = rows(subset[i])
            bb = float(b[idx.reshape(-1)[0]])
            if pname == "weight":
                a, qa = torch.linalg.eigh(A[mod_name])
                blocks.append(
                    KronBlock(idx.reshape(-1), idx.shape[0], idx.shape[1], qg, g, qa, a.clamp_min(0), bb)
                )
            else:
                blocks.append(KronBlock(idx.reshape(-1), idx.shape[0], 1, qg, g, None, None, bb))
    return Kron(blocks, int(b.numel()))


# ---------------------------------------------------------------------------- Jacobians / diagonal
def output_and_jacobian(
    posterior: Posterior, net: Mapping[str, Tensor], subset: Sequence[str], inputs: Tensor
) -> tuple[Tensor, Tensor]:
    """Outputs ``[B, C]`` and per-example Jacobians ``[B, C, P]`` over ``subset`` at ``net``."""
    chosen = {n: net[n] for n in subset}
    sub = FlatView(chosen)
    theta = sub.ravel(chosen).detach()

    def f(t: Tensor) -> Tensor:
        out = posterior.forward({**net, **sub.unravel(t)}, inputs)
        return out.reshape(out.shape[0], -1)

    J = torch.func.jacrev(f)(theta)
    with torch.no_grad():
        out = f(theta)
    return out.detach(), J.detach()


def jacobian_chunks(posterior, net, subset, inputs: Tensor, P: int):
    """``output_and_jacobian`` over row chunks small enough to keep ``[B, C, P]`` modest."""
    with torch.no_grad():
        C = posterior.forward(dict(net), inputs[:1]).reshape(1, -1).shape[1]
    rows = max(1, JAC_ELEMENTS // (C * P))
    for i in range(0, int(inputs.shape[0]), rows):
        yield i, *output_and_jacobian(posterior, net, subset, inputs[i : i + rows])


def diagonal(posterior, net, subset, data, curvature: str, batch_size: int) -> Tensor:
    """Exact diagonal of the GGN / EF of the unit-precision NLL.

    GGN: ``sum_n sum_{c,c'} J_{nci} [nabla_f^2 l_n]_{cc'} J_{nc'i}``, with ``nabla_f^2 l`` = ``I``
    (Gaussian), ``diag(p) - p p^T`` (Categorical), ``p(1 - p)`` (Bernoulli).
    EF: ``sum_n (sum_c r_{nc} J_{nci})^2`` with ``r = nabla_f l`` = ``f - y``, ``p - onehot(y)``, ``p - y``.
    """
    inputs, targets = data
    lik = posterior.likelihood
    P = sum(int(net[n].numel()) for n in subset)
    h = None
    for i, f, J in jacobian_chunks(posterior, net, subset, inputs, P):
        y = targets[i : i + f.shape[0]]
        if isinstance(lik, Categorical):
            p = torch.softmax(f, -1)
            if curvature == "ggn":
                pj = torch.einsum("bc,bcp->bp", p, J)
                d = torch.einsum("bc,bcp->p", p, J * J) - (pj * pj).sum(0)
            else:
                r = p - torch.nn.functional.one_hot(y.long(), f.shape[1]).to(f.dtype)
                d = torch.einsum("bc,bcp->bp", r, J).pow(2).sum(0)
        else:
            yy = y.to(f.dtype).reshape(f.shape)
            if isinstance(lik, Bernoulli):
                p = torch.sigmoid(f)
                w, r = p * (1 - p), p - yy
            else:  # Gaussian at unit precision
                w, r = torch.ones_like(f), f - yy
            if curvature == "ggn":
                d = torch.einsum("bc,bcp->p", w, J * J)
            else:
                d = torch.einsum("bc,bcp->bp", r, J).pow(2).sum(0)
        h = d if h is None else h + d
    return h
