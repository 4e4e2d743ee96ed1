"""The MAP phase of a warm start, for K chains as one computation.

Each chain ``c`` holds out ``holdout`` of the rows (a permutation drawn from its own generator),
draws its minibatches from the same generator, and runs Adam on the negative log posterior; the
K chains' gradients come from one vectorised evaluation (``Target.vectorized``), and Adam, being
elementwise, updates each chain as if alone.  Every ``every`` steps (an epoch of the fitted rows,
at least ``MIN_CHECK_STEPS``) each chain scores the mean held-out log-likelihood per row; a chain
keeps its best iterate and stops after ``patience`` scores without improvement (or, with
``patience_steps``, after that many steps without improvement if that is fewer scores); with
``drop_stopped`` a stopped chain leaves the vectorised evaluation.  The loop ends when every chain
has stopped or ``steps`` are spent.

Why early stopping: with the noise learnt, a long MAP overfits a noisy set and shrinks the noise,
and a cool chain started there stays over-confident, while a smooth, nearly noise-free set needs
the long fit (see :func:`bnnkit.core.warm_start.map_init`).  Why ``patience_steps``: on a large set
a score comes once an epoch, and 20 epochs without improvement can outlast the whole budget.  Why
``drop_stopped`` is an option: it makes the chains still running pay for themselves only (a CNN's
step on the CPU costs about K times one chain's), but a small MLP's step is overhead-bound and a
vectorised evaluation of fewer chains is not bit-equal to that of all of them (energy's MAP phase
moved), so off, every chain is evaluated to the end.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

MIN_CHECK_STEPS = 100  # Adam steps between two held-out scores, at least
# Held-out rows scored per vectorised forward: all of MNIST's 6,000 at once made a 550 MB
# activation for 4 chains of a small CNN and took 6 s a score; in chunks it stays in cache.
SCORE_CHUNK = 512


def map_phase(
    posterior,
    inputs: Tensor,
    targets: Tensor,
    x0: Tensor,
    gens: Sequence[torch.Generator],
    *,
    steps: int,
    lr: float,
    batch_size: int | None,
    holdout: float | None,
    patience: int,
    patience_steps: int | None = None,
    drop_stopped: bool = False,
    stochastic: bool = False,
    progress: bool = False,
) -> tuple[Tensor, list[tuple[int, int]], Tensor | None]:
    """Positions ``[K, D]`` after the MAP phase of the K chains started at ``x0 [K, D]``, chain ``c``
    drawing from ``gens[c]``, each chain's ``(best step, steps run)``, and (with ``holdout``) each
    chain's mean squared error on its held-out rows at the position returned (``None`` without).

    ``patience_steps``: a chain also stops after this many steps without improvement, counted in
    whole scores (at least one); ``drop_stopped``: a stopped chain leaves the evaluation.
    ``stochastic``: Adam on the gradient an SG-MCMC step sees (``Target.estimate_grad``, e.g. a
    functional prior's unbiased estimate; its random numbers from ``gens[0]``, drawn for every
    chain at once, so its chains all stay in the evaluation) instead of the autograd gradient of
    the log posterior.  ``progress``: a progress bar over the step budget
    with the chains still running and the best held-out score."""
    from tqdm.auto import tqdm

    k_chains = int(x0.shape[0])
    target = posterior.target().vectorized(chain_batched=True)
    device = inputs.device
    held, fit_rows = _split_rows(inputs, targets, gens, holdout, k_chains)
    score_of = None if held is None else _held_out_score(posterior, held)
    m = int(fit_rows.shape[1])
    full = batch_size is None or batch_size >= m
    every = max(1 if full else -(-m // batch_size), min(MIN_CHECK_STEPS, steps))
    patience = patience if patience_steps is None else max(1, min(patience, patience_steps // every))
    x = x0.detach().clone()
    adam = _Adam(x, lr)
    best = torch.full((k_chains,), -math.inf, dtype=torch.float64)
    best_x = x0.detach().clone()
    best_step = torch.zeros(k_chains, dtype=torch.long)
    since = torch.zeros(k_chains, dtype=torch.long)
    ran = torch.full((k_chains,), steps, dtype=torch.long)
    active = torch.ones(k_chains, dtype=torch.bool)
    bar = tqdm(total=steps, desc=f"MAP phase, {k_chains} chains", disable=not progress, leave=False)
    step = 0
    while step < steps and bool(active.any()):
        # the chains in this step's evaluation
        live = active.nonzero().squeeze(1) if drop_stopped and not stochastic else torch.arange(k_chains)
        rows = fit_rows[live.to(device)]
        if not full:
            picks = [torch.randint(m, (batch_size,), generator=gens[c], device=gens[c].device) for c in live]
            rows = torch.gather(rows, 1, torch.stack(picks).to(device))
        step += 1
        adam.step(x, -_gradient(target, x, (inputs[rows], targets[rows]), live, stochastic, gens[0]))
        if held is not None and (step % every == 0 or step == steps):
            score = score_of(x, live)  # the chains of this step (-inf for the others)
            better = (score > best) & active
            best = torch.where(better, score, best)
            best_x[better.to(device)] = x[better.to(device)]
            best_step[better] = step
            since = torch.where(better, torch.zeros_like(since), since + active.long())
            done = active & (since >= patience)
            ran[done] = step
            active &= ~done
            bar.update(every)
            bar.set_postfix(running=int(active.sum()), best=f"{float(best.max()):.3f}")
    bar.close()
    ran[active] = step
    held_mse = None
    if held is None:
        best_x, best_step = x.clone(), ran.clone()
    else:
        held_mse = _held_out_mse(posterior, best_x, held)
    return best_x, [(int(b), int(r)) for b, r in zip(best_step, ran)], held_mse


class _Adam:
    """``torch.optim.Adam(lr=lr)``'s step on one tensor, in place, through PyTorch's functional
    ``torch.optim.adam.adam`` with the state and arguments the optimiser would pass it, so the
    iterates are the optimiser's to the bit.  Why not the optimiser itself: its per-step
    bookkeeping (hooks, profiler records, grad-mode switches) made the step 1.3-1.6x slower on a
    small MLP's 4 x 10,901 numbers (``benchmarks/bench_diagnostics.py``)."""

    def __init__(self, x: Tensor, lr: float):
        from torch.optim.adam import adam

        self.adam, self.lr = adam, lr
        self.avg, self.avg_sq = torch.zeros_like(x), torch.zeros_like(x)
        self.steps = torch.tensor(0.0, dtype=torch.get_default_dtype())  # where the optimiser keeps it

    def step(self, x: Tensor, grad: Tensor) -> None:
        with torch.no_grad():
            self.adam([x], [grad], [self.avg], [self.avg_sq], [], [self.steps], amsgrad=False,
                      beta1=0.9, beta2=0.999, lr=self.lr, weight_decay=0.0, eps=1e-8, maximize=False)  # fmt: skip


