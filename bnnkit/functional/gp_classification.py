"""A GP prior on logits fitted by the classification marginal likelihood (Laplace approximation).

Model (Rasmussen & Williams 2006, sections 3.4-3.5): ``C`` latent functions ``f_c ~ GP(0, k)``,
independent, with **one shared kernel** ``k`` (the functional prior of
:class:`~bnnkit.functional.FunctionalPosterior` with ``C`` outputs: ``sum_c log N(f[:, c]; 0, K)``),
and a softmax likelihood ``p(y_i = c | f_i) = softmax(f_i)_c``.  The evidence ``p(y | X, k)`` has no
closed form; its Laplace approximation at the mode ``f^`` of ``p(f | y)`` is::

    log q(y | X, k) = log p(y | f^) - 1/2 f^T K^-1 f^ - 1/2 log |I + K W|,     W = diag(pi) - Pi Pi^T

(``K`` block-diagonal over the classes, ``pi = softmax(f^)``).  The mode is found by Newton's method
in the form of R&W Algorithm 3.3 (``C`` Choleskys of ``n x n`` matrices per iteration, never the
``nC x nC`` system), with step halving when a full step lowers the objective.  The determinant is
exact: ``log |I + K W| = sum_c log |I + D_c^1/2 K D_c^1/2| + log |sum_c E_c|`` (matrix determinant
lemma with ``sum_c D_c = I``; ``E_c = D_c^1/2 (I + D_c^1/2 K D_c^1/2)^-1 D_c^1/2``), which is the
``z`` of Algorithm 3.3 plus ``sum_i log M_ii`` of its factor ``M``.

:func:`fit_classification_gp` maximises ``log q`` over the kernel's outputscale and (one, shared)
lengthscale on a log2 grid refined around its best point, and freezes the prior there: the
principled replacement, for logits, of :meth:`GPPrior.fit <bnnkit.functional.GPPrior.fit>`'s
regression on one-hot targets (whose outputscale fits the 0/1 targets' variance, about 0.06 on
MNIST, and so pulls every logit towards 0).  :func:`prior_predictive` draws logits from a prior at
given inputs and returns the softmax's max-probability and entropy: the prior predictive check of
docs/fsgmcmc_design.md section 13.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least, check_positive
from .kernels import gpytorch, hyperparameter_sites, kernel_hyperparameters, kernel_matrix, set_hyperparameter

if TYPE_CHECKING:
    from .gp_prior import GPPrior

_F64 = torch.float64
# log2 grids of the coarse search: outputscale 2^-4 .. 2^10, lengthscale median distance x 2^-3 .. 2^1
OUTPUTSCALE_LOG2 = tuple(range(-4, 11, 2))
LENGTHSCALE_LOG2 = (-3.0, -2.0, -1.0, 0.0, 1.0)


@dataclass(frozen=True)
class LaplaceResult:
    """The Laplace approximation at one kernel matrix.

    ``log_evidence``: ``log q(y | X)`` (total, not per point); ``mode``: ``f^`` [n, C];
    ``a``: ``K^-1 f^`` [n, C] (Newton's ``a``); ``probs``: ``softmax(f^)`` [n, C];
    ``iterations``: Newton iterations used; ``log_lik``: ``log p(y | f^)``;
    ``half_logdet``: ``1/2 log |I + K W|``.
    """

    log_evidence: float
    mode: Tensor
    a: Tensor
    probs: Tensor
    iterations: int
    log_lik: float
    half_logdet: float


def _check_labels(labels: Tensor, n: int, num_classes: int) -> Tensor:
    check_int_at_least("num_classes", num_classes, 2)
    if not isinstance(labels, Tensor) or labels.ndim != 1:
        raise BnnkitError(
            f"labels must be a 1-D integer tensor of class indices, got "
            f"{tuple(labels.shape) if isinstance(labels, Tensor) else type(labels)}."
        )
    if labels.dtype.is_floating_point or labels.dtype == torch.bool or labels.dtype.is_complex:
        raise BnnkitError(f"labels must hold integer class indices (torch.long), got dtype {labels.dtype}.")
    if labels.shape[0] != n:
        raise BnnkitError(
            f"labels has {labels.shape[0]} entries but there are {n} inputs; give one label per row."
        )
    if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= num_classes):
        raise BnnkitError(
            f"labels must lie in 0..{num_classes - 1} (num_classes={num_classes}); got values "
            f"{int(labels.min())}..{int(labels.max())}."
        )
    return labels.long()


def laplace_evidence(
    k: Tensor,
    labels: Tensor,
    num_classes: int,
    tol: float = 1e-10,
    max_iter: int = 100,
) -> LaplaceResult:
    """Laplace approximation to the multi-class GP evidence for kernel matrix ``k`` [n, n].

    ``C = num_classes`` independent latent functions share ``k`` (R&W Algorithm 3.3, with the exact
    determinant of the module docstring).  Newton starts at ``f = 0`` and stops when the objective
    ``Psi(f) = log p(y | f) - 1/2 a^T f`` changes by less than ``tol * (1 + |Psi|)``; a step that
    lowers ``Psi`` is halved (up to 30 times).  Float64 throughout.
    """
    if not isinstance(k, Tensor) or k.ndim != 2 or k.shape[0] != k.shape[1] or k.shape[0] < 1:
        raise BnnkitError(f"k must be a square kernel matrix [n, n], got {getattr(k, 'shape', type(k))}.")
    if not torch.isfinite(k).all():
        raise BnnkitError("the kernel matrix has NaN or inf entries; check the kernel hyperparameters.")
    check_int_at_least("max_iter", max_iter, 1)
    check_positive("tol", tol)
    n, c = k.shape[0], num_classes
    y = torch.nn.functional.one_hot(_check_labels(labels, n, c).to(k.device), c).to(_F64)
    k = k.to(_F64)
    eye = torch.eye(n, dtype=_F64, device=k.device)

    def psi_of(f: Tensor, a: Tensor) -> float:
        return float(-0.5 * (a * f).sum() + (y * f).sum() - torch.logsumexp(f, 1).sum())

    def newton_parts(f: Tensor):
        pi = torch.softmax(f, 1)  # [n, C]
        sd = pi.T.sqrt()  # [C, n]
        b_mat = eye + sd[:, :, None] * k * sd[:, None, :]
        chol, info = torch.linalg.cholesky_ex(b_mat)
        if int(info.max()) != 0:
            raise BnnkitError("I + D^1/2 K D^1/2 is not positive definite: the kernel matrix is not PSD.")
        e = sd[:, :, None] * torch.cholesky_inverse(chol) * sd[:, None, :]  # [C, n, n]
        m_chol, info = torch.linalg.cholesky_ex(e.sum(0))
        if int(info) != 0:
            raise BnnkitError("sum_c E_c is not positive definite (n too large for float64 at this scale?).")
        return pi, chol, e, m_chol

    f = torch.zeros(n, c, dtype=_F64, device=k.device)
    a = torch.zeros_like(f)
    psi = psi_of(f, a)
    iters = 0
    while iters < max_iter:
        iters += 1
        pi, _, e, m_chol = newton_parts(f)
        wf = pi * f - pi * (pi * f).sum(1, keepdim=True)  # (D - Pi Pi^T) f
        b = wf + y - pi
        cvec = torch.bmm(e, (k @ b).T.unsqueeze(-1)).squeeze(-1).T  # E K b, [n, C]
        s = torch.cholesky_solve(cvec.sum(1, keepdim=True), m_chol)  # M^T \ (M \ R^T c), [n, 1]
        a_new = b - cvec + (e @ s).squeeze(-1).T
        step, new_psi = 1.0, -math.inf
        for _ in range(31):
            a_try = a + step * (a_new - a)
            f_try = k @ a_try
            new_psi = psi_of(f_try, a_try)
            if new_psi >= psi - 1e-12 * (1 + abs(psi)) or not math.isfinite(psi):
                break
            step *= 0.5
        if not math.isfinite(new_psi):
            raise BnnkitError("Newton's method for the Laplace mode diverged (non-finite objective).")
        converged = abs(new_psi - psi) < tol * (1 + abs(psi))
        a, f, psi = a_try, f_try, new_psi
        if converged:
            break
    pi, chol, _, m_chol = newton_parts(f)
    half_logdet = float(chol.diagonal(dim1=-2, dim2=-1).log().sum() + m_chol.diagonal().log().sum())
    log_lik = float((y * torch.log_softmax(f, 1)).sum())
    return LaplaceResult(
        log_evidence=psi - half_logdet,
        mode=f,
        a=a,
        probs=pi,
        iterations=iters,
        log_lik=log_lik,
        half_logdet=half_logdet,
    )


def _median_distance(x: Tensor) -> float:
    d = torch.pdist(x)
    d = d[d > 0]
    return float(d.median()) if d.numel() else 1.0


def fit_classification_gp(
    gp: GPPrior,
    inputs: Tensor,
    labels: Tensor,
    num_classes: int,
    max_points: int = 1000,
    outputscale_log2: tuple[float, ...] = OUTPUTSCALE_LOG2,
    lengthscale_log2: tuple[float, ...] = LENGTHSCALE_LOG2,
    refine: int = 2,
    generator: torch.Generator | None = None,
    tol: float = 1e-10,
) -> dict:
    """Fit ``gp``'s outputscale and lengthscale by the Laplace classification evidence; freeze them.

    The kernel must be a scaled kernel (``GPPrior("rbf")``, ``"matern52"``, ...: a gpytorch
    ``ScaleKernel`` on top).  On at most ``max_points`` rows of ``inputs`` [N, input_dim] (a random
    subset drawn from ``generator``; default a generator seeded with 0, never the global RNG) with
    integer ``labels`` [N] in ``0..num_classes-1``, :func:`laplace_evidence` is evaluated on the grid
    ``outputscale = 2^s`` (``s`` in ``outputscale_log2``) x ``lengthscale = median pairwise distance
    x 2^l`` (``l`` in ``lengthscale_log2``; one lengthscale, every ARD dimension the same; skipped
    when the kernel has none).  Then ``refine`` rounds each evaluate the 8 neighbours of the best
    point at half the previous spacing (in log2 units).  The best point's hyperparameters are set on
    the kernel, its parameters frozen (``requires_grad=False``), the prior mean set to 0 (the
    model's), and ``gp.noise_variance`` to None (there is no observation noise).  Cost per grid point:
    about 15 Newton iterations of ``C`` Choleskys and inverses of ``n x n``, ``n = min(N, max_points)``.

    Returns (and keeps as ``gp.fitted``) the kernel hyperparameters, ``log_evidence`` (per row) and
    ``log_evidence_total``, ``train_nll`` (``-log p(y | f^) / n`` at the mode), ``num_points``,
    ``num_outputs``, ``fit: "classification"``, ``median_distance`` and ``grid``: every evaluated
    ``[outputscale, lengthscale, log_evidence per row]``.
    """
    from .gp_prior import GPPrior

    if not isinstance(gp, GPPrior):
        raise BnnkitError(f"gp must be a bnnkit.functional.GPPrior, got {type(gp).__name__}.")
    if not isinstance(gp.kernel, gpytorch.kernels.ScaleKernel):
        raise BnnkitError(
            f"fit_classification_gp needs a scaled kernel (a single term such as 'rbf' or 'matern52'), "
            f"got '{gp.spec}'."
        )
    check_int_at_least("max_points", max_points, 2)
    check_int_at_least("refine", refine, 0)
    if not outputscale_log2 or (hyperparameter_sites(gp.kernel, "lengthscale") and not lengthscale_log2):
        raise BnnkitError("outputscale_log2 and lengthscale_log2 must each hold at least one value.")
    xs = gp._inputs(inputs, "inputs")
    ys = _check_labels(labels, xs.shape[0], num_classes)
    if xs.shape[0] < 2:
        raise BnnkitError("fit_classification_gp needs at least 2 rows of data.")
    if xs.shape[0] > max_points:
        if generator is None:
            generator = torch.Generator().manual_seed(0)
        idx = torch.randperm(xs.shape[0], generator=generator, device=generator.device)[:max_points]
        xs, ys = xs[idx.to(xs.device)], ys[idx.to(ys.device)]
    ys = ys.to(xs.device)
    grid = _EvidenceGrid(gp, xs, ys, num_classes, tol)
    (bs, bl), best = grid.search(outputscale_log2, lengthscale_log2, refine)
    if not math.isfinite(best):
        raise BnnkitError("the Laplace evidence failed at every grid point; standardise the inputs.")
    result = laplace_evidence(2.0**bs * grid.base(bl), ys, num_classes, tol=tol)
    gp.fitted = grid.freeze(bs, bl, result)
    return gp.fitted


class _EvidenceGrid:
    """The Laplace evidence of ``gp``'s kernel on ``(xs, ys)`` at ``outputscale = 2^s2`` and
    ``lengthscale = median distance x 2^l2``, each point evaluated once (``-inf`` where it fails)."""

    def __init__(self, gp: GPPrior, xs: Tensor, ys: Tensor, num_classes: int, tol: float):
        self.gp, self.xs, self.ys, self.num_classes, self.tol = gp, xs, ys, num_classes, tol
        self.has_ls = bool(hyperparameter_sites(gp.kernel, "lengthscale"))
        self.median = _median_distance(xs) if self.has_ls else 1.0
        self.base_cache: dict[float, Tensor] = {}
        self.scores: dict[tuple[float, float], float] = {}

    def base(self, l2: float) -> Tensor:
        """The kernel matrix at outputscale 1 and lengthscale ``median * 2^l2``."""
        if l2 not in self.base_cache:
            kernel = self.gp.kernel
            if self.has_ls:
                set_hyperparameter(kernel, "lengthscale", self.median * 2.0**l2)
            set_hyperparameter(kernel, "outputscale", 1.0)
            with torch.no_grad():
                self.base_cache[l2] = kernel_matrix(kernel, self.xs)
        return self.base_cache[l2]

    def score(self, s2: float, l2: float) -> float:
        key = (float(s2), float(l2))
        if key not in self.scores:
            try:
                k = 2.0**s2 * self.base(l2)
                self.scores[key] = laplace_evidence(k, self.ys, self.num_classes, tol=self.tol).log_evidence
            except BnnkitError:
                self.scores[key] = -math.inf
        return self.scores[key]

    def search(
        self, outputscale_log2: tuple[float, ...], lengthscale_log2: tuple[float, ...], refine: int
    ) -> tuple[tuple[float, float], float]:
        """The coarse grid, then ``refine`` rounds of the best point's 8 neighbours at half the
        spacing; returns the best point and its evidence."""
        l_grid = tuple(lengthscale_log2) if self.has_ls else (0.0,)
        for s2 in outputscale_log2:
            for l2 in l_grid:
                self.score(s2, l2)
        ds = _spacing(outputscale_log2)
        dl = _spacing(l_grid)
        for _ in range(refine):
            (bs, bl), _v = max(self.scores.items(), key=lambda kv: kv[1])
            ds, dl = ds / 2, dl / 2
            for i in (-1, 0, 1):
                for j in (-1, 0, 1) if self.has_ls else (0,):
                    self.score(bs + i * ds, bl + j * dl)
        return max(self.scores.items(), key=lambda kv: kv[1])

    def freeze(self, s2: float, l2: float, result: LaplaceResult) -> dict:
        """Set and freeze the kernel's hyperparameters at ``(s2, l2)`` (prior mean 0, no noise);
        the fit's record, ``result`` being the evidence there."""
        gp, has_ls, median = self.gp, self.has_ls, self.median
        if has_ls:
            set_hyperparameter(gp.kernel, "lengthscale", median * 2.0**l2)
        set_hyperparameter(gp.kernel, "outputscale", 2.0**s2)
        for p in gp.kernel.parameters():
            p.requires_grad_(False)
        gp.mean_constant = torch.zeros((), dtype=_F64, device=self.xs.device)
        gp.noise_variance = None
        n = self.xs.shape[0]
        return {
            **kernel_hyperparameters(gp.kernel),
            "fit": "classification",
            "log_evidence": result.log_evidence / n,
            "log_evidence_total": result.log_evidence,
            "train_nll": -result.log_lik / n,
            "num_points": n,
            "num_outputs": self.num_classes,
            "median_distance": median if has_ls else None,
            "grid": [
                [2.0**a, median * 2.0**b if has_ls else None, v / n]
                for (a, b), v in sorted(self.scores.items())
            ],
        }


def _spacing(grid: tuple[float, ...]) -> float:
    values = sorted(set(float(v) for v in grid))
    gaps = [b - a for a, b in zip(values, values[1:])]
    return min(gaps) if gaps else 1.0


def prior_predictive(
    gp: GPPrior,
    inputs: Tensor,
    num_classes: int,
    num_draws: int = 100,
    generator: torch.Generator | None = None,
) -> dict[str, Tensor]:
    """Prior predictive check of a GP prior on ``num_classes`` logits at ``inputs`` [n, input_dim].

    Draws ``num_draws`` logit functions ``f_c ~ N(0, K + delta I)`` (``c = 1..C`` independent, the
    prior's jitter ``delta``) at the ``n`` inputs, from ``generator`` (default seeded with 0), and
    returns ``max_prob`` and ``entropy`` (nats) of ``softmax(f)`` per draw and input, each
    [num_draws, n], and ``logits`` [num_draws, n, C].  A prior whose outputscale is small next to 1
    gives entropies near ``log C`` (every draw nearly uniform over the classes).
    """
    check_int_at_least("num_classes", num_classes, 2)
    check_int_at_least("num_draws", num_draws, 1)
    x = gp._inputs(inputs, "inputs")
    if generator is None:
        generator = torch.Generator().manual_seed(0)
    chol, _ = gp.cholesky(x)
    z = torch.randn(
        x.shape[0], num_draws * num_classes, generator=generator, dtype=_F64, device=generator.device
    )
    f = (chol @ z.to(chol.device)).reshape(x.shape[0], num_draws, num_classes).permute(1, 0, 2)
    f = f + gp.mean(x).reshape(1, x.shape[0], -1)
    logp = torch.log_softmax(f, -1)
    return {
        "logits": f,
        "max_prob": logp.max(-1).values.exp(),
        "entropy": -(logp.exp() * logp).sum(-1),
    }


__all__ = ["LaplaceResult", "fit_classification_gp", "laplace_evidence", "prior_predictive"]
