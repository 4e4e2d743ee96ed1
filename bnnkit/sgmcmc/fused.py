"""Fused multi-step SG-MCMC: one compiled call runs a block of ``T`` SG-MCMC steps.

SGLD, SGHMC (incl. their cyclical variants), pSGLD and scale-adapted SGHMC (its sampling phase;
its warm-up, which adapts the mass, runs step at a time) are fused.

The step-at-a-time path (:func:`bnnkit.sample`) calls ``kernel.step`` from Python once per step;
at BNN-benchmark sizes the Python and dispatch between steps costs as much as the arithmetic.
Here the driver-side Python runs once per *block*:

1. **Randomness up front, in the step-at-a-time order.**  For each step ``t`` of the block the
   minibatch rows are drawn from the chain's own ``torch.Generator`` and then, if the step
   injects noise, ``xi_t ~ N(0, I)`` from the same generator, one ``randn(D)`` per step: exactly
   the calls, in exactly the order, that the driver and ``kernel.step`` make.  So the explicit-
   seed contract holds (same seed, same chain) and the fused chain equals the step-at-a-time
   chain to float rounding (the compiled gradient rounds differently from the eager one).
2. **One compiled call per block.**  The ``T`` steps run inside ``torch.compile`` as a
   ``torch._higher_order_ops.scan`` over the stacked minibatches ``[T, M, ...]``, step sizes
   ``[T]`` and normals ``[T, D]``: the loop is compiled once, not unrolled, so the compile time
   does not grow with ``T`` (measured in ``benchmarks/bench_fused.py``).  The log density inside
   the scan must be a pure function; for an MLP :class:`~bnnkit.Posterior` it is rebuilt from
   the flat parameters (``F.linear`` + activation per layer, the posterior's own likelihood and
   prior log densities), since the posterior's fast module call swaps parameters into the module
   (a side effect ``scan`` refuses); for another network without buffers or dropout in training
   mode it is a ``torch.func.functional_call`` of the module (:mod:`bnnkit.core.pure`).  Other
   posteriors fall back to an unrolled loop (``loop="unroll"``: compile time grows with ``T``,
   keep blocks short), which ``bnnkit.sample(..., fused=...)`` refuses
   (:func:`bnnkit.core.blocks.build_block_kernel`).
3. **Thinning after the call.**  The scan returns every step's position ``[T, D]`` and
   log density; the block keeps the rows the caller asks for (``keep``).

Each step runs the algorithm's update from :mod:`bnnkit.sgmcmc.updates`, the same pure function
the step-at-a-time kernel calls, with ``xi_t`` and the noise scale zero in the exploration stage
of a cyclical schedule.  pSGLD carries its RMSprop average ``V``; adaptive SGHMC reads its frozen
inverse mass and noise standard deviation as block constants.  Full-batch HMC has a fused kernel
of its own (:mod:`bnnkit.samplers.fused_hmc`).

Not fused (a :class:`~bnnkit.core.errors.BnnkitError` says so): ``gibbs_every``,
``noise_estimate="online"``, ``resample_momentum_every``, a tensor mass, pSGLD's
``correction=True``, stochastic gradients (functional priors), other algorithms (NUTS, ...).

Runs go through the one driver: ``bnnkit.sample(SGLD(...), posterior, data, ..., fused=True)``
reaches :func:`build_fused` through the algorithm's ``build_fused`` and calls
:meth:`FusedKernel.run_block` once per block, with the warm-up, thinning, streaming, resume and
divergence handling of every other run (blocks cut at its chunk and checkpoint boundaries, see
:mod:`bnnkit.core.blocks`).  :class:`Fused` (``Fused(SGLD(1e-4), block=64).build(posterior)``
gives a :class:`FusedKernel`) is the kernel on its own, one block per call, as the benchmarks
time it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least
from ..core.loop_parts import FullBatch
from ..core.pure import call_scan, compile_scan, fused_log_prob, leading_finite
from ..core.types import Batch
from .schedules import Constant
from .updates import (
    asghmc_noise,
    asghmc_update,
    psgld_noise_variance,
    psgld_update,
    sghmc_noise_scale,
    sghmc_update,
    sgld_noise_scale,
    sgld_update,
)

DEFAULT_BLOCK = 64  # steps per compiled call: amortises the per-call cost; memory T * D per block
DEFAULT_LOOP = "scan"  # what bnnkit.sample(..., fused=...) builds (tests switch it to "eager")

_LOOPS = ("scan", "unroll", "eager")


class BlockOutput(NamedTuple):
    """What one block returns: the state after its last step and the kept steps' draws.

    ``positions`` is ``[len(keep), D]``; ``log_density`` and ``step_size`` are ``[len(keep)]``:
    each kept step's minibatch log density at the position *before* the step and its step size,
    as :class:`~bnnkit.sgmcmc.common.SGInfo` reports them step by step.
    """

    state: Any
    positions: Tensor
    log_density: Tensor
    step_size: Tensor
    num_steps: int
    num_finite: int  # leading steps whose position and log density are finite (< num_steps: diverged)
    # At the first non-finite step (None if none): its new position, log density and step size.
    first_bad: tuple[Tensor, Tensor, Tensor] | None = None


# --------------------------------------------------------------------------- the algorithms
@dataclass(frozen=True)
class FusedUpdate:
    """Which update (:mod:`bnnkit.sgmcmc.updates`) a fused block runs, and its constants; the
    carry is ``(x,)`` or ``(x, r)``.  Each fused algorithm describes itself as one
    (:meth:`FusedAlgorithm.fused_update`)."""

    kind: str  # "sgld" | "sghmc" | "psgld" | "asghmc"
    temperature: float
    friction: float = 0.0
    mass: float = 1.0
    noise_b: float = 0.0
    alpha: float = 0.0  # pSGLD: RMSprop decay, floor delta, N of the per-datum gradient
    delta: float = 0.0
    num_data: float = 1.0
    mdecay: float = 0.0  # adaptive SGHMC: momentum decay, eps^2, subtract eps^4 from the noise variance
    eps2: float = 0.0
    noise_correction: bool = False


class FusedAlgorithm:
    """Base of the SG-MCMC algorithms that run in fused blocks (SGLD, SGHMC, pSGLD, adaptive SGHMC).

    A subclass describes its update with :meth:`fused_update` (a :class:`~bnnkit.core.errors.BnnkitError`
    for an option the fused loop does not run); :meth:`build_fused` is then the same for all.
    """

    def fused_update(self) -> FusedUpdate:
        raise NotImplementedError

    def build_fused(
        self, model: Any, block: int, chains: int | None = None, chain_batched: bool = True
    ) -> FusedKernel:
        """A :class:`~bnnkit.sgmcmc.fused.FusedKernel` running ``block`` steps per compiled call
        (``bnnkit.sample(..., fused=...)``; ``chains``: vectorised chains)."""
        return build_fused(self, model, block, chains, chain_batched)


def _check_supported(algorithm: Any) -> FusedUpdate:
    if isinstance(algorithm, FusedAlgorithm):
        return algorithm.fused_update()
    raise BnnkitError(
        f"the fused loop runs SGLD, SGHMC (incl. their cyclical variants), PreconditionedSGLD and "
        f"AdaptiveSGHMC, not {type(algorithm).__name__}; run it step at a time (bnnkit.sample without fused=)."
    )


def _make_step(upd: FusedUpdate, grad_and_value: Callable) -> Callable:
    """One step as a pure function ``(carry, xs, *consts) -> (carry, (position, log_density))``:
    the minibatch gradient, then the algorithm's update from :mod:`bnnkit.sgmcmc.updates`, the
    function the step-at-a-time kernel calls.

    ``xs = (batch, eps, noise_scale, xi)``: the step's minibatch, its step size, the injected
    noise's scale from :func:`_noise_scale` (0 where the schedule injects none) and
    ``xi ~ N(0, I)`` (zeros where it injects none).  Scale-adapted SGHMC reads its inverse mass
    and per-coordinate noise standard deviation as ``consts``, frozen at the end of warm-up.
    """
    if upd.kind == "sgld":

        def update(carry, g, eps, scale, xi):
            return (sgld_update(carry[0], g, eps, scale, xi),)

    elif upd.kind == "psgld":
        alpha, delta, n = upd.alpha, upd.delta, upd.num_data

        def update(carry, g, eps, var, xi):
            return psgld_update(*carry, g, eps, var, xi, alpha, delta, n)

    elif upd.kind == "asghmc":
        mdecay, eps2 = upd.mdecay, upd.eps2

        def update(carry, g, eps, scale, xi, inv_mass, noise_sd):
            return asghmc_update(*carry, g, eps2, mdecay, inv_mass, noise_sd, xi)

    else:
        c, m = upd.friction, upd.mass

        def update(carry, g, eps, scale, xi):
            return sghmc_update(*carry, g, eps, c, m, scale, xi)

    def step(carry, xs, *consts):
        batch, eps, scale, xi = xs
        g, lp = grad_and_value(carry[0], batch)
        carry = tuple(update(carry, g, eps, scale, xi, *consts))
        return carry, (carry[0].clone(), lp)

    return step


def _summed(step: Callable) -> Callable:
    """``step`` returning ``sum(w')`` (enough to tell a finite step) instead of ``w'``."""

    def step_sums(carry, xs, *consts):
        carry, (x, lp) = step(carry, xs, *consts)
        return carry, (x.sum(), lp)

    return step_sums


def _noise_scale(upd: FusedUpdate, eps: float) -> float:
    """The ``noise_scale`` a noisy step of step size ``eps`` passes to its update."""
    if upd.kind == "sgld":
        return sgld_noise_scale(eps, upd.temperature)
    if upd.kind == "psgld":
        return psgld_noise_variance(eps, upd.temperature)  # scaled per coordinate by G in the update
    if upd.kind == "asghmc":
        return 1.0  # unused: the per-coordinate standard deviation is a block constant
    return sghmc_noise_scale(eps, upd.temperature, upd.friction - upd.noise_b)


# --------------------------------------------------------------------------- the fused kernel
# Blocks keeping at most this many draws skip the per-step positions (FusedKernel._run_sparse);
# each kept draw costs one more compiled call (about 100 us), the skipped positions 2-6 us a step.
_SPARSE_KEEP = 2


@dataclass(frozen=True)
class Fused:
    """An SG-MCMC algorithm run ``block`` steps per compiled call.

    Args:
        algorithm: :class:`~bnnkit.sgmcmc.SGLD`, :class:`~bnnkit.sgmcmc.SGHMC` (incl. the
            cyclical variants), :class:`~bnnkit.sgmcmc.PreconditionedSGLD` or
            :class:`~bnnkit.sgmcmc.AdaptiveSGHMC` (see the module docstring for the options not
            fused).
        block: steps per call (default 64).  With ``loop="scan"`` the compile time does not
            depend on it; the block's positions ``[block, D]`` are held in memory at once.
        loop: ``"scan"`` (default: ``torch.compile`` of a ``scan`` over the block), ``"unroll"``
            (``torch.compile`` of a Python loop: compile time grows with ``block``), or
            ``"eager"`` (no compilation: the same block code step by step, for tests and
            debugging).  ``"scan"`` needs a side-effect-free log density and falls back to
            ``"unroll"`` for posteriors other than MLPs.
        cpp_wrapper: compile the scan with Inductor's C++ wrapper (``loop="scan"`` only).  On a
            CPU Inductor runs the scan as a loop in its generated wrapper code; in the default
            Python wrapper that loop costs tens of microseconds per step, which the C++ wrapper
            removes (measured 100 -> 57 us per step on the benchmark MLP), at the price of a
            longer first compile (a C++ build, about 10-15 s).
    """

    algorithm: Any
    block: int = DEFAULT_BLOCK
    loop: str = "scan"
    cpp_wrapper: bool = True

    def __post_init__(self) -> None:
        check_int_at_least("block", self.block, 1)
        if self.loop not in _LOOPS:
            raise BnnkitError(f"loop must be one of {_LOOPS}, got {self.loop!r}.")
        _check_supported(self.algorithm)

    @property
    def name(self) -> str:
        return self.algorithm.name

    def config(self) -> dict:
        return {
            **self.algorithm.config(),
            "fused_block": self.block,
            "fused_loop": self.loop,
            "fused_cpp_wrapper": self.cpp_wrapper,
        }

    def build(self, model: Any, chains: int | None = None, chain_batched: bool = True) -> FusedKernel:
        """Build against a :class:`~bnnkit.Posterior` or a :class:`~bnnkit.core.target.Target`.

        ``chains=K``: vectorised chains, positions ``[K, D]`` (the gradient ``vmap``-ed over them),
        each with its own minibatch (``chain_batched``: the stream gives ``[K, M, ...]``, as
        :meth:`bnnkit.data.Minibatches.per_chain` does) or all seeing the same batch.
        """
        return FusedKernel(self, model, chains, chain_batched)


class FusedKernel:
    """A built :class:`Fused`: ``init`` as the algorithm's kernel, and :meth:`run_block`."""

    def __init__(self, fused: Fused, model: Any, chains: int | None = None, chain_batched: bool = True):
        self.fused = fused
        self.chains = chains
        self.update = _check_supported(fused.algorithm)
        target, log_prob, pure = fused_log_prob(model, self.fused.name)
        self.target = target
        alg = fused.algorithm
        if self.update.kind == "psgld" and not self.update.num_data:
            n = float(getattr(target, "num_data", None) or 1)  # as PreconditionedSGLD.build takes it
            self.update = dataclasses.replace(self.update, num_data=n)
        # init, and the reference step-at-a-time path (an adapted algorithm warms up through it)
        self.kernel = alg.build(target)
        self.adaptation = self.kernel.adaptation
        if self.adaptation is not None and chains is not None:
            self.kernel = alg.build(target.vectorized(chain_batched=chain_batched))
        self.step = self.kernel.step
        self.schedule = alg.step_size if self.update.kind != "asghmc" else Constant(float(alg.step_size))
        loop = fused.loop
        if loop == "scan" and not pure:
            loop = "unroll"
        self.loop = loop
        self._code = None
        grad_and_value = torch.func.grad_and_value(log_prob)
        if chains is not None:  # vectorised chains: positions [K, D], minibatches [K, M, ...] or shared
            grad_and_value = torch.func.vmap(grad_and_value, in_dims=(0, 0 if chain_batched else None))
        step = _make_step(self.update, grad_and_value)
        self._step = step

        def unrolled(carry, args, consts):
            batches, eps, scale, xi = args
            xs, lps = [], []
            for t in range(eps.shape[0]):
                carry, (x, lp) = step(carry, (_index(batches, t), eps[t], scale[t], xi[t]), *consts)
                xs.append(x)
                lps.append(lp)
            return carry, torch.stack(xs), torch.stack(lps)

        if loop == "eager":
            self._block = unrolled
        elif loop == "unroll":
            self._block = torch.compile(unrolled, dynamic=False)
        else:
            self._block, self._code = compile_scan(step, fused.cpp_wrapper)
            # the same scan returning sum(w') per step instead of w' (compiled on first use)
            self._block_sums = compile_scan(_summed(step), fused.cpp_wrapper)[0]

    def init(self, position: Tensor, batch: Batch) -> Any:
        return self.kernel.init(position, batch)

    def draw_block(self, batches: Any, gen: torch.Generator, start: int, num_steps: int, like: Tensor):
        """The block's minibatches, step sizes, noise scales, normals and collect flags, drawn
        in the step-at-a-time order: per step, the minibatch, then ``xi`` if the step is noisy."""
        sched, upd = self.schedule, self.update
        rows = getattr(batches, "indices", None)
        gather = (
            rows is not None
            and hasattr(batches, "tensors")
            and not getattr(batches, "_full", True)
            and type(batches).next is _minibatches_next()
        )
        idx: list[Tensor] = []
        stream: list[Batch] = []
        steps = range(start, start + num_steps)
        if type(sched) is Constant:  # no per-step schedule calls (the common case)
            e = sched.step_size
            eps, collect, scale = [e] * num_steps, [True] * num_steps, [_noise_scale(upd, e)] * num_steps
        else:
            eps, collect = [sched(t) for t in steps], [sched.sampling(t) for t in steps]
            scale = [_noise_scale(upd, e) if c else 0.0 for e, c in zip(eps, collect)]
        # Normals written in place: one randn(D) per noisy step, as kernel.step draws them.
        xi = torch.empty((num_steps, *like.shape), dtype=like.dtype, device=like.device)
        shape, nxt = like.shape, (rows if gather else batches).next
        add = idx.append if gather else stream.append
        for row, noisy in zip(xi.unbind(0), collect):
            add(nxt(gen))
            if noisy:
                torch.randn(shape, generator=gen, out=row)
            else:
                row.zero_()
        if gather:
            segments = _segments([i.shape[0] for i in idx])
            data = []
            for a, b in segments:
                i = torch.cat(idx[a:b])
                data.append(tuple(x[i].unflatten(0, (b - a, -1)) for x in batches.tensors))
            batch_segments = [(a, b, d if len(d) > 1 else d[0]) for (a, b), d in zip(segments, data)]
        else:
            batch_segments = []
            for a, b in _segments([_shape_key(s) for s in stream]):
                batch_segments.append((a, b, _stack(stream[a:b])))
        dt = like.dtype
        return (
            batch_segments,
            torch.tensor(eps, dtype=dt),
            torch.tensor(scale, dtype=dt),
            xi,
            collect,
        )

    def run_block(
        self,
        state: Any,
        batches: Any,
        gen: torch.Generator,
        num_steps: int,
        keep: Sequence[int] = (),
    ) -> BlockOutput:
        """Run ``num_steps`` steps from ``state`` in one compiled call (more where the minibatch
        shape changes inside the block, e.g. a short last batch of an epoch).

        ``batches`` is a minibatch stream (``next(generator)``) or a full batch (a tuple of
        tensors).  ``keep``: the indices (within the block) of the steps whose new positions to
        return.  The step counter in ``state.iteration`` drives the step-size schedule.
        """
        check_int_at_least("num_steps", num_steps, 1)
        x = state.position
        start = int(state.iteration)
        if not hasattr(batches, "next"):  # every step sees the whole batch; no random numbers drawn
            batches = FullBatch(batches)
        segs, eps, scale, xi, _ = self.draw_block(batches, gen, start, num_steps, x)
        kind = self.update.kind
        consts: tuple = ()
        if kind == "sgld":
            carry = (x,)
        elif kind == "psgld":
            carry = (x, state.square_avg)
        else:
            carry = (x, state.momentum)
        if kind == "asghmc":
            if int(state.iteration) == 0 or bool(state.adapting):
                raise BnnkitError(
                    "AdaptiveSGHMC estimates its mass while it warms up, which runs step at a time; with "
                    "fused= give num_warmup >= 1 (the sampling phase then runs in blocks)."
                )
            upd = self.update
            inv_mass, noise_sd, self._clipped = asghmc_noise(
                state.square_avg, upd.eps2, upd.mdecay, upd.temperature, upd.noise_correction
            )
            consts = (inv_mass, noise_sd)
        keep = list(keep)
        keep_t = torch.as_tensor(keep, dtype=torch.long)
        sparse = None
        if self.loop == "scan" and len(keep) <= _SPARSE_KEEP:
            sparse = self._run_sparse(carry, consts, segs, eps, scale, xi, keep)
        if sparse is not None:
            carry, kept_pos, kept_lp = sparse
            num_finite, bad = num_steps, None
        else:  # every step's position comes back (also where a sparse block met a non-finite step)
            pos, lps = [], []
            for a, b, batch in segs:
                args = (batch, eps[a:b], scale[a:b], xi[a:b])
                if self.loop == "scan":  # one compiled graph for every block length
                    carry, (p, lp) = call_scan(self._block, self._code, carry, args, consts)
                else:
                    carry, p, lp = self._block(carry, args, consts)
                pos.append(p)
                lps.append(lp)
            positions = pos[0] if len(pos) == 1 else torch.cat(pos)
            log_density = lps[0] if len(lps) == 1 else torch.cat(lps)
            num_finite = leading_finite(positions, log_density)
            bad = None
            if num_finite < num_steps:
                bad = (positions[num_finite], log_density[num_finite], eps[num_finite])
            kept_pos, kept_lp = positions[keep_t], log_density[keep_t]
        it = state.iteration + num_steps
        last_eps = eps[-1].clone()
        if kind == "sgld":  # SGLDState
            new = state._replace(position=carry[0], iteration=it, step_size=last_eps)
        elif kind == "psgld":  # PSGLDState
            new = state._replace(position=carry[0], square_avg=carry[1], iteration=it, step_size=last_eps)
        elif kind == "asghmc":  # AdaptiveSGHMCState
            new = state._replace(position=carry[0], momentum=carry[1], iteration=it)
        else:  # SGHMCState
            new = state._replace(position=carry[0], momentum=carry[1], iteration=it, step_size=last_eps)
        return BlockOutput(new, kept_pos, kept_lp, eps[keep_t], num_steps, num_finite, bad)

    def _run_sparse(self, carry, consts, segs, eps, scale, xi, keep):
        """The block through the scan that returns per step only ``sum(w')`` and the log density,
        cut after each kept step (whose position is then the carry): with few draws kept per
        block this skips writing and re-reading every step's position ([T, D] floats, which
        left the cache at T = 128 and cost 2-6 us per step on the peers' MLP).  Returns
        ``(carry, kept positions, kept log densities)``, or None where a step is not finite (the
        caller then runs the block again with every position, to find and report it)."""
        num_steps = eps.shape[0]
        cuts = sorted({0, num_steps, *(k + 1 for k in keep), *(a for a, _, _ in segs)})
        kept: dict[int, Tensor] = {}
        sums, lps = [], []
        c = carry
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            a, _, batch = next(seg for seg in segs if seg[0] <= lo < seg[1])
            part = (
                tuple(t[lo - a : hi - a] for t in batch)
                if isinstance(batch, tuple)
                else batch[lo - a : hi - a]
            )
            args = (part, eps[lo:hi], scale[lo:hi], xi[lo:hi])
            c, (sm, lp) = call_scan(self._block_sums, self._code, c, args, consts)
            sums.append(sm)
            lps.append(lp)
            kept[hi - 1] = c[0]
        log_density = lps[0] if len(lps) == 1 else torch.cat(lps)
        total = torch.cat(sums) + log_density.reshape(num_steps, -1).sum(-1)
        if not bool(torch.isfinite(total).all()):
            return None
        positions = torch.stack([kept[k] for k in keep]) if keep else carry[0].new_empty((0, *carry[0].shape))
        return c, positions, log_density[torch.as_tensor(keep, dtype=torch.long)]

    def kept_stats(self, out: BlockOutput, n: int | None = None) -> dict[str, Tensor]:
        """The first ``n`` (default all) kept draws' stats under the names, dtypes and order
        that the step-at-a-time path stores them (the fields of its step ``info``)."""
        n = len(out.log_density) if n is None else n
        shape = (n,) if self.chains is None else (n, self.chains)  # vectorised: [n, K] as the driver
        eps = out.step_size[:n] if self.chains is None else out.step_size[:n, None].expand(shape)
        stats = {
            "log_density": out.log_density[:n],
            "step_size": eps,
            "collect": torch.ones(shape, dtype=torch.bool),  # a kept draw is a collectable step
        }
        if self.update.kind == "sghmc":  # SGHMCInfo: the constant B, no coordinate clipped
            stats["noise_estimate"] = torch.full(shape, self.update.noise_b)
            stats["noise_clipped"] = torch.zeros(shape)
        if self.update.kind == "asghmc":  # AdaptiveSGHMCInfo: the frozen mass clips the same coordinates
            stats["noise_clipped"] = self._clipped.expand(shape).clone()
        return stats

    def collects(self, start: int, num_steps: int) -> list[bool]:
        """Whether each step of a block keeps a draw (False in a cyclical exploration stage)."""
        return [self.schedule.sampling(t) for t in range(start, start + num_steps)]


def build_fused(
    algorithm: Any, model: Any, block: int, chains: int | None = None, chain_batched: bool = True
) -> FusedKernel:
    """``algorithm`` (SGLD / SGHMC) built to run ``block`` steps per call against ``model`` (a
    :class:`~bnnkit.Posterior` or a :class:`~bnnkit.core.target.Target`), optionally for ``chains``
    vectorised chains (see :meth:`Fused.build`): what ``bnnkit.sample(..., fused=...)`` reaches
    through ``algorithm.build_fused``."""
    return Fused(algorithm, block=block, loop=DEFAULT_LOOP).build(model, chains, chain_batched)


def _minibatches_next():
    from ..data.minibatch import Minibatches

    return Minibatches.next


def _index(batch: Any, t: int) -> Any:
    if isinstance(batch, tuple):
        return tuple(b[t] for b in batch)
    return batch[t]


def _shape_key(batch: Any) -> tuple:
    if isinstance(batch, tuple):
        return tuple(b.shape for b in batch)
    return batch.shape


def _stack(batches: list[Any]) -> Any:
    if isinstance(batches[0], tuple):
        return tuple(torch.stack(parts) for parts in zip(*batches))
    return torch.stack(batches)


def _segments(keys: list) -> list[tuple[int, int]]:
    """Consecutive runs of equal keys as ``(start, stop)``."""
    out, a = [], 0
    for i in range(1, len(keys) + 1):
        if i == len(keys) or keys[i] != keys[a]:
            out.append((a, i))
            a = i
    return out