def _gradient(target, x: Tensor, batch, live: Tensor, stochastic: bool, gen: torch.Generator) -> Tensor:
    """The gradient ``[K, D]`` of the log posterior of the chains ``live`` at ``x`` on their
    minibatches ``batch`` (``stochastic``: the step's estimate, its random numbers from ``gen``);
    a stopped chain's iterate no longer matters, so its gradient is left at zero."""
    if stochastic:
        return target.estimate_grad(x, batch, gen)[1]
    if len(live) == x.shape[0]:
        return target.value_and_grad(x, batch)[1]
    live = live.to(x.device)
    g = torch.zeros_like(x)
    g[live] = target.value_and_grad(x[live], batch)[1]
    return g


def _held_out_score(posterior, held: tuple[Tensor, Tensor]):
    """The function of positions ``[K, D]`` and the indices of the chains still running that gives
    those chains' mean held-out log-likelihood per row (float64, on the CPU; -inf for the others),
    its rows scored :data:`SCORE_CHUNK` at a time."""
    mapped = torch.func.vmap(lambda xc, hx, hy: posterior.log_likelihood_flat(xc, (hx, hy)))
    h = held[0].shape[1]
    chunks = list(zip(held[0].split(SCORE_CHUNK, 1), held[1].split(SCORE_CHUNK, 1)))
    # log_likelihood_flat scales a batch of r rows by N / r: per_row undoes it per chunk
    per_row = [posterior.scale((hx[0], hy[0])) * h for hx, hy in chunks]

    def score(x: Tensor, live: Tensor) -> Tensor:
        out = torch.full((x.shape[0],), -math.inf, dtype=torch.float64)
        idx = live.to(x.device)
        with torch.no_grad():
            xs = x[idx]
            out[live] = (
                sum(mapped(xs, hx[idx], hy[idx]) / r for (hx, hy), r in zip(chunks, per_row)).double().cpu()
            )
        return out

    return score


def _split_rows(
    inputs: Tensor, targets: Tensor, gens: Sequence[torch.Generator], holdout: float | None, k_chains: int
) -> tuple[tuple[Tensor, Tensor] | None, Tensor]:
    """Each chain's held-out rows ``([K, h, ...], [K, h, ...])`` (None without ``holdout``), drawn
    from its generator, and the indices ``[K, m]`` of the rows it fits."""
    n, device = int(inputs.shape[0]), inputs.device
    h = 0 if holdout is None else round(holdout * n)
    if h < 1:  # no rows to hold out (or a handful of rows): no held-out score, the whole budget
        return None, torch.arange(n, device=device).expand(k_chains, n)
    perms = torch.stack([torch.randperm(n, generator=g, device=g.device).to(device) for g in gens])
    return (inputs[perms[:, :h]], targets[perms[:, :h]]), perms[:, h:]


def _held_out_mse(posterior, positions: Tensor, held: tuple[Tensor, Tensor]) -> Tensor | None:
    """Each chain's mean squared error on its held-out rows at ``positions [K, D]`` (None for a
    model with not one output per target, e.g. a classifier)."""
    if getattr(posterior.likelihood, "kind", None) == "categorical":  # one output per class
        return None
    mapped = torch.func.vmap(lambda xc, hx: posterior.forward(posterior.split(xc)[0], hx))
    with torch.no_grad():
        out = torch.cat([mapped(positions, hx) for hx in held[0].split(SCORE_CHUNK, 1)], 1)
    if out.numel() != held[1].numel():
        return None
    return ((out.reshape(held[1].shape) - held[1]) ** 2).flatten(1).mean(1)
