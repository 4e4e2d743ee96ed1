"""bnnkit's own cases for ``../shared/tools/peers_bench.py --plugin benchmarks/peers_plugin.py``.

Timed in the same round-robin as the peers' floors, on their workload (the same model, initial
weights and 16 pre-sliced minibatches of 32 rows, N = 506, sigma = 1, N(0, 1) prior), so each
case's ``x floor a`` is a same-run ratio:

- ``bnnkit_{sgld,sghmc}_eager``: ``kernel.step`` of the step-at-a-time path;
- ``bnnkit_{sgld,sghmc}_compiled``: the same on the compiled target (``compile=True``);
- ``bnnkit_{sgld,sghmc}_fused_T{T}``: :meth:`bnnkit.sgmcmc.FusedKernel.run_block`, ``T`` steps
  per call (``T`` gradient evaluations), the block's minibatches and normals drawn from the
  generator in the step-at-a-time order, then one compiled ``scan``.

- ``bnnkit_hmc_full_L10_eager``: ``HMC(step_size=hmc_eps, num_steps=10, jitter=0).build(target).step``
  on the full batch (10 gradient evaluations per call);
- ``bnnkit_hmc_full_L10_fused_T{T}``: :meth:`bnnkit.samplers.fused_hmc.FusedHMCKernel.run_block`,
  ``T`` transitions (``10 T`` gradient evaluations) per compiled call.

SGLD uses ``eps = 2 lr`` (bnnkit's ``w + eps/2 g + sqrt(eps) xi`` is the peers' ``w + lr g +
sqrt(2 lr) xi``).  ``BNNKIT_FUSED_BLOCKS`` (e.g. ``"8 32 128"``) sets the block sizes.
Compile times (the first call) go into each case's note.
"""

from __future__ import annotations

import copy
import os
import time


class CycleStream:
    """A minibatch stream over pre-sliced minibatches, in turn (no random numbers drawn); also
    used by ``benchmarks/bench_fused_cnn.py`` (this file stays importable by path, without the
    ``benchmarks`` package)."""

    def __init__(self, mbs):
        self.mbs, self.i = mbs, 0

    def next(self, gen):
        b = self.mbs[self.i % len(self.mbs)]
        self.i += 1
        return b

    def state_dict(self):
        return {"i": self.i}

    def load_state_dict(self, state):
        self.i = state["i"]


def cases(ctx):
    import bnnkit
    from bnnkit.sgmcmc import Fused

    blocks = [int(b) for b in os.environ.get("BNNKIT_FUSED_BLOCKS", "8 32 128").split()]
    n = ctx.X.shape[0]
    post = bnnkit.Posterior(
        copy.deepcopy(ctx.model), bnnkit.Gaussian(ctx.sigma), bnnkit.GaussianPrior(ctx.prior_std), num_data=n
    )
    target = post.target()
    x0 = ctx.flat0.clone()
    algs = {"sgld": bnnkit.SGLD(2 * ctx.lr), "sghmc": bnnkit.SGHMC(1e-3, friction=10.0)}
    out = []
    compiled = target.compiled()
    t0 = time.perf_counter()
    compiled.value_and_grad(x0, ctx.mb(0))
    first_compiled = time.perf_counter() - t0
    for name, alg in algs.items():
        for label, tg in (("eager", target), ("compiled", compiled)):
            kernel = alg.build(tg)
            st = {"s": kernel.init(x0, ctx.mb(0))}

            def step(i, kernel=kernel, st=st):
                st["s"], _ = kernel.step(st["s"], ctx.mb(i), ctx.generator)

            note = f"bnnkit {label} kernel.step"
            if label == "compiled":
                note += f"; first call {first_compiled:.1f} s"
            out.append(dict(name=f"bnnkit_{name}_{label}", section="p", fn=step, grads=1, note=note))
        fk = Fused(alg, block=max(blocks)).build(post)
        for T in blocks:
            stream = CycleStream(ctx.minibatches)
            st = {"s": fk.init(x0, ctx.mb(0))}
            t0 = time.perf_counter()
            st["s"] = fk.run_block(st["s"], stream, ctx.generator, T).state
            first = time.perf_counter() - t0

            def block(i, fk=fk, st=st, stream=stream, T=T):
                st["s"] = fk.run_block(st["s"], stream, ctx.generator, T).state

            out.append(
                dict(
                    name=f"bnnkit_{name}_fused_T{T}",
                    section="p",
                    fn=block,
                    grads=T,
                    calls_div=T,
                    note=f"bnnkit Fused({name}, block={T}).run_block (scan); first call {first:.1f} s",
                )
            )
    # Full-batch HMC, L = 10, unit mass, the peers' step size, no jitter (as BlackJAX's hmc.step).
    hmc = bnnkit.HMC(step_size=ctx.hmc_eps, num_steps=ctx.hmc_L, jitter=0.0)
    full_post = bnnkit.Posterior(
        copy.deepcopy(ctx.model), bnnkit.Gaussian(ctx.sigma), bnnkit.GaussianPrior(ctx.prior_std)
    )
    full = (ctx.X, ctx.Y)
    kernel = hmc.build(full_post.target())
    hs = {"s": kernel.init(x0, full)}

    def hmc_step(i):
        hs["s"], _ = kernel.step(hs["s"], full, ctx.generator)

    out.append(
        dict(
            name=f"bnnkit_hmc_full_L{ctx.hmc_L}_eager",
            section="p",
            fn=hmc_step,
            grads=ctx.hmc_L,
            calls_div=ctx.hmc_L,
            note="bnnkit HMC kernel.step, full batch",
        )
    )
    fk = hmc.build_fused(full_post, max(blocks))
    for T in [b for b in blocks if b <= 32]:  # T transitions are 10 T gradients
        st = {"s": fk.init(x0, full)}
        t0 = time.perf_counter()
        st["s"] = fk.run_block(st["s"], full, ctx.generator, T).state
        first = time.perf_counter() - t0

        def hmc_block(i, st=st, T=T):
            st["s"] = fk.run_block(st["s"], full, ctx.generator, T).state

        out.append(
            dict(
                name=f"bnnkit_hmc_full_L{ctx.hmc_L}_fused_T{T}",
                section="p",
                fn=hmc_block,
                grads=T * ctx.hmc_L,
                calls_div=T * ctx.hmc_L,
                note=f"bnnkit HMC build_fused(block={T}).run_block (scan); first call {first:.1f} s",
            )
        )
    return out
