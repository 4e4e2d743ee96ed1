"""Probe of the bandit's Thompson agents: posterior spread of the reward estimates over time.

Plays one run exactly as :func:`bnnkit.bench.bandit.play` does (same environment, agent, generators
and order of updates, so the regret is the run's) and every ``--every`` interactions measures, on a
fixed probe set of mushrooms (``--probe`` edible and ``--probe`` poisonous, drawn once from a
generator seeded with 12345):

- ``sd_ed`` / ``sd_po``: the spread of the Thompson draws' predicted reward of *eat* (reward units),
  the sd over ``--draws`` draws averaged over the probe mushrooms.  For an SG-MCMC agent the draws
  are a copy of the chain run on for ``--draws`` x ``--gap`` further updates (a probe generator,
  seeded 999, so the run itself is untouched) and read every ``--gap`` updates; ``--gap`` = the
  ``updates`` per interaction makes consecutive draws the ones that consecutive decisions see;
- ``mu_ed`` / ``mu_po``: the mean predicted eat reward minus the reject reward (reward units);
- ``Peat_po`` / ``Peat_ed``: the fraction of (draw, probe mushroom) pairs whose draw eats;
- ``pois`` / ``rej``: poisonous mushrooms eaten and edible ones rejected in the last window;
- ``gp``: the GP prior's hyperparameters (functional agents).

Usage (one thread, as every bandit number is measured)::

    python -m experiments.bandit_probe --method fsgld --p 0.5 --seed 0 --steps 3000 \
        --config '{"fsgld_max_step": 1e-3}'
"""

from __future__ import annotations

import argparse
import copy
import json
import time

import torch

from bnnkit.bench import bandit as B
from bnnkit.bench.bandit.agents import make_agent
from bnnkit.core.random import make_generator
from bnnkit.data.mushroom import load_mushroom
from bnnkit.decisions import ReplayBuffer, action_inputs, one_hot_blocks


