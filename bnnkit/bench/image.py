"""Image classification with OOD detection (functional SG-MCMC paper 5.3; docs/fsgmcmc_design.md 9.3).

:func:`run_image` trains each method on MNIST (or Fashion-MNIST) with a small CPU CNN
(``model="cnn"``) or the paper's ResNet-18 and reports the test error, NLL, ECE (15 bins) and the
OOD AUROC of the predictive entropy against the other data set's test images, with reliability
diagrams.  Methods (:data:`METHODS`): ``default`` (``bnnkit.fit(net, (x, y))``, its own budget),
SG-MCMC, functional SG-MCMC with an RBF GP prior on the logits fitted to the training images, and
the VI, MC dropout, last-layer Laplace and ensemble baselines, all in the same budget (``burn_in``
steps, then ``draws`` draws thinned by ``thin``; the baselines as many epochs), chains starting
from PyTorch's initialisation.  Settings: :data:`DEFAULTS`; why: ``docs/image_protocol.md``.

Data sets: ``"mnist"`` (OOD: Fashion-MNIST), ``"fmnist"`` (OOD: MNIST; needs ``download=True``)
and ``"fmnist-partial"``, the offline stand-in: trained on the Fashion-MNIST test images present
but the last 1000, tested on those (its errors are not comparable with published numbers).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..api.recipe import SamplerRecipe
from ..core.errors import BnnkitError, check_device
from ..core.files import append_record, output_folder, pyplot, reopen_records, save_figure, write_report_files
from ..core.posterior import Posterior
from ..core.random import global_rng_seeded
from ..data.minibatch import Minibatches
from ..data.mnist import load_image_task
from ..likelihoods import Categorical
from ..nets import resnet18, small_cnn
from ..predict import expected_calibration_error, ood_auroc, predictive_entropy
from ..priors import GaussianPrior
from .divergence import sample_or_diverged
from .methods import FSG, GP_PRIOR, MOMENTUM, SG, canonical_methods, sg_algorithm
from .uci import predictive as _weight_predictive

METHODS = (
    "default",
    "sghmc",
    "sgld",
    "asghmc",
    "fsghmc",
    "fsgld",
    "bbb",
    "fbnn",
    "mcdropout",
    "ensemble",
    "laplace",
)
MODELS = ("cnn", "resnet18")
DEFAULTS = {
    "default_recipe": None,  # the default row's recipe: None is bnnkit.api.DEFAULT_RECIPE (its own budget)
    "batch_size": 125,
    "burn_in": 2400,  # 5 epochs of MNIST at batch 125
    "draws": 10,
    "thin": 100,
    # fsghmc: plain SGHMC's 3e-4 (~4% error in 450 steps from PyTorch's init); sgld / fsgld: the
    # largest step, by held-out NLL, that does not diverge on full MNIST (docs/image_protocol.md).
    # sghmc runs asghmc's settings below.
    "step_size": {"sgld": 6e-6, "fsgld": 6e-6, "fsghmc": 3e-4},
    "friction": 10.0,
    # Scale-adapted SGHMC: eps 1e-2 is the algorithm's default (each coordinate moves ~eps^2 per
    # step under the drift, whatever N); a longer run than SGHMC's, still inside the ensemble's
    # CPU time (5 members x 7 epochs).
    "asghmc": {"step_size": 1e-2, "burn_in": 6000, "draws": 40, "thin": 100},
    "bbb_lr": 1e-3,
    # Not tuned.  Epochs as bbb's unless given; an FBNN step costs function_samples x (batch +
    # measurement) network passes (~0.9 s on one core), so it gets 960 steps (2 epochs of MNIST,
    # ~15 min); an ensemble step costs one pass per member.
    "fbnn": {"lr": 1e-3, "function_samples": 10, "measurement": 40, "steps": 960},
    "mcdropout": {"p": 0.1, "lr": 1e-3},
    "ensemble": {"members": 5, "lr": 1e-3},
    "laplace": {"lr": 1e-3, "structure": "kron"},
    "train_rows": None,
    "test_rows": None,
    "ood_rows": None,
    "gp_rows": 1000,
    "gp_steps": 100,
    # the functional methods' GP prior: Laplace evidence of the softmax GP on gp_class_rows of the
    # gp_rows images (exact GP regression on one-hot targets held the logits near 0: image_results.md)
    "gp_class_rows": 500,
}
QUICK = {
    "default_recipe": dict(chains=2, map_max_steps=60, burn_in=30, draws=4, thin=5, check_every=4),
    "burn_in": 60,
    "draws": 4,
    "thin": 5,
    "train_rows": 600,
    "test_rows": 300,
    "ood_rows": 200,
    "gp_rows": 200,
    "gp_steps": 10,
    "gp_class_rows": 100,
    "fbnn": {"lr": 1e-3, "function_samples": 4, "measurement": 10, "steps": 5},
    "asghmc": {"step_size": 1e-2, "burn_in": 60, "draws": 4, "thin": 5},
    "mcdropout": {"p": 0.1, "lr": 1e-3, "epochs": 5},
    "ensemble": {"members": 2, "lr": 1e-3, "epochs": 3},
}


def build_net(model: str, dropout: float | None = None, width: int | None = None) -> torch.nn.Module:
    """The network of the image benchmark: ``"cnn"`` (:func:`small_cnn`) or ``"resnet18"``."""
    if model == "cnn":
        if width is not None:
            raise BnnkitError("width= scales ResNet-18's channels; the small CNN has a fixed width.")
        return small_cnn(dropout)
    if model == "resnet18":
        return resnet18(10, in_channels=1, width=64 if width is None else width, dropout=dropout)
    raise BnnkitError(f"model must be one of {', '.join(MODELS)}, got {model!r}.")


def fit_gp(x: torch.Tensor, y: torch.Tensor, cfg: dict, seed: int):
    """The functional methods' RBF GP prior on the 10 logits: the Laplace evidence of the softmax
    GP classifier on ``gp_class_rows`` of ``gp_rows`` training images drawn with ``seed``."""
    from ..functional import GPPrior, fit_classification_gp

    g = torch.Generator().manual_seed(seed)
    idx = torch.randperm(x.shape[0], generator=g)[: cfg["gp_rows"]]
    flat = x[idx].reshape(len(idx), -1)
    gp = GPPrior("rbf", input_dim=flat.shape[1], ard=False, jitter=1e-4)
    fitted = fit_classification_gp(gp, flat, y[idx], 10, max_points=cfg["gp_class_rows"], generator=g)
    return gp, {k: v for k, v in fitted.items() if k != "grid"}


def method_draws(method, x, y, cfg, seed, progress, gp, model="cnn", width=None):
    """``method``'s posterior and its draws (a Laplace fit or MC dropout's networks in their stead)."""
    n = x.shape[0]
    # The initial weights: the global RNG seeded with ``seed`` in a fork (the caller's random state
    # is left alone), made on the CPU and moved to the data's device (the same start on every device).
    with global_rng_seeded(seed):
        net = build_net(model, width=width).to(x.device)
        dropout_net = (
            build_net(model, cfg["mcdropout"]["p"], width).to(x.device) if method == "mcdropout" else None
        )
    if method == "default":  # what a user gets from bnnkit.fit(net, (x, y)): the default recipe
        from ..api import fit

        short = cfg.get("default_recipe")  # quick mode's short recipe; None: the default one
        recipe = None if short is None else SamplerRecipe(**short)
        result = fit(net, (x, y), method="default", seed=seed, progress=progress, recipe=recipe)
        return result.posterior, result.draws
    stream = Minibatches(x, y, batch_size=min(cfg["batch_size"], n))
    # Chains start from PyTorch's initialisation: a draw from the N(0, 1) prior puts a ReLU CNN in a
    # saturated regime the chain does not leave within the budget (91% error after 450 steps).
    kw = dict(
        num_samples=cfg["draws"],
        num_warmup=cfg["burn_in"],
        thin=cfg["thin"],
        seed=seed,
        progress=progress,
        init="module",
    )
    if method in FSG:  # fSGHMC / fSGLD with the fitted GP prior on the logits at 40 training images
        from ..functional import FunctionalPosterior, MeasurementPoints

        post = FunctionalPosterior(
            net, Categorical(), gp, MeasurementPoints(num_from_data=40, num_uniform=0), x
        )
        return post, sample_or_diverged(_sg_algorithm(method, cfg), post, stream, **kw)
    post = Posterior(net, Categorical(), GaussianPrior(1.0), num_data=n)
    # sghmc is scale-adapted SGHMC (asghmc's settings): on MNIST more accurate and better
    # calibrated than plain SGHMC at the fixed step (docs/image_protocol.md)
    if method in ("sghmc", "asghmc"):
        from ..sgmcmc import AdaptiveSGHMC

        c = cfg["asghmc"]
        kw = kw | {"num_samples": c["draws"], "num_warmup": c["burn_in"], "thin": c["thin"]}
        return post, sample_or_diverged(AdaptiveSGHMC(c["step_size"]), post, stream, **kw)
    if method in SG:
        return post, sample_or_diverged(_sg_algorithm(method, cfg), post, stream, **kw)
    return _baseline_draws(method, post, net, dropout_net, x, y, cfg, seed, progress, gp)


def _baseline_draws(method, post, net, dropout_net, x, y, cfg, seed, progress, gp):
    """The baselines (VI, MC dropout, Laplace, ensemble) in the SG-MCMC budget's epochs."""
    from ..functional import FunctionalPosterior, MeasurementPoints
    from ..vi import FBNN, BayesByBackprop, DeepEnsemble, MCDropout

    n = x.shape[0]
    steps = cfg["burn_in"] + cfg["draws"] * cfg["thin"]

    def epochs_of(num_steps: int) -> int:  # whole epochs closest to num_steps minibatches
        return max(1, round(num_steps * cfg["batch_size"] / n))

    epochs = epochs_of(steps)  # the VI baselines' budget
    num_draws = max(cfg["draws"], 10)
    if method == "bbb":
        fit = BayesByBackprop(
            lr=cfg["bbb_lr"], num_epochs=epochs, batch_size=cfg["batch_size"], estimator="local"
        )
        return post, fit.fit(post, (x, y), seed=seed, progress=progress).sample(num_draws, seed=seed)
    if method == "fbnn":
        c = cfg["fbnn"]
        # FBNN puts the measurement rows (flat pixels, as the GP sees them) and the minibatch into
        # one network call, so it is given flat pixels and a network that reshapes any rows
        # (flat or images, as the test set's) to images
        flat = x.reshape(n, -1)
        meas = MeasurementPoints(num_from_data=c["measurement"], num_uniform=0)
        module = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Unflatten(1, tuple(x.shape[1:])), net)
        post = FunctionalPosterior(module, Categorical(), gp, meas, flat)
        fit = FBNN(
            lr=c["lr"],
            num_epochs=epochs_of(c["steps"]),
            batch_size=cfg["batch_size"],
            num_function_samples=c["function_samples"],
            include_batch=False,
        )
        return post, fit.fit(post, (flat, y), seed=seed, progress=progress).sample(num_draws, seed=seed)
    if method == "mcdropout":
        c = cfg["mcdropout"]
        # eval(): the Posterior is a fixed function of the weights; MCDropout draws its own masks
        post = Posterior(dropout_net.eval(), Categorical(), GaussianPrior(1.0), num_data=n)
        fit = MCDropout(
            p=c["p"], lr=c["lr"], num_epochs=c.get("epochs", epochs), batch_size=cfg["batch_size"]
        )
        return post, _DropoutNetworks(fit.fit(post, (x, y), seed=seed, progress=progress), num_draws, seed)
    if method == "laplace":
        from ..laplace import Laplace

        c = cfg["laplace"]
        # the table uses the GLM predictive, so no weights are drawn
        la = Laplace(post, subset="last_layer", structure=c["structure"]).fit(
            (x, y),
            steps=epochs * -(-n // cfg["batch_size"]),
            lr=c["lr"],
            batch_size=min(cfg["batch_size"], n),
            seed=seed,
        )
        la.optimize_marglik()
        return la.posterior, la  # the posterior with the tuned noise and prior
    if method == "ensemble":
        c = cfg["ensemble"]
        fit = DeepEnsemble(
            num_members=c["members"],
            lr=c["lr"],
            num_epochs=c.get("epochs", epochs),
            batch_size=cfg["batch_size"],
        )
        return post, fit.fit(post, (x, y), seed=seed, progress=progress)
    raise BnnkitError(f"unknown method {method!r}; choose from {', '.join(METHODS)}.")


@dataclass(frozen=True)
class _DropoutNetworks:
    """``num`` MC-dropout networks of a trained :class:`~bnnkit.vi.MCDropoutResult`, masks from ``seed``.

    The CPU CNN drops single activations of the feature maps a convolution reads; such a mask is
    not a mask on the convolution's weights, so these networks cannot be weight draws
    (``MCDropoutResult.sample`` refuses them) and go through ``MCDropoutResult.predict``: the same
    mixture predictive, the same networks at every call.
    """

    result: Any
    num: int
    seed: int


def predictive(post: Any, draws: Any, inputs: torch.Tensor, progress: bool = False) -> Any:
    """The predictive at ``inputs`` of weight draws, or of :class:`_DropoutNetworks`."""
    if isinstance(draws, _DropoutNetworks):
        return draws.result.predict(inputs, num_samples=draws.num, seed=draws.seed)
    return _weight_predictive(post, draws, inputs, progress)


def _sg_algorithm(method: str, cfg: dict) -> Any:
    """The SG-MCMC algorithm of ``method`` at its step ``cfg["step_size"][method]``."""
    kind, eps = sg_algorithm(method), cfg["step_size"][method]
    return kind(eps, friction=cfg["friction"]) if method in MOMENTUM else kind(eps)


ROWS_FILE = "image_rows.jsonl"  # one line per finished method, appended as it finishes
ROW_KEYS = ("method", "test_error_pct", "nll", "ece", "ood_auroc", "seconds")
FUNCTIONAL = tuple(m for m in METHODS if m in GP_PRIOR)  # the methods with the fitted GP prior


def run_image(
    dataset: str = "mnist",
    methods: tuple[str, ...] = METHODS,
    out: str | Path = "bnnkit-out/image",
    root: str | None = None,
    download: bool = False,
    quick: bool = False,
    seed: int = 0,
    progress: bool = True,
    log: Any = print,
    model: str = "cnn",
    width: int | None = None,
    resume: bool = False,
    device: str = "cpu",
) -> dict[str, Any]:
    """Run ``methods`` on ``dataset``; write ``image.md/csv/json`` and reliability diagrams.

    ``model``: ``"cnn"`` or ``"resnet18"`` (``width`` scales its channels; default 64).  Each
    method's row is appended to ``out/image_rows.jsonl`` as it finishes; ``resume`` reuses the rows
    there of the same data set, network, seed, mode, protocol and ``device`` (where the data, the
    networks and the chains live) and runs only the other methods.
    """
    methods = tuple(canonical_methods(methods, METHODS))
    check_device(device)
    with global_rng_seeded(seed):  # construction draws from the global RNG: a fork, left as it was
        build_net(model, width=width)  # a bad model or width fails before any data is read
    cfg = {**DEFAULTS, **(QUICK if quick else {})}
    out = output_folder(out, (ROWS_FILE, "image_rows.previous.jsonl", "image.json"), "bnnkit bench image")
    # what a row's numbers depend on besides its method; JSON round trip as the record file gives it
    settings = json.loads(
        json.dumps(dict(dataset=dataset, model=model, width=width, seed=seed, quick=quick, protocol=cfg))
    )
    if device != "cpu":  # CPU rows written before the option existed keep matching
        settings["device"] = device
    records = out / ROWS_FILE
    done = _reused_rows(records, resume, settings, methods, log)
    cuts = {k: cfg[k] for k in ("train_rows", "test_rows", "ood_rows")}
    x, y, x_te, y_te, x_ood, ood_name = load_image_task(dataset, root, download, **cuts)
    x, y, x_te, y_te, x_ood = (t.to(device) for t in (x, y, x_te, y_te, x_ood))
    gp, fitted = _gp_prior(methods, done, x, y, cfg, seed, log)
    rows, reliab = [], {}
    for m in methods:
        if m in done:
            rows.append({k: done[m][k] for k in ROW_KEYS})
            reliab[m] = {k: torch.tensor(v, dtype=torch.float64) for k, v in done[m]["reliability"].items()}
            continue
        t0 = time.perf_counter()
        post, s = method_draws(m, x, y, cfg, seed, progress, gp, model, width)
        seconds = time.perf_counter() - t0
        row, reliab[m] = _evaluate(m, post, s, x_te, y_te, x_ood, seconds, progress)
        rows.append(row)
        rel, prior = {k: v.tolist() for k, v in reliab[m].items()}, fitted if m in FUNCTIONAL else None
        conv = s.config.get("convergence") if m == "default" else None  # the default's R-hat, ESS, ...
        extra = {"reliability": rel, "gp_prior": prior, "convergence": conv}
        append_record(records, {**row, **extra, "settings": settings})
        log(
            f"{dataset} {m:9s} error {row['test_error_pct']:.2f}% NLL {row['nll']:.3f} ECE {row['ece']:.3f} "
            f"AUROC({dataset}->{ood_name}) {row['ood_auroc']:.3f} {seconds:.0f} s"
        )
    reused = [m for m in methods if m in done]
    report = {
        "benchmark": "image_ood",
        "dataset": dataset,
        "model": model,
        "width": width,
        "ood": ood_name,
        "command": _command_line(dataset, methods, model, width, quick, device),
        "seed": seed,
        "quick": quick,
        "device": device,
        "protocol": cfg,
        "gp_prior": fitted,
        "rows": rows,
        "rows_reused": reused,
        "sizes": {"train": x.shape[0], "test": x_te.shape[0], "ood": x_ood.shape[0]},
    }
    write_report_files(out, "image", report, rows, _markdown(report, reused))
    _reliability_plot(out / "reliability.png", reliab, dataset)
    return report


def _command_line(
    dataset: str, methods: tuple[str, ...], model: str, width: int | None, quick: bool, device: str = "cpu"
) -> str:
    return (
        f"bnnkit bench image --dataset {dataset} --methods {','.join(methods)}"
        + ("" if model == "cnn" else f" --model {model}")
        + ("" if width is None else f" --width {width}")
        + (" --quick" if quick else "")
        + ("" if device == "cpu" else f" --device {device}")
    )


def _gp_prior(methods: tuple[str, ...], done: dict, x, y, cfg: dict, seed: int, log: Any) -> tuple[Any, Any]:
    """The functional methods' fitted GP prior and its fit (only the fit, from the reused rows,
    when no functional method runs)."""
    if any(m in FUNCTIONAL and m not in done for m in methods):
        t0 = time.perf_counter()
        gp, fitted = fit_gp(x, y, cfg, seed)
        log(f"GP prior fitted in {time.perf_counter() - t0:.0f} s: {fitted}")
        return gp, fitted
    # every functional row is reused: report the prior they were run with
    return None, next((r["gp_prior"] for r in done.values() if r.get("gp_prior")), None)


def _reused_rows(records: Path, resume: bool, settings: dict, methods: tuple[str, ...], log: Any) -> dict:
    """The rows in ``records`` that a resumed run reuses (same settings, a requested method), by
    method; without ``resume`` none, and ``records`` starts afresh."""
    kept = reopen_records(records, resume, log)
    done = {r["method"]: r for r in kept if r.get("settings") == settings and r.get("method") in methods}
    if done:
        log(f"{records}: reused {', '.join(m for m in methods if m in done)}")
    return done


def _evaluate(
    method, post, draws, x_te, y_te, x_ood, seconds: float, progress: bool = False
) -> tuple[dict[str, Any], dict]:
    """``method``'s row (test error, NLL, ECE, OOD AUROC by predictive entropy) and its reliability
    diagram's bins."""
    pin, pout = predictive(post, draws, x_te, progress), predictive(post, draws, x_ood, progress)
    ece, rel = expected_calibration_error(pin.probs, y_te)
    row = {
        "method": method,
        "test_error_pct": 100 * float((pin.probs.argmax(-1) != y_te).double().mean()),
        "nll": pin.nll(y_te),
        "ece": ece,
        "ood_auroc": ood_auroc(predictive_entropy(pin.probs), predictive_entropy(pout.probs)),
        "seconds": seconds,
    }
    return row, {k: v.cpu() for k, v in rel.items()}


def _markdown(report: dict[str, Any], reused: list[str]) -> str:
    """``image.md``: the table of the report's rows, with its command and data sizes."""
    dataset, ood_name, model, width = report["dataset"], report["ood"], report["model"], report["width"]
    net_name = (
        "Small CNN, not the paper's ResNet-18"
        if model == "cnn"
        else ("ResNet-18 (GroupNorm)" + ("" if width in (None, 64) else f", width {width}"))
    )
    sizes = report["sizes"]
    md = [
        f"# Image classification and OOD ({'quick mode: a smoke test, not results' if report['quick'] else 'full protocol'})",
        "",
        f"Command: `{report['command']}` (seed {report['seed']}). {net_name}; {sizes['train']} training and "
        f"{sizes['test']} test images; OOD set: {ood_name} test images ({sizes['ood']}); "
        f"device: {report.get('device', 'cpu')}.",
        "",
        f"| method | test error (%) | NLL | ECE | OOD AUROC ({dataset} -> {ood_name}) | seconds |",
        "|---|---|---|---|---|---|",
    ]
    md += [
        f"| {r['method']} | {r['test_error_pct']:.2f} | {r['nll']:.3f} | {r['ece']:.3f} | {r['ood_auroc']:.3f} | "
        f"{r['seconds']:.0f} |"
        for r in report["rows"]
    ]
    if reused:
        md += [
            "",
            f"Rows of {', '.join(reused)} reused from `{ROWS_FILE}` (`--resume`): "
            "the same data set, network, seed and protocol; their seconds are those of the run that made them.",
        ]
    return "\n".join(md) + "\n"


def _reliability_plot(path: Path, reliab: dict, dataset: str) -> None:
    from ..api.plots import draw_reliability

    fig, axes = pyplot().subplots(1, len(reliab), figsize=(3.2 * len(reliab), 3.4), squeeze=False)
    for ax, (m, r) in zip(axes[0], reliab.items()):
        draw_reliability(ax, r, m)
    axes[0][0].set_ylabel(f"accuracy ({dataset} test)")
    axes[0][0].legend(fontsize=7, loc="upper left")
    save_figure(fig, path, 100)
