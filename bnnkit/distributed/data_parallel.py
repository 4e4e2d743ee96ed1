"""Data-parallel posteriors: every rank holds a shard, gradients are all-reduced.

With ``N`` rows in all and a global minibatch of ``M`` rows split over the ranks as ``B_r``::

    log p(w | D) ~= (N / M) sum_r sum_{i in B_r} log p(y_i | x_i, w) + log p(w)

Each rank evaluates its own term of the sum (rank 0 adds the prior) and one ``all_reduce(SUM)``
of ``[gradient, value]`` gives every rank the same log density and gradient.  The samplers draw
their noise from the chain's generator, seeded identically on every rank, so all ranks take the
same steps and hold the same parameters, and the run equals the single-process run on the same
global minibatches up to float rounding (the sum is added in another order).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from ..core.errors import BnnkitError, check_int_at_least
from ..core.posterior import PRIOR, Posterior
from ..core.target import Target
from ..core.types import Batch
from .launch import DistributedError, collective, require_initialized

_INT_OF_SIZE = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}


@dataclass(frozen=True)
class DataParallelTarget(Target):
    """The flat target of a :class:`DataParallelPosterior` (collectives inside every evaluation)."""

    def compiled(self, **compile_kwargs: Any) -> Target:
        raise BnnkitError(
            "compile=True is not supported with data_parallel: the gradient contains an all-reduce. "
            "Sample with compile=False."
        )

    def vectorized(self, chain_batched: bool, compile: bool = False) -> Target:
        raise BnnkitError(
            "chain_method='vectorized' is not supported with data_parallel (the gradient contains an "
            "all-reduce); use chain_method='sequential', or chain_parallel_sample to spread chains over ranks."
        )


class DataParallelPosterior(Posterior):
    """A :class:`~bnnkit.Posterior` whose log density sums the likelihood over all ranks' shards.

    Made by :func:`data_parallel`; use it wherever the posterior goes (``bnnkit.sample``,
    ``bnnkit.predict``).  Only :meth:`target` differs: its log density and gradient are
    all-reduced over ``group``, so every rank must call the sampler with the same arguments.
    """

    def __init__(self, posterior: Posterior, group: Any = None, sync_check_every: int | None = 100):
        if not isinstance(posterior, Posterior) or isinstance(posterior, DataParallelPosterior):
            raise BnnkitError(
                f"data_parallel needs a bnnkit.Posterior (not yet data-parallel), got {type(posterior).__name__}."
            )
        if type(posterior).target is not Posterior.target:
            raise BnnkitError(
                f"data_parallel supports bnnkit.Posterior, not {type(posterior).__name__} (its gradient has "
                "terms that are not a sum over data rows); run it single-process or chain-parallel."
            )
        if sync_check_every is not None:
            check_int_at_least("sync_check_every", sync_check_every, 1)
        require_initialized("data_parallel")
        # Share the model, likelihood, prior and layout of the wrapped posterior.
        self.__dict__.update(posterior.__dict__)
        self.base = posterior
        self.group = group
        self.sync_check_every = sync_check_every
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)

    def target(self) -> Target:
        base = Posterior.target(self)
        red = _Reducer(self)
        conj = {}
        for name, fn in base.conjugate_updates.items():
            # A prior's conjugate draw depends only on the weights (the same on every rank); a
            # likelihood's depends on the data, which no rank holds in full.
            conj[name] = fn if name.startswith(PRIOR) else _unsupported_update(name)
        # The base target's fields, its data terms all-reduced; no likelihood bound, and no
        # hand-batched gradient (chains are not vectorised with data_parallel).
        fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
        fields.update(
            log_prob=red.log_prob,
            grad_fn=red.value_and_grad,
            log_likelihood=red.log_likelihood,
            log_likelihood_bound=None,
            conjugate_updates=conj,
            stacked_grad=None,
        )
        return DataParallelTarget(**fields)

    def config(self) -> dict:
        return {**super().config(), "data_parallel": {"world_size": self.world_size}}


def data_parallel(
    posterior: Posterior, group: Any = None, sync_check_every: int | None = 100
) -> DataParallelPosterior:
    """``posterior`` with its likelihood summed over the shards of all ranks of ``group``.

    Each rank passes its own shard as the data (a :class:`ShardedMinibatches`, or the whole
    shard as a full batch for the classic samplers); ``posterior.num_data`` must be the size of
    the full data set.  Then ``bnnkit.sample(algorithm, data_parallel(post), shard, seed=s, ...)``
    run on every rank with the same arguments gives every rank the draws of the single-process
    ``bnnkit.sample(algorithm, post, Minibatches(x, y, batch_size=M), seed=s, ...)``.

    Args:
        posterior: a :class:`~bnnkit.Posterior` (every rank builds the same one).
        group: the process group (default: the whole job).
        sync_check_every: every this many gradient evaluations, and at the first, check with a
            small collective that all ranks hold bit-identical parameters and draw minibatches of
            the same global size; a mismatch (different seeds or settings, a resume from
            different checkpoints, a sampler whose update depends on the local batch) raises
            :class:`DistributedError` on every rank.  ``None`` switches the check off.

    Algorithms whose update uses the data only through this gradient work: SGLD, SGHMC and
    full-batch HMC are tested against single-process runs; pSGLD and the cyclical variants use
    the gradient the same way.  The run's configuration records the number of ranks, so a
    resume with another number is refused.  ``SGHMC(noise_estimate="online")``
    splits each rank's batch in halves and weighs them by local row counts, which differ
    between ranks: not supported.  Gibbs updates of the likelihood's noise precision raise.
    """
    return DataParallelPosterior(posterior, group, sync_check_every)


def _unsupported_update(name: str):
    def update(x: Tensor, batch: Batch, gen: torch.Generator) -> Tensor:
        raise BnnkitError(
            f"the conjugate update of {name!r} needs the whole data set and is not supported with "
            "data_parallel; sample that parameter with the weights (e.g. SGLD/SGHMC) or run single-process."
        )

    return update


class _Reducer:
    """Evaluates this rank's share of the log density and all-reduces it over the group."""

    def __init__(self, post: DataParallelPosterior):
        self.post = post
        self.group = post.group
        self.rank = post.rank
        self.world = post.world_size
        self.backend = str(dist.get_backend(post.group))
        self.sync_every = post.sync_check_every
        self.calls = 0

    # ------------------------------------------------------------------ pieces
    def _rows(self, batch: Batch) -> tuple[int, int]:
        if not (isinstance(batch, (tuple, list)) and len(batch) == 2):
            raise BnnkitError(
                "data_parallel needs batches (inputs, targets): pass this rank's shard as a "
                "ShardedMinibatches stream, or as a tuple (inputs, targets)."
            )
        m_local = int(batch[0].shape[0])
        m_global = getattr(batch, "global_rows", None)
        if m_global is None:  # a plain batch: count the rows over all ranks
            count = torch.tensor([float(m_local)], dtype=torch.float64)
            self._all_reduce(count, "the all-reduce of the batch size")
            m_global = int(count.item())
        if m_global == 0:
            raise BnnkitError(
                "the global minibatch is empty on every rank; check the shards and the batch size."
            )
        return m_local, m_global

    def _scale(self, m_global: int) -> float:
        n = self.post.num_data
        return 1.0 if n is None else n / m_global

    def _local_fn(self, batch: Batch, m_local: int, scale: float, prior: bool):
        """This rank's term as ``f(x, batch)``, or None when it is identically zero."""
        post, with_prior = self.post, prior and self.rank == 0
        if m_local == 0 and not with_prior:
            return None

        def f(x: Tensor, batch: Batch) -> Tensor:
            out = None
            if m_local > 0:
                net, lik, _ = post.split(x)
                inputs, targets = batch
                ll = post.likelihood.log_prob(post.forward(net, inputs), targets, lik)
                out = ll if scale == 1.0 else scale * ll
            if with_prior:
                lp = post.log_prior_flat(x)
                out = lp if out is None else out + lp
            return out

        return f

    def _all_reduce(self, t: Tensor, what: str, op: Any = None) -> Tensor:
        op = dist.ReduceOp.SUM if op is None else op
        if self.world == 1:
            return t
        comm = t
        if self.backend == "nccl" and not t.is_cuda:
            comm = t.to(torch.device("cuda", torch.cuda.current_device()))
        elif self.backend == "gloo" and t.is_cuda:
            comm = t.cpu()
        collective(lambda: dist.all_reduce(comm, op=op, group=self.group), what, self.group)
        if comm is not t:
            t.copy_(comm)
        return t

    def _check_sync(self, x: Tensor, m_global: int) -> None:
        """All ranks must hold bit-identical positions and agree on the global batch size."""
        if self.sync_every is None or self.world == 1:
            return
        calls, self.calls = self.calls, self.calls + 1
        if calls % self.sync_every:
            return
        bits = x.detach().contiguous().reshape(-1).view(_INT_OF_SIZE[x.element_size()])
        fp = int(bits.sum(dtype=torch.int64))
        t = torch.tensor([fp, m_global, -fp, -m_global], dtype=torch.int64)
        self._all_reduce(t, "the parameter synchronisation check", op=dist.ReduceOp.MAX)
        if int(t[0]) != -int(t[2]) or int(t[1]) != -int(t[3]):
            what = "parameters" if int(t[0]) != -int(t[2]) else "global minibatch sizes"
            raise DistributedError(
                f"rank {self.rank} of {self.world}: the ranks hold different {what} at gradient evaluation "
                f"{calls} of data_parallel. Every rank must run the same algorithm with the same seed, chains, "
                "initialisation and stream settings, resume from the same checkpoint, and use a sampler whose "
                "update sees the data only through the gradient (not SGHMC(noise_estimate='online'))."
            )

    # ------------------------------------------------------------------ target functions
    def value_and_grad(self, x: Tensor, batch: Batch) -> tuple[Tensor, Tensor]:
        m_local, m_global = self._rows(batch)
        self._check_sync(x, m_global)
        f = self._local_fn(batch, m_local, self._scale(m_global), prior=True)
        if f is None:
            lp, g = torch.zeros((), dtype=x.dtype, device=x.device), torch.zeros_like(x)
        else:
            lp, g = Target.autograd_value_and_grad(f, x, batch)
        buf = torch.cat([g.reshape(-1), lp.reshape(1).to(g.dtype)])
        self._all_reduce(buf, "the gradient all-reduce")
        return buf[-1].clone(), buf[:-1].view_as(x)

    def _value(self, x: Tensor, batch: Batch, prior: bool, what: str) -> Tensor:
        m_local, m_global = self._rows(batch)
        f = self._local_fn(batch, m_local, self._scale(m_global), prior=prior)
        with torch.no_grad():
            v = f(x, batch) if f is not None else None
        out = torch.zeros(1, dtype=x.dtype, device=x.device) if v is None else v.detach().reshape(1).clone()
        return self._all_reduce(out, what)[0]

    def log_prob(self, x: Tensor, batch: Batch) -> Tensor:
        if x.requires_grad:
            raise BnnkitError(
                "the data-parallel log density is not differentiable by autograd (it contains an all-reduce); "
                "use target.value_and_grad."
            )
        return self._value(x, batch, True, "the log-density all-reduce")

    def log_likelihood(self, x: Tensor, batch: Batch) -> Tensor:
        return self._value(x, batch, False, "the log-likelihood all-reduce")
