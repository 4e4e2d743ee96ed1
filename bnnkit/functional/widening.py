"""A regression predictive widened by a fitted GP prior's latent posterior variance.

A functional prior constrains the network at its measurement points; beyond the data a network's
draws extrapolate with less spread than the prior gives (docs/results/gap_tail.md, "Is it the
prior or the sampler?").  :class:`PriorWidening` adds what the prior says there to each draw's
Gaussian: with ``v(x)`` the GP's latent posterior variance given the training inputs
(:meth:`GPPrior.latent_variance`),

    p(y | x) = sum_s w_s N(y; f_s(x), sigma_s^2 + v(x))

``v`` is small near the training rows and grows to the prior's variance away from them (a
distance-aware term, as in SNGP, Liu et al. 2020).  The mean is the network's.  Attached to a
posterior as ``posterior.predictive_widening``, :func:`bnnkit.predict.predict` adds it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from .gp_prior import GPPrior

MAX_INDUCING = 2000  # inducing inputs of the variance's DTC form (a seeded subset of the rows beyond)
MAX_ROWS = 50_000  # training inputs it conditions on, at most (a seeded subset beyond)
CHUNK = 4096  # rows of K(Z, X) formed at a time


class PriorWidening:
    """``v(x)`` of a fitted ``gp`` given the training inputs, flattened to rows as the GP sees them.

    Exact on up to :data:`MAX_INDUCING` rows; on more, the DTC (deterministic training
    conditional, Seeger et al. 2003) form with ``m = MAX_INDUCING`` inducing inputs ``Z`` (a subset
    of the rows drawn from ``seed``) and every row (at most :data:`MAX_ROWS`)::

        v(x) = k(x, x) - a^T a + c^T c,   a = L^-1 k_Z(x),   c = L_B^-1 a,
        L L^T = K_ZZ,   L_B L_B^T = I + s2^-1 L^-1 K_ZX K_XZ L^-T

    With ``Z`` all the rows this is the exact ``k - K_xX (K_XX + s2 I)^-1 K_Xx``.  A subset of the
    rows alone, without the DTC term, would overstate ``v`` next to the rows it leaves out (measured:
    kin8nm, whose 5,800-7,400 rows left 2,000, had 95 % coverage 0.98 and NLL +0.04 in its gaps)."""

    def __init__(self, gp: GPPrior, train_inputs: Tensor, seed: int = 0):
        from .measurement import dedupe_rows

        rows = train_inputs.detach().reshape(train_inputs.shape[0], -1).to(torch.float64).cpu()
        gen = torch.Generator().manual_seed(seed)
        if rows.shape[0] > MAX_ROWS:
            rows = rows[torch.randperm(rows.shape[0], generator=gen)[:MAX_ROWS].sort().values]
        inducing = rows
        if rows.shape[0] > MAX_INDUCING:
            inducing = rows[torch.randperm(rows.shape[0], generator=gen)[:MAX_INDUCING].sort().values]
        self.gp, self.rows, self.inducing = gp, rows, dedupe_rows(inducing)
        self._factors: tuple[Tensor, Tensor] | None = None

    def _factorise(self, device: torch.device) -> tuple[Tensor, Tensor]:
        if self._factors is None or self._factors[0].device != device:
            gp, z = self.gp.to(device), self.inducing.to(device)
            chol, _ = gp.cholesky(z)
            b = torch.eye(z.shape[0], dtype=torch.float64, device=device)
            with torch.no_grad():
                for part in self.rows.split(CHUNK):
                    a = torch.linalg.solve_triangular(
                        chol, gp.kernel(z, part.to(device)).to_dense(), upper=False
                    )
                    b += a @ a.T / float(gp.noise_variance)
            self._factors = (chol, torch.linalg.cholesky(b))
        return self._factors

    def __call__(self, x: Tensor) -> Tensor:
        """``v(x)`` at the inputs ``x [N, ...]``: ``[N]``, float64, on ``x``'s device."""
        flat = x.detach().reshape(x.shape[0], -1).to(torch.float64)
        if self.gp.noise_variance is None:
            from ..core.errors import BnnkitError

            raise BnnkitError(
                "PriorWidening needs a fitted GP prior: call gp.fit(x, y) first (it sets the noise)."
            )
        chol, chol_b = self._factorise(flat.device)
        with torch.no_grad():
            a = torch.linalg.solve_triangular(
                chol, self.gp.kernel(self.inducing.to(flat.device), flat).to_dense(), upper=False
            )
            c = torch.linalg.solve_triangular(chol_b, a, upper=False)
            v = self.gp.kernel(flat, diag=True) - a.square().sum(0) + c.square().sum(0)
        return v.clamp_min(0.0)

    def state_dict(self) -> dict[str, Any]:
        gp = {k: v for k, v in self.gp.config().items() if k != "fitted"}  # the fit's report: not needed
        return {"rows": self.rows, "inducing": self.inducing, "gp": gp}

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> PriorWidening:
        out = cls.__new__(cls)
        out.gp, out.rows, out.inducing = GPPrior.from_config(state["gp"]), state["rows"], state["inducing"]
        out._factors = None
        return out
