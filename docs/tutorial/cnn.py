# %% [markdown]
# # Your own CNN, end to end
#
# This tutorial takes a small convolutional network, written as a plain `torch.nn.Module`, through
# the whole workflow of a Bayesian neural network in bnnkit:
#
# 1. **data**: small 8x8 images of three pattern classes, made here (nothing to download);
# 2. **model and prior**: the network as it is, a Gaussian prior on its weights, a categorical
#    likelihood on its logits;
# 3. **sampler**: scale-adapted SGHMC on minibatches, four chains run as one vectorised computation;
# 4. **diagnostics**: R-hat and effective sample size of the *predictions* (not of the weights),
#    and the log-density traces;
# 5. **predictive**: accuracy, NLL, calibration error and an out-of-distribution score, against a
#    single network trained to its MAP estimate;
# 6. **calibration plots**: a reliability diagram and the predictive entropy.
#
# It runs in well under a minute on a laptop CPU. The page you are reading was produced by running the
# script [`cnn.py`](cnn.py) when the documentation was built: every output and figure below is
# what that run printed and drew. Run it yourself with `python docs/tutorial/cnn.py` from the
# repository root (`BNNKIT_TUTORIAL_QUICK=1` makes it shorter still; that is what the test suite
# does).

# %%
import os
import time

import matplotlib

matplotlib.use("Agg")  # draw to files; remove this line in a notebook
import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import bnnkit
from bnnkit.data import Minibatches
from bnnkit.diagnostics import ess, rhat
from bnnkit.predict import (
    accuracy,
    brier_score,
    expected_calibration_error,
    network_outputs,
    ood_auroc,
    predict,
)

QUICK = os.environ.get("BNNKIT_TUTORIAL_QUICK") == "1"  # a shorter run, for the test suite
torch.manual_seed(0)

# %% [markdown]
# ## 1. Data: three kinds of noisy patterns
#
# Each image is 8x8 with one pattern on a noisy background: a horizontal bar (class 0), a vertical
# bar (class 1) or a diagonal (class 2), at a random position, of random brightness, sometimes
# faint enough that the class is hard to tell. The noise makes some images genuinely ambiguous, so a
# well-calibrated model should be unsure of them. A fourth set of images holds no pattern at all
# (blobs of noise): inputs from outside the training distribution, for the OOD score at the end.
#
# To use your own images instead, replace `make_images` by anything that returns a float tensor
# `[n, 1, H, W]` and integer labels `[n]` (for MNIST: `bnnkit.data.load_mnist(root=...)`).


# %%
def make_images(n: int, generator: torch.Generator, noise: float = 0.45) -> tuple[torch.Tensor, torch.Tensor]:
    labels = torch.randint(3, (n,), generator=generator)
    images = torch.zeros(n, 8, 8)
    pos = torch.randint(1, 7, (n,), generator=generator)
    shift = torch.randint(-2, 3, (n,), generator=generator)
    brightness = 0.4 + 0.8 * torch.rand(n, generator=generator)
    idx = torch.arange(8)
    for i in range(n):
        if labels[i] == 0:
            images[i, pos[i], :] = 1.0
        elif labels[i] == 1:
            images[i, :, pos[i]] = 1.0
        else:
            images[i, idx, (idx + shift[i]) % 8] = 1.0
        images[i] *= brightness[i]
    images = images + noise * torch.randn(n, 8, 8, generator=generator)
    return images.unsqueeze(1), labels


def make_ood(n: int, generator: torch.Generator) -> torch.Tensor:
    """Smooth random blobs: no bar, no diagonal."""
    coarse = torch.randn(n, 1, 3, 3, generator=generator)
    return 1.2 * F.interpolate(coarse, size=(8, 8), mode="bilinear", align_corners=False)


