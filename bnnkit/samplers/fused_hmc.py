"""Fused HMC: one compiled call runs a block of ``T`` full-batch HMC transitions.

The step-at-a-time :class:`~bnnkit.samplers.HMC` kernel runs its ``L`` leapfrog steps and the
Metropolis test from Python, one transition per driver step.  Here a block of transitions is one
``torch.compile``-d ``scan`` (:func:`bnnkit.core.pure.compile_scan`) whose body is a whole
transition: the step-at-a-time kernel's own trajectory
(:func:`~bnnkit.samplers.hamiltonian.hmc_proposal`), ``L`` leapfrog steps unrolled inside it,
and its Metropolis test.  Per transition, with inverse mass ``M^-1`` and the transition's step
size ``e`` (``e0 (1 + j (2 u - 1))`` with jitter ``j``)::

    p0 = xi / sqrt(M^-1),  xi ~ N(0, I)
    p <- p + (e/2) g(x);  then L times: x <- x + e M^-1 p;  p <- p + e g(x)  (e/2 at the last)
    H = -log pi(x) + p^T M^-1 p / 2,  accept (x', p') if  u' < min(1, exp(H0 - H1))

The random numbers of a block (``xi``, the jitter's ``u`` and the accept test's ``u'`` of every
transition) are drawn up front from the chain's ``torch.Generator`` in the order the
step-at-a-time kernel draws them, so the fused chain equals the step-at-a-time chain to float
rounding (the compiled gradient rounds differently) and the explicit-seed contract holds.

What differs from the step-at-a-time kernel: a trajectory whose density becomes non-finite runs
its ``L`` steps to the end instead of stopping early (the early stop is a host sync, which the
compiled scan cannot hold; it is rejected and marked divergent either way; ``num_steps`` reports
``L``).  Warm-up (step size and mass adaptation) runs step at a time in
the driver; the block runs with the adapted step size and mass frozen, as sampling does.  Full
batch only: HMC on minibatches has no valid Metropolis test.

``HMC(...).build_fused(posterior, block)`` builds it; ``bnnkit.sample(HMC(...), posterior, data,
fused=True)`` runs it.  The posterior must be a plain MLP :class:`~bnnkit.Posterior` or a
:class:`~bnnkit.core.target.Target` (:func:`bnnkit.core.pure.pure_log_prob`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least
from ..core.loop_parts import FullBatch
from ..core.pure import call_scan, compile_scan, leading_finite, transition_log_prob
from .common import accept_probability
from .hamiltonian import hmc_proposal, pure_value_and_grad

DEFAULT_LOOP = "scan"  # what bnnkit.sample(..., fused=...) builds (tests switch it to "eager")


class HMCBlockOutput(NamedTuple):
    """A block's final state and its kept transitions (see :mod:`bnnkit.core.blocks`)."""

    state: Any  # the HMCState after the block
    positions: Tensor
    stats: dict[str, Tensor]  # the kept transitions' HMCInfo fields, [n] (or [n, K])
    num_steps: int
    num_finite: int
    first_bad: tuple[Tensor, Tensor, Tensor] | None = None
    all_diverging: Tensor | None = None  # [T]: every chain's transition diverged (a stuck chain)


def _make_transition(value_and_grad: Callable, num_steps: int, jitter: float, threshold: float) -> Callable:
    """One HMC transition as a pure function ``(carry, xs, batch, eps0, inv_m) -> (carry, ys)``;
    carry ``(x, lp, g)``, ``xs = (xi, u_jitter, u_accept)``: the step-at-a-time kernel's
    trajectory (:func:`~bnnkit.samplers.hamiltonian.hmc_proposal`) and Metropolis test, on
    uniforms drawn ahead."""

    def transition(carry, xs, batch, eps0, inv_m):
        x0, lp0, g0 = carry
        xi, u_jit, u_acc = xs
        prop = hmc_proposal(
            value_and_grad, batch, x0, lp0, g0, xi, u_jit, eps0, inv_m, num_steps, jitter, threshold
        )
        accept_prob = accept_probability(-prop.delta)
        accepted = u_acc < accept_prob
        a = accepted.unsqueeze(-1)
        x_new = torch.where(a, prop.position, x0)
        lp_new = torch.where(accepted, prop.log_density, lp0)
        g_new = torch.where(a, prop.grad, g0)
        energy = torch.where(accepted, prop.energy, prop.energy0)
        ys = (x_new.clone(), lp_new.clone(), accept_prob, accepted, prop.diverging, energy)
        return (x_new, lp_new, g_new), ys

    return transition