def probe_set(edible: torch.Tensor, k: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(12345)
    ed = torch.nonzero(edible).flatten()
    po = torch.nonzero(~edible).flatten()
    return torch.cat(
        [ed[torch.randperm(len(ed), generator=g)[:k]], po[torch.randperm(len(po), generator=g)[:k]]]
    )


def predict(agent, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        w = agent.position()
        return agent.posterior.forward(agent.posterior.split(w)[0], x).reshape(-1)


def spread(agent, buf, cfg, x_eat, x_rej, draws: int, gap: int) -> torch.Tensor:
    """``[draws, k]`` predicted eat - reject (reward units) from a copy of the chain run on."""
    a = copy.deepcopy(agent)
    g = torch.Generator().manual_seed(999)
    a.updates = gap  # chain agents take this many steps per update
    out = []
    for _ in range(draws):
        a.update(buf, g)
        out.append(predict(a, x_eat) - predict(a, x_rej))
    return torch.stack(out) / cfg["reward_scale"]


def _short(v) -> str:
    """A hyperparameter: a number, or an ARD vector as attributes' median / actions' value."""
    if isinstance(v, list):
        return f"[attr median {sorted(v[:-2])[len(v[:-2]) // 2]:.3g}, action {v[-1]:.3g}]"
    return f"{v:.3g}"


def grad_norms(agent, buf, cfg, gen: torch.Generator) -> str:
    """Norms of the three parts of a functional agent's gradient at its position, on one minibatch:
    the likelihood ``(n/M) sum grad log p``, the GP term ``-J_M^T K^-1 f_M`` and the weight term."""
    post = agent.posterior
    xb, yb = buf.sample(cfg["batch_size"], gen)
    w = agent.position().detach().requires_grad_(True)
    net = post.split(w)[0]
    n = buf.size
    ll = -0.5 * ((post.forward(net, xb).reshape(-1) - yb) ** 2).sum() / cfg["noise"] ** 2 * n / xb.shape[0]
    (g_lik,) = torch.autograd.grad(ll, w)
    xm = post.measurement.sample(xb, gen)
    f_m = post.forward(post.split(w)[0], xm.float()).reshape(-1, 1)
    alpha = post.gp.alpha(f_m.detach(), xm)
    (g_gp,) = torch.autograd.grad(-(alpha * f_m).sum(), w)
    g_w = -w.detach() / cfg["fsgld_weight_scale"] ** 2
    return (
        f" |g_lik| {float(g_lik.norm()):8.1f} |g_gp| {float(g_gp.norm()):7.1f} |g_w| {float(g_w.norm()):7.1f}"
    )


def refit(agent, buf, cfg, gen: torch.Generator, args) -> None:
    """Fit the GP prior's hyperparameters to the buffer by marginal likelihood (warm start)."""
    n = buf.size
    agent.posterior.gp.fit(
        buf.x[:n], buf.y[:n], num_steps=args.refit_steps, lr=0.05, max_points=args.refit_points,
        generator=gen, progress=False,
    )  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--method", default="fsgld")
    ap.add_argument("--p", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--every", type=int, default=250)
    ap.add_argument("--probe", type=int, default=100)
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--gap", type=int, default=2)
    ap.add_argument("--config", default="{}")
    ap.add_argument("--data", default="/work/shared/data")
    ap.add_argument("--quiet", action="store_true", help="only the final line")
    ap.add_argument("--grads", action="store_true", help="gradient parts of a functional agent")
    ap.add_argument("--refit-every", type=int, default=0, help="refit the GP every k interactions")
    ap.add_argument("--refit-points", type=int, default=256)
    ap.add_argument("--refit-steps", type=int, default=50)
    args = ap.parse_args()
    torch.set_num_threads(1)
    overrides = json.loads(args.config)
    for key in overrides:  # a retired option (B.RETIRED) would be silently ignored
        if key not in B.DEFAULTS:
            raise SystemExit(
                f"--config key {key!r} is not in the protocol; options retired from it run at 6fd8c02"
            )
    cfg = {**B.DEFAULTS, **overrides}
    contexts, edible = load_mushroom(args.data)
    idx, u = B.environment(contexts.shape[0], args.steps, args.seed)
    gen = make_generator(args.seed, 2 + B.METHODS.index(args.method))
    d = contexts.shape[1] + 2
    agent = make_agent(args.method, d, cfg, args.seed, one_hot_blocks(contexts))
    buf = ReplayBuffer(cfg["buffer"], d)
    pr = probe_set(edible, args.probe)
    k = args.probe
    both = action_inputs(contexts[pr])  # 2k rows with eat, then the same 2k with reject
    x_eat, x_rej = both[: 2 * k], both[2 * k :]
    eat_row, rej_row = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    actions = torch.empty(args.steps, dtype=torch.long)
    pois = rej = 0
    t0 = time.perf_counter()
    refit_gen = torch.Generator().manual_seed(777)
    for t in range(args.steps):
        if args.refit_every and t and t % args.refit_every == 0:
            refit(agent, buf, cfg, refit_gen, args)
        if buf.size:
            agent.update(buf, gen)
        i = int(idx[t])
        a = agent.act(contexts[i], gen)
        ed = bool(edible[i])
        r = (B.EDIBLE_REWARD if (ed or float(u[t]) >= args.p) else B.POISON_REWARD) if a == B.EAT else 0.0
        actions[t] = a
        pois += int(a == B.EAT and not ed)
        rej += int(a == B.REJECT and ed)
        buf.add(torch.cat([contexts[i], eat_row if a == B.EAT else rej_row]), r * cfg["reward_scale"])
        if (t + 1) % args.every == 0 and not args.quiet:
            line = f"t={t + 1:5d} pois {pois:3d} rej {rej:3d}"
            if hasattr(agent, "position"):
                f = spread(agent, buf, cfg, x_eat, x_rej, args.draws, args.gap)
                fe, fp = f[:, :k], f[:, k:]
                w = float(agent.position().norm())
                line += (
                    f" | sd_ed {float(fe.std(0).mean()):5.2f} sd_po {float(fp.std(0).mean()):5.2f}"
                    f" mu_ed {float(fe.mean()):6.2f} mu_po {float(fp.mean()):6.2f}"
                    f" Peat_ed {float((fe > 0).double().mean()):.2f} Peat_po {float((fp > 0).double().mean()):.3f}"
                    f" |w| {w:5.1f}"
                )
            if args.grads:
                line += grad_norms(agent, buf, cfg, torch.Generator().manual_seed(5))
            gp = getattr(agent.posterior, "gp", None)
            if gp is not None:
                line += " gp " + " ".join(f"{k_}={_short(v)}" for k_, v in gp.hyperparameters().items())
            print(line, flush=True)
            pois = rej = 0
    ed_all = edible[idx]
    cum = B.cumulative_regret(ed_all, actions, args.p)
    print(
        f"FINAL {args.method} p={args.p} seed {args.seed} steps {args.steps} cfg {args.config}: regret "
        f"{float(cum[-1]):.0f} (pois eaten {int(((actions == B.EAT) & ~ed_all).sum())}, edible rejected "
        f"{int(((actions == B.REJECT) & ed_all).sum())}) {time.perf_counter() - t0:.0f} s",
        flush=True,
    )


if __name__ == "__main__":
    main()
