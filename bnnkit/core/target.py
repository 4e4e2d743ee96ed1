"""A log density over a flat vector, with optional extras some algorithms need.

Every sampler is built against a :class:`Target`.  A :class:`~bnnkit.core.posterior.Posterior`
produces a rich one (prior draws, a likelihood bound, conjugate Gibbs updates); any user
log-density over a dict of tensors becomes a plain one with :func:`as_target`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch
from torch import Tensor

from .errors import BnnkitError
from .flat import FlatView
from .types import Batch, LogDensityFn

FlatLogDensity = Callable[[Tensor, Batch], Tensor]
ConjugateUpdate = Callable[[Tensor, Batch, torch.Generator], Tensor]


@dataclass(frozen=True)
class Target:
    """Unnormalised log density ``log_prob(x, batch)`` of a flat position ``x``.

    Optional extras, used only by the algorithms that need them:

    - ``prior_sample(generator) -> x`` and ``prior_log_prob(x)``: default proposal for rejection
      and importance sampling, and ``init="prior"`` in the driver.
    - ``log_likelihood(x, batch)`` and ``log_likelihood_bound(batch)``: an upper bound of the
      (scaled) log-likelihood, for rejection sampling with the prior as proposal.
    - ``conjugate_updates``: exact Gibbs draws of named parameters given the rest.
    - ``stochastic_grad(x, batch, generator)``: a gradient estimate that draws random numbers
      (functional priors at random measurement points), used by the SG-MCMC samplers.
    - ``num_data``: the training-set size N (for preconditioners on the per-datum scale).
    - ``stacked_grad(x, batch, chain_batched)``: value and gradient over stacked positions
      ``[K, D]`` computed without ``vmap`` (an MLP posterior's hand-batched pass), or None where
      it does not apply to ``batch``; used by :meth:`vectorized`.
    """

    view: FlatView
    log_prob: FlatLogDensity
    grad_fn: Callable[[Tensor, Batch], tuple[Tensor, Tensor]] | None = None
    prior_sample: Callable[[torch.Generator], Tensor] | None = None
    prior_log_prob: Callable[[Tensor], Tensor] | None = None
    log_likelihood: FlatLogDensity | None = None
    log_likelihood_bound: Callable[[Batch], Tensor] | None = None
    conjugate_updates: Mapping[str, ConjugateUpdate] = field(default_factory=dict)
    stochastic_grad: Callable[[Tensor, Batch, torch.Generator], tuple[Tensor, Tensor]] | None = None
    num_data: int | None = None
    vectorized_stochastic_grad: (
        Callable[[Tensor, Batch, torch.Generator, bool], tuple[Tensor, Tensor]] | None
    ) = None
    stacked_grad: Callable[[Tensor, Batch, bool], tuple[Tensor, Tensor] | None] | None = None

    def estimate_grad(self, x: Tensor, batch: Batch, gen: torch.Generator) -> tuple[Tensor, Tensor]:
        """Log density and gradient as a stochastic-gradient sampler sees them.

        Equals :meth:`value_and_grad` unless the target's gradient itself draws random numbers
        (the functional prior's measurement points), which then come from ``gen``.
        """
        if self.stochastic_grad is not None:
            return self.stochastic_grad(x, batch, gen)
        return self.value_and_grad(x, batch)

    def value_and_grad(self, x: Tensor, batch: Batch) -> tuple[Tensor, Tensor]:
        """Log density and its gradient at ``x``.

        Uses ``grad_fn`` when the target provides a specialised one, else one reverse-mode pass.
        """
        if self.grad_fn is not None:
            return self.grad_fn(x, batch)
        return self.autograd_value_and_grad(self.log_prob, x, batch)

    def compiled(self, **compile_kwargs) -> Target:
        """This target with its gradient compiled by ``torch.compile``.

        Compiles ``torch.func.grad_and_value`` of :attr:`log_prob` (the whole log density, so
        Inductor fuses likelihood and prior).  At BNN-benchmark sizes the eager cost is
        per-operation overhead and compiling removes most of it (see ``benchmarks/``); the first
        call pays the compile time (seconds), and each new batch shape compiles once more.
        """
        import dataclasses

        raw = torch.func.grad_and_value(self.log_prob)
        fn = torch.compile(raw, **compile_kwargs)

        def grad_fn(x: Tensor, batch: Batch) -> tuple[Tensor, Tensor]:
            g, lp = fn(x, batch)
            return lp, g

        return dataclasses.replace(self, grad_fn=grad_fn)

    def vectorized(self, chain_batched: bool, compile: bool = False) -> Target:
        """This target over ``K`` stacked positions ``[K, D]``: K chains as one computation.

        The log density is mapped over chains with ``torch.func.vmap`` (one batched forward
        pass of the network for all chains) and differentiated by one reverse pass of the sum
        over chains, which gives every chain its own gradient because the chains do not
        interact.  With ``chain_batched`` each chain has its own minibatch (the batch tensors
        carry a leading chain dimension ``[K, M, ...]``); else all chains share the batch.  Where
        the target has a ``stacked_grad`` (an MLP posterior), eager steps use it instead: the
        same values and gradients without ``vmap``'s per-operation dispatch.
        A stochastic gradient (functional prior) is vectorised by the target's own
        ``vectorized_stochastic_grad`` hook.  With ``compile`` the mapped gradient
        ``vmap(grad_and_value(log_prob))`` is compiled by ``torch.compile`` instead.
        """
        import dataclasses

        log_prob = self.log_prob
        in_dims = (0, 0 if chain_batched else None)
        mapped = torch.func.vmap(log_prob, in_dims=in_dims)

        if compile:
            fused = torch.compile(torch.func.vmap(torch.func.grad_and_value(log_prob), in_dims=in_dims))

            def grad_fn(x: Tensor, batch: Batch) -> tuple[Tensor, Tensor]:
                g, lp = fused(x, batch)
                return lp, g

        else:
            stacked = self.stacked_grad

            def grad_fn(x: Tensor, batch: Batch) -> tuple[Tensor, Tensor]:
                if stacked is not None:
                    out = stacked(x, batch, chain_batched)
                    if out is not None:
                        return out
                with torch.enable_grad():
                    xg = x.detach().requires_grad_(True)
                    lp = mapped(xg, batch)
                    (g,) = torch.autograd.grad(lp.sum(), xg)
                return lp.detach(), g

        stochastic = None
        if self.stochastic_grad is not None:
            hook = self.vectorized_stochastic_grad
            if hook is None:
                raise ValueError("this target's stochastic gradient has no vectorised form.")

            def stochastic(x: Tensor, batch: Batch, gen: torch.Generator) -> tuple[Tensor, Tensor]:
                return hook(x, batch, gen, chain_batched)

        return dataclasses.replace(
            self,
            log_prob=mapped,
            grad_fn=grad_fn,
            stochastic_grad=stochastic,
            vectorized_stochastic_grad=None,
            stacked_grad=None,
            conjugate_updates={},
            log_likelihood=None,
            log_likelihood_bound=None,
        )

    @staticmethod
    def autograd_value_and_grad(fn: FlatLogDensity, x: Tensor, batch: Batch) -> tuple[Tensor, Tensor]:
        # Plain autograd on a flat leaf: measured faster than torch.func.grad at these sizes.
        with torch.enable_grad():
            xg = x.detach().requires_grad_(True)
            lp = fn(xg, batch)
            if not (isinstance(lp, Tensor) and lp.numel() == 1 and lp.requires_grad):
                _gradient_error(lp)
            (g,) = torch.autograd.grad(lp, xg)
        return lp.detach(), g


def _gradient_error(lp: object) -> None:
    if not isinstance(lp, Tensor):
        raise BnnkitError(f"the log density returned {type(lp).__name__}, not a torch tensor.")
    if lp.numel() != 1:
        raise BnnkitError(
            f"the log density returned a tensor of shape {tuple(lp.shape)}; it must return one number (a 0-d "
            "tensor). If it returns one term per data point or per parameter, sum them."
        )
    raise BnnkitError(
        "the log density does not depend on the parameters (its value carries no gradient), so a gradient-based "
        "sampler cannot use it. Compute it from the parameter tensors it is given, without .detach(), .item() "
        "or torch.no_grad()."
    )


def as_target(log_density: LogDensityFn, example: Mapping[str, Tensor]) -> Target:
    """Wrap a log density over a dict of tensors as a flat :class:`Target`."""
    for name, t in example.items():
        if not isinstance(t, Tensor):
            raise BnnkitError(f"init[{name!r}] must be a torch.Tensor, got {type(t).__name__}.")
        if t.numel() == 0:
            raise BnnkitError(
                f"init[{name!r}] has no elements (shape {tuple(t.shape)}); every parameter needs at least one "
                "value. Drop it from init, or give it its shape."
            )
        if not torch.is_floating_point(t):
            raise BnnkitError(
                f"init[{name!r}] has dtype {t.dtype}; sampled parameters must be floating point. Use "
                f"init[{name!r}].double() (or .float())."
            )
    view = FlatView(example)

    def log_prob(x: Tensor, batch: Batch) -> Tensor:
        return log_density(view.unravel(x), batch)

    return Target(view=view, log_prob=log_prob)