class FusedHMCKernel:
    """:class:`~bnnkit.samplers.HMC` run ``block`` transitions per compiled call.

    The driver-facing protocol of :mod:`bnnkit.core.blocks`: ``init``, ``step`` and
    ``adaptation`` (the step-at-a-time kernel's, for warm-up), ``run_block``, ``kept_stats``,
    ``collects`` and ``loop``.
    """

    def __init__(
        self, hmc: Any, model: Any, chains: int | None = None, loop: str = "scan", cpp_wrapper: bool = True
    ):
        target, log_prob, self.loop = transition_log_prob(model, "HMC", loop)
        self.hmc = hmc
        self.chains = chains
        self.reference = hmc.build(target if chains is None else target.vectorized(chain_batched=False))
        self.init, self.step, self.adaptation = (
            self.reference.init,
            self.reference.step,
            self.reference.adaptation,
        )
        gv = pure_value_and_grad(log_prob, chains=chains is not None)  # every chain: the full batch
        self._transition = _make_transition(
            gv, hmc.num_steps, float(hmc.jitter), float(hmc.divergence_threshold)
        )
        self._block, self._code = (None, None)
        if self.loop == "scan":
            self._block, self._code = compile_scan(self._transition, cpp_wrapper)

    def collects(self, start: int, num_steps: int) -> list[bool]:
        return [True] * num_steps

    def draw_block(self, batches: Any, gen: torch.Generator, num_steps: int, state: Any):
        """The block's batch and random numbers, in the step-at-a-time order: per transition the
        batch (the full one: no draw), the momentum's normals, the jitter's uniform, the accept
        test's uniform."""
        x, eps = state.position, state.step_size
        xi = torch.empty((num_steps, *x.shape), dtype=x.dtype, device=x.device)
        u_jit = torch.zeros((num_steps, *eps.shape), dtype=eps.dtype, device=eps.device)
        u_acc = torch.empty((num_steps, *eps.shape), dtype=eps.dtype, device=eps.device)
        batch = None
        for j in range(num_steps):
            b = batches.next(gen)
            if batch is None:
                batch = b
            elif b is not batch:
                raise BnnkitError(
                    "fused HMC runs on the full data set (HMC's Metropolis test needs the exact log density), "
                    "but the data came as changing minibatches; pass the data as a tuple of tensors."
                )
            torch.randn(x.shape, generator=gen, dtype=x.dtype, out=xi[j])
            if self.hmc.jitter > 0:
                u_jit[j] = torch.rand(eps.shape, generator=gen, dtype=eps.dtype)
            u_acc[j] = torch.rand(eps.shape, generator=gen, dtype=eps.dtype)
        return batch, (xi, u_jit, u_acc)

    def run_block(
        self, state: Any, batches: Any, gen: torch.Generator, num_steps: int, keep: Sequence[int] = ()
    ) -> HMCBlockOutput:
        """``num_steps`` transitions from ``state`` in one compiled call; ``keep``: the indices
        (within the block) of the transitions whose positions and stats to return."""
        check_int_at_least("num_steps", num_steps, 1)
        if not hasattr(
            batches, "next"
        ):  # a tuple of tensors: every transition sees it, no random numbers drawn
            batches = FullBatch(batches)
        batch, xs = self.draw_block(batches, gen, num_steps, state)
        carry = (state.position, state.log_density, state.grad)
        consts = (batch, state.step_size, state.inv_mass)
        if self.loop == "scan":
            carry, ys = call_scan(self._block, self._code, carry, xs, consts)
        else:  # the same transition, step by step, uncompiled (tests, debugging)
            rows = []
            for j in range(num_steps):
                carry, y = self._transition(carry, tuple(t[j] for t in xs), *consts)
                rows.append(y)
            ys = tuple(torch.stack(c) for c in zip(*rows))
        positions, lp, accept_prob, accepted, diverging, energy = ys
        new = state._replace(position=carry[0], log_density=carry[1], grad=carry[2])
        k = torch.as_tensor(list(keep), dtype=torch.long)
        n = len(k)
        eps = state.step_size
        stats = {
            "log_density": lp[k],
            "accept_prob": accept_prob[k],
            "is_accepted": accepted[k],
            "diverging": diverging[k],
            "energy": energy[k],
            "step_size": eps.expand(n, *eps.shape).clone(),
            "num_steps": torch.full((n, *eps.shape), self.hmc.num_steps, dtype=torch.long),
        }
        num_finite = leading_finite(positions, lp)
        bad = None
        if num_finite < num_steps:
            bad = (positions[num_finite], lp[num_finite], eps)
        stuck = diverging.reshape(num_steps, -1).all(-1)
        return HMCBlockOutput(new, positions[k], stats, num_steps, num_finite, bad, stuck)

    def kept_stats(self, out: HMCBlockOutput, n: int | None = None) -> dict[str, Tensor]:
        """The first ``n`` (default all) kept transitions' stats, as the step-at-a-time path
        stores its :class:`~bnnkit.samplers.hmc.HMCInfo` (``[n]``, or ``[n, K]`` vectorised)."""
        n = len(out.positions) if n is None else n
        return {k: v[:n] for k, v in out.stats.items()}


def build_fused_hmc(hmc: Any, model: Any, block: int, chains: int | None = None, **_: Any) -> FusedHMCKernel:
    """``hmc`` built to run ``block`` transitions per call (``block`` is the driver's choice and
    the scan's graph serves every length)."""
    check_int_at_least("block", block, 1)
    return FusedHMCKernel(hmc, model, chains, loop=DEFAULT_LOOP)