gen = torch.Generator().manual_seed(0)
n_train, n_test = (200, 300) if QUICK else (600, 600)
x_train, y_train = make_images(n_train, gen)
x_test, y_test = make_images(n_test, gen)
x_ood = make_ood(n_test // 2, gen)
print(f"train {tuple(x_train.shape)}, test {tuple(x_test.shape)}, OOD {tuple(x_ood.shape)}")
print("class counts (train):", torch.bincount(y_train).tolist())

fig, axes = plt.subplots(2, 6, figsize=(9, 3.2))
for k, ax in enumerate(axes.flat[:9]):
    ax.imshow(x_train[k, 0], cmap="gray")
    ax.set_title(f"class {int(y_train[k])}", fontsize=9)
for k, ax in enumerate(axes.flat[9:]):
    ax.imshow(x_ood[k, 0], cmap="gray")
    ax.set_title("OOD", fontsize=9)
for ax in axes.flat:
    ax.axis("off")
fig.tight_layout()


# %% [markdown]
# ## 2. The network, a prior and a likelihood
#
# The network is an ordinary module: two 3x3 convolutions with max-pooling and a linear read-out to
# three logits. Nothing about it is Bayesian; bnnkit calls it through a functional interface with
# the sampled weights substituted, and never modifies it.
#
# The posterior combines it with
#
# - a **likelihood**: `Categorical` on the logits (integer labels `0..C-1`);
# - a **prior**: an isotropic Gaussian `N(0, 0.5^2)` on every weight and bias (per-layer scales
#   would be `GaussianPrior(0.5, scales={"fc.": 0.3})`; a broader `N(0, 1)` prior works too but
#   its chains need more steps to agree);
# - `num_data=N`: the sampler sees minibatches of `M` rows, and each is scaled by `N / M` so that
#   its log-likelihood estimates the full data set's.


# %%
class SmallCNN(nn.Module):
    def __init__(self, num_classes: int = 3, width: int = 8):
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1)
        self.fc = nn.Linear(width * 2 * 2, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(torch.relu(self.conv1(x)), 2)  # 8x8 -> 4x4
        x = F.max_pool2d(torch.relu(self.conv2(x)), 2)  # 4x4 -> 2x2
        return self.fc(x.flatten(1))


net = SmallCNN()
posterior = bnnkit.Posterior(
    net,
    bnnkit.Categorical(),
    bnnkit.GaussianPrior(scale=0.5),
    num_data=len(x_train),
)
print(
    f"{sum(p.numel() for p in net.parameters())} parameters:",
    {name: tuple(p.shape) for name, p in net.named_parameters()},
)

# %% [markdown]
# ## 3. Sampling with scale-adapted SGHMC
#
# `AdaptiveSGHMC` (Springenberg et al. 2016) estimates a per-parameter mass from the squared
# minibatch gradients during warm-up and freezes it for sampling, so its step size carries over
# between problems with little tuning (the paper's default is `1e-2`; `3e-2` to `5e-2` mix faster
# on short runs; `1e-1` diverged in a trial run). Plain `SGHMC` would need its step size and friction tuned
# (see [Tuning SG-MCMC](../sgmcmc_tuning.md) and `bnnkit.tune`).
#
# `Minibatches` draws shuffled epochs from each chain's own generator. Four chains start from their
# own prior draws and run as **one vectorised computation** (`chain_method="vectorized"`: the
# network is evaluated for all chains at once through `torch.func.vmap`). Warm-up steps are
# discarded; every `thin`-th state after it is kept.

# %%
stream = Minibatches(x_train, y_train, batch_size=50)
num_warmup, num_samples, thin = (100, 25, 2) if QUICK else (500, 100, 10)
start = time.perf_counter()
samples = bnnkit.sample(
    bnnkit.AdaptiveSGHMC(step_size=5e-2, mdecay=0.05),
    posterior,
    stream,
    num_samples=num_samples,
    num_warmup=num_warmup,
    thin=thin,
    num_chains=4,
    chain_method="vectorized",
    seed=0,
    progress=False,
)
elapsed = time.perf_counter() - start
steps = 4 * (num_warmup + num_samples * thin)
print(f"{steps} chain-steps in {elapsed:.1f} s; kept draws per chain: {samples.num_draws}")
print("samples.params['conv1.weight'].shape =", tuple(samples.params["conv1.weight"].shape))

# %% [markdown]
# `samples` is a `bnnkit.Samples`: `params` holds each parameter tensor with two leading
# dimensions `[chain, draw]`, `positions` the flat vectors, and `stats` per-draw statistics such as
# the minibatch estimate of the log posterior. For long runs pass `output="runs/cnn"` to stream the
# draws to disk and make the run resumable.
#
# ## 4. Diagnostics
#
# Weight-space R-hat of a neural network does not converge even when the sampler works: the
# posterior is symmetric under permutations of the hidden units, so chains settle in different,
# equivalent modes. What should agree across chains is the **function**: the network's outputs
# at held-out inputs. `bnnkit.predict.network_outputs` evaluates every draw; reshaped to
# `[chain, draw, ...]` they go to `bnnkit.diagnostics.rhat` and `ess` (ArviZ's rank-normalised
# split R-hat and bulk ESS). `bnnkit.sample(..., stop_when=FunctionSpaceConvergence(...))` applies
# the same check while sampling and stops when it holds.

# %%
probe = x_test[:50]
logits = network_outputs(posterior, samples, probe)  # [chains * draws, 50, 3]
logits = logits - logits.mean(-1, keepdim=True)  # logits are defined up to a constant per input
per_chain = logits.reshape(samples.num_chains, samples.num_draws, *logits.shape[1:])
r = rhat(per_chain)
e = ess(per_chain)
print(f"function-space R-hat: median {np.median(r):.3f}, max {r.max():.3f}")
print(
    f"function-space bulk ESS (of {samples.num_chains * samples.num_draws} draws): "
    f"median {np.median(e):.0f}, min {e.min():.0f}"
)
w = samples.params["fc.weight"][..., 0, 0]  # one weight, [chain, draw]
print(f"for contrast, R-hat of the single weight fc.weight[0, 0]: {float(rhat(w)):.2f}")

log_density = samples.stats["log_density"]  # [chain, draw]
fig, ax = plt.subplots(figsize=(7, 2.8))
for c in range(samples.num_chains):
    ax.plot(log_density[c].numpy(), lw=1, label=f"chain {c}")
ax.set_xlabel("kept draw")
ax.set_ylabel("log posterior (minibatch estimate)")
ax.legend(fontsize=8, ncol=4)
fig.tight_layout()

# %% [markdown]
# A rank-normalised R-hat close to 1 (below about 1.1; Vehtari et al. 2021 suggest 1.01 for final
# results) says the chains predict alike; larger values mean the chains still disagree: run them
# longer, or start them closer (`init=bnnkit.core.warm_start.map_init(posterior, (x, y))` starts
# each chain from a short MAP phase). The log-density traces should look like stationary noise
# around a common level, with no chain drifting.
#
# The same draws export to ArviZ for its whole toolbox: `samples.to_arviz()` returns an
# `InferenceData` (`az.summary`, `az.plot_trace`, ...).
#
# ## 5. Predictive, against a single MAP network
#
# `bnnkit.predict.predict` averages the class probabilities over all draws of all chains. For
# comparison, the same network is trained to the maximum of the same posterior (the `N(0, 0.5^2)`
# prior acting as weight decay, the loss divided by `N`) with plain Adam: one network, one set of
# probabilities.

# %%
pred = predict(posterior, samples, x_test)

map_net = SmallCNN()
opt = torch.optim.Adam(map_net.parameters(), lr=1e-2)
for _ in range(100 if QUICK else 600):
    batch = torch.randint(len(x_train), (50,), generator=gen)
    nll = F.cross_entropy(map_net(x_train[batch]), y_train[batch])
    l2 = sum((p**2).sum() for p in map_net.parameters()) / (2 * 0.5**2 * len(x_train))  # the prior
    opt.zero_grad()
    (nll + l2).backward()
    opt.step()
with torch.no_grad():
    map_probs = map_net(x_test).softmax(-1)
    map_ood = map_net(x_ood).softmax(-1)


def entropy(p: torch.Tensor) -> torch.Tensor:
    return -(p * p.clamp_min(1e-12).log()).sum(-1)


pred_ood = predict(posterior, samples, x_ood)
rows = {"MAP network": (map_probs, map_ood), "AdaptiveSGHMC posterior": (pred.probs, pred_ood.probs)}
reliability, scores = {}, {}
for name, (p_in, p_out) in rows.items():
    ece, reliability[name] = expected_calibration_error(p_in, y_test, num_bins=10)
    scores[name] = {
        "accuracy": float(accuracy(p_in, y_test)),
        "NLL": float(-p_in.gather(1, y_test[:, None]).clamp_min(1e-12).log().mean()),
        "ECE": float(ece),
        "Brier": float(brier_score(p_in, y_test)),
        "OOD AUROC": float(ood_auroc(entropy(p_in), entropy(p_out))),
    }
print(f"{'':24s}" + "".join(f"{k:>10s}" for k in scores["MAP network"]))
for name, row in scores.items():
    print(f"{name:24s}" + "".join(f"{v:10.3f}" for v in row.values()))
higher_is_better = {"accuracy", "OOD AUROC"}
better = [
    k
    for k, v in scores["AdaptiveSGHMC posterior"].items()
    if (v > scores["MAP network"][k]) == (k in higher_is_better)
]
print("the posterior does better on:", ", ".join(better) or "none")
print(
    "the MAP network does better on:",
    ", ".join(k for k in scores["MAP network"] if k not in better) or "none",
)


# %% [markdown]
# Accuracy, NLL (lower is better) and the Brier score (lower is better) judge the predictions; the
# expected calibration error (ECE) compares confidence with accuracy; the OOD AUROC says how well
# the predictive entropy separates the blob images from test images (0.5: not at all, 1: perfectly).
# Averaging over the posterior usually helps most where a single network is at its worst: on
# inputs unlike the training data, and in the NLL, which punishes confident mistakes. ECE can go
# either way: an average over many networks can be somewhat *under*confident on in-distribution
# data, where a single network tends to be overconfident. The reliability diagram below shows which
# side each one errs on in this run.
#
# ## 6. Calibration plots
#
# A **reliability diagram** bins the test predictions by confidence (the largest class probability)
# and plots each bin's accuracy against its mean confidence: a calibrated model lies on the
# diagonal, an overconfident one below it. `expected_calibration_error` returns the per-bin data
# with the ECE. Next to it, the predictive entropy on test images and on the OOD images: a model
# that knows what it does not know gives the OOD images higher entropy.

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
ax1.plot([0, 1], [0, 1], "k:", lw=1, label="calibrated")
for name, rel in reliability.items():
    keep = torch.as_tensor(rel["count"]) > 0
    conf = torch.as_tensor(rel["confidence"])[keep]
    acc = torch.as_tensor(rel["accuracy"])[keep]
    ax1.plot(conf.numpy(), acc.numpy(), "o-", label=name)
ax1.set_xlabel("confidence")
ax1.set_ylabel("accuracy")
ax1.set_title("reliability diagram (test images)")
ax1.legend(fontsize=8)

bins = torch.linspace(0, float(torch.log(torch.tensor(3.0))), 21).numpy()
for (name, (p_in, p_out)), color in zip(rows.items(), ["C0", "C1"]):
    ax2.hist(
        entropy(p_in).numpy(), bins=bins, density=True, histtype="step", color=color, label=f"{name}, test"
    )
    ax2.hist(
        entropy(p_out).numpy(),
        bins=bins,
        density=True,
        histtype="step",
        color=color,
        ls="--",
        label=f"{name}, OOD",
    )
ax2.set_xlabel("predictive entropy (nats)")
ax2.set_title("entropy: test (solid) vs OOD (dashed)")
ax2.legend(fontsize=7)
fig.tight_layout()

# %% [markdown]
# ## Where to go from here
#
# - Other samplers on the same posterior: `bnnkit.SGHMC`, `bnnkit.SGLD`, the cyclical variants,
#   or full-batch `bnnkit.HMC` / `bnnkit.NUTS` for small networks; see the
#   [algorithm pages](../algorithms/index.md).
# - Variational baselines on the same posterior: `bnnkit.vi.BayesByBackprop`, `MCDropout`,
#   `DeepEnsemble`; their draws go through the same `predict`.
# - A Laplace approximation around the MAP: `bnnkit.Laplace` (see the
#   [API reference](../api/laplace.md)); its draws are a `Samples` too.
# - Sample only part of the network: `bnnkit.Posterior(..., bayesian=["fc."])` keeps the
#   convolutions fixed at their current values and samples the read-out layer.

# %%
# Run as a script (`python docs/tutorial/cnn.py`), the figures above are still open at this point:
# save them in the current directory. (On this page each figure was captured after its own cell.)
for num in plt.get_fignums():
    plt.figure(num).savefig(f"cnn_tutorial_fig{num}.png", dpi=90, bbox_inches="tight")
    print(f"wrote cnn_tutorial_fig{num}.png")
