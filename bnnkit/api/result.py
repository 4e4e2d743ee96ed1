"""What :func:`bnnkit.fit` returns: one result type for every method, with the predictive in the
user's units, metrics, diagnostics, ArviZ export, plots, and ``save`` / :func:`load`.

A saved fit holds tensors, numbers and strings only (read back with
``torch.load(weights_only=True)``: loading runs no code from the file), plus a fingerprint of the
module's architecture (parameter names and shapes, submodule types) that :func:`load` checks
against the re-created module.
"""

from __future__ import annotations

import json
import os
import warnings
from typing import Any

import torch
from torch import Tensor

from ..core.errors import BnnkitError
from ..core.posterior import Posterior
from ..core.samples import Samples
from ..data.coerce import as_tensor
from ..diagnostics import ConvergenceWarning
from ..diagnostics.arviz_utils import ess as ess_of
from ..diagnostics.arviz_utils import rhat as rhat_of
from ..priors import GaussianPrior
from .predictions import ClassificationPrediction, RegressionPrediction
from .scaling import Scaling

FORMAT = "bnnkit.fit/1"
RHAT_OK, ESS_OK = 1.1, 100.0


def fingerprint(module: torch.nn.Module) -> dict[str, Any]:
    """The architecture of ``module``: its parameter and buffer names and shapes, and the type of
    every submodule (so Tanh -> ReLU, with the same shapes, is told apart)."""
    return {
        "class": type(module).__name__,
        "parameters": [[n, list(p.shape)] for n, p in module.named_parameters()],
        "buffers": [[n, list(b.shape)] for n, b in module.named_buffers()],
        "modules": [[n, type(m).__name__] for n, m in module.named_modules()],
    }


def _fingerprint_difference(saved: dict[str, Any], now: dict[str, Any]) -> str | None:
    for key, what in (("parameters", "parameter"), ("buffers", "buffer"), ("modules", "submodule")):
        a = {k: json.dumps(v) for k, v in saved[key]}
        b = {k: json.dumps(v) for k, v in now[key]}
        if a != b:
            missing = sorted(set(a) - set(b))
            extra = sorted(set(b) - set(a))
            changed = sorted(k for k in set(a) & set(b) if a[k] != b[k])
            parts = []
            if missing:
                parts.append(f"the saved fit has {what}s {missing[:5]} that the module lacks")
            if extra:
                parts.append(f"the module has {what}s {extra[:5]} that the saved fit lacks")
            if changed:
                k = changed[0]
                parts.append(f"{what} {k!r} is {a[k]} in the saved fit but {b[k]} in the module")
            return "; ".join(parts)
    return None


class Fit:
    """A fitted posterior over a module's weights.

    Attributes:
        method: the method's name (``"default"``, ``"nuts"``, ``"laplace"``, ...).
        kind: ``"regression"``, ``"categorical"`` or ``"bernoulli"``.
        posterior: the :class:`~bnnkit.Posterior` on standardised data that was sampled or fitted.
        draws: its draws (:class:`~bnnkit.Samples`), or ``None`` for Laplace.
        laplace: the fitted :class:`~bnnkit.Laplace` (``method="laplace"``), else ``None``.
        scaling: the standardisation of inputs and targets done inside.
        diagnostics: function-space R-hat and ESS, the verdict line, what stopped the run and, for
            the default on a nearly noiseless regression target, ``advice`` (what was measured on
            such targets; :func:`bnnkit.api.recipe.noiseless_advice`), or on a classifier whose MAP
            phase outlasted its chains' best scores, what was measured of stopping it earlier
            (:func:`bnnkit.api.recipe.capped_map_advice`), which ``summary`` repeats.
        seconds: wall-clock time of the fit.
    """

    def __init__(
        self,
        method: str,
        kind: str,
        posterior: Posterior,
        draws: Samples | None,
        laplace: Any,
        scaling: Scaling,
        diagnostics: dict[str, Any],
        fingerprint: dict[str, Any],
        options: dict[str, Any],
        seconds: float = float("nan"),
    ):
        self.method, self.kind, self.posterior = method, kind, posterior
        self.draws, self.laplace, self.scaling = draws, laplace, scaling
        self.diagnostics, self.fingerprint, self.options = diagnostics, fingerprint, options
        self.seconds = seconds

    # ------------------------------------------------------------------ predictive
    def _inputs(self, x: Any) -> Tensor:
        """``x`` checked, standardised as the training inputs were (in float64, from the precision
        given), on the module's device and in its dtype."""
        t = as_tensor(x, "inputs")
        if not t.is_floating_point():
            t = t.to(torch.float64)
        width = None if self.scaling.x_mean is None else self.scaling.x_mean.numel()
        if t.ndim == 1 and width == 1:
            t = t.reshape(-1, 1)  # one feature given as a vector
        if width is not None and (t.ndim != 2 or t.shape[1] != width):
            raise BnnkitError(
                f"the posterior was fitted on inputs with {width} features (shape [N, {width}]); got shape "
                f"{tuple(t.shape)}."
            )
        if t.ndim > 0 and t.shape[0] > 0:
            bad = ~torch.isfinite(t.reshape(t.shape[0], -1)).all(1)
            if bool(bad.any()):
                rows = bad.nonzero().flatten()[:5].tolist()
                raise BnnkitError(
                    f"inputs hold NaN or infinite values in {int(bad.sum())} row(s), e.g. rows {rows}."
                )
        device = next(iter(self.posterior.module.parameters())).device
        return self.scaling.inputs(t.to(device)).to(self.posterior.view.dtype)

    def predict(self, x: Any, progress: bool = False) -> RegressionPrediction | ClassificationPrediction:
        """The posterior predictive at inputs ``x`` (tensor or array, in the units of the data the
        fit saw): mean, ``stddev``, ``interval(level)``, aleatoric / epistemic variance and
        ``log_prob(y)`` for regression; ``probs``, ``predicted_class()`` and ``entropy()`` for
        classification.  ``progress``: a progress bar over the draws."""
        from ..predict import predict

        xs = self._inputs(x)
        if self.laplace is not None:
            base = self.laplace.predict(xs)
        else:
            base = predict(self.posterior, self.draws, xs, progress=progress)
        if self.kind == "regression":
            return RegressionPrediction(base, self.scaling)
        return ClassificationPrediction(base)

    def sample_functions(self, x: Any, num: int = 1, generator: torch.Generator | None = None) -> Tensor:
        """The network's outputs at ``x`` under ``num`` posterior draws picked at random, ``[num, N, ...]``:
        in the targets' units for regression, the network's logits for classification.

        Draws are picked with replacement, by their importance weights where the method has them.
        A Laplace fit draws fresh weights ``theta`` from its Gaussian and gives the network
        linearised at the MAP, ``f(x; theta*) + J(x) (theta - theta*)``: the joint draws of the
        linearised (GLM) predictive that its ``predict`` summarises (the raw network at a weight
        draw is far wider).  One draw per decision, acting on its best output, is Thompson sampling.
        For fsgld / fsghmc these are the networks' functions: the prior's widening of their
        predictive (``widen=True``) is a variance that ``predict`` adds, not part of these draws.
        """
        if not (isinstance(num, int) and num >= 1):
            raise BnnkitError(f"num must be a positive integer, got {num!r}.")
        gen = generator if generator is not None else torch.Generator().manual_seed(0)
        xs = self._inputs(x)
        post = self.posterior
        if self.laplace is not None:
            f = self._linearised_draws(xs, num, gen)
            return self.scaling.outputs(f) if self.kind == "regression" else f
        assert self.draws is not None
        flat = self.draws.flat()
        lw = self.draws.log_weights
        if lw is None:
            idx = torch.randint(flat.shape[0], (num,), generator=gen)
        else:
            idx = torch.multinomial(lw.exp().float(), num, replacement=True, generator=gen)
        params = [post.split(flat[int(i)].to(xs.device))[0] for i in idx]
        with torch.no_grad():
            f = torch.stack([post.forward(p, xs) for p in params])
        return self.scaling.outputs(f) if self.kind == "regression" else f

    def _linearised_draws(self, xs: Tensor, num: int, gen: torch.Generator) -> Tensor:
        """``num`` draws of the Laplace fit's network linearised at its MAP, at ``xs`` (standardised)."""
        post, la = self.posterior, self.laplace
        at_map, draw = la.init(draw=False)(0, gen), la.init(draw=True)
        net_map = {n: at_map[n] for n in post.net_names}

        def f(params: dict[str, Tensor]) -> Tensor:
            return post.forward(params, xs)

        outs = []
        with torch.no_grad():
            for _ in range(num):
                theta = draw(0, gen)
                delta = {n: theta[n] - net_map[n] for n in post.net_names}
                value, jvp = torch.func.jvp(f, (net_map,), (delta,))
                outs.append(value + jvp)
        return torch.stack(outs)

    def evaluate(self, x: Any, y: Any) -> dict[str, float]:
        """Test metrics at ``(x, y)`` in the targets' units: RMSE, NLL, 95 % interval coverage and
        width (regression); accuracy, error, NLL, ECE and Brier score (classification)."""
        y = as_tensor(y, "targets")
        if y.shape[0] != (x.shape[0] if hasattr(x, "shape") else len(x)):
            raise BnnkitError(f"{len(y)} targets for {x.shape[0]} inputs; pass one target per input row.")
        return self.predict(x).metrics(y)

    # ------------------------------------------------------------------ diagnostics and export
    def to_arviz(self):
        """The draws as an ArviZ ``InferenceData`` (``az.summary``, ``az.plot_trace``, ...)."""
        if self.draws is None:
            raise BnnkitError("a Laplace fit has no draws; use fit.laplace.sample(n).to_arviz().")
        return self.draws.to_arviz()

    def summary(self) -> str:
        """One paragraph: method, data size, seconds, the convergence verdict and, where the
        measurements have something to say about this kind of data, that advice."""
        d = self.diagnostics
        out = f"{self.method} ({self.kind}, {self.posterior.num_data} rows, {self.seconds:.1f} s): {d['verdict']}"
        return out + (f" Note: {d['advice']}" if d.get("advice") else "")

    def __repr__(self) -> str:
        return f"Fit({self.summary()})"

    def plot_predictive(self, x: Any, y: Any = None, **kw: Any):
        from .plots import predictive_plot

        return predictive_plot(self, x, y, **kw)

    def plot_reliability(self, x: Any, y: Any, **kw: Any):
        from .plots import reliability_plot

        return reliability_plot(self, x, y, **kw)

    def plot_entropy(self, x_in: Any, x_out: Any, **kw: Any):
        from .plots import entropy_plot

        return entropy_plot(self, x_in, x_out, **kw)

    def plot_rhat(self, **kw: Any):
        from .plots import rhat_plot

        return rhat_plot(self, **kw)

    # ------------------------------------------------------------------ save / load
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to predict, as tensors, numbers and strings (PyTorch's convention:
        ``torch.save(fit.state_dict(), path)``)."""
        meta = {
            "method": self.method,
            "kind": self.kind,
            "options": self.options,
            "fingerprint": self.fingerprint,
            "diagnostics": {k: v for k, v in self.diagnostics.items() if k != "rhat_trace"},
            "seconds": self.seconds,
            "likelihood": _likelihood_meta(self.posterior),
            "num_data": self.posterior.num_data,
            "prior_scale": float(getattr(self.posterior.prior, "scale", 1.0)),
            "prior_scales": dict(getattr(self.posterior.prior, "scales", {})),
        }
        state: dict[str, Any] = {
            "format": FORMAT,
            "meta": json.dumps(meta),
            "scaling": self.scaling.state_dict(),
        }
        if self.draws is not None:
            state["positions"] = self.draws.positions.detach().cpu()
            if "log_weight" in self.draws.stats:  # importance weights
                state["log_weight"] = self.draws.stats["log_weight"].detach().cpu()
        if self.laplace is not None:
            state["laplace"] = self.laplace.state_dict()
        widening = getattr(self.posterior, "predictive_widening", None)
        if widening is not None:  # a functional prior's spread, added to the predictive
            state["widening"] = widening.state_dict()
        trace = self.diagnostics.get("rhat_trace")
        if trace is not None:
            state["rhat_trace"] = {k: torch.as_tensor(v) for k, v in trace.items()}
        return state

    def save(self, path: str | os.PathLike) -> None:
        """Write the fit to ``path`` (one file, written atomically); :func:`load` reads it back."""
        path = os.fspath(path)
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise BnnkitError(f"cannot save to {path!r}: the folder {parent!r} does not exist.")
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            torch.save(self.state_dict(), tmp)
            os.replace(tmp, path)
        except OSError as err:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise BnnkitError(f"could not write the fit to {path!r}: {err}.") from err


def _likelihood_meta(post: Posterior) -> dict[str, Any]:
    lik = post.likelihood
    meta: dict[str, Any] = {"name": type(lik).__name__}
    if hasattr(lik, "learn_noise"):
        meta.update(
            noise=float(lik.noise), learn_noise=bool(lik.learn_noise), precision_prior=lik.precision_prior
        )
    return meta


def load(path: str | os.PathLike, module: torch.nn.Module) -> Fit:
    """A fit saved by :meth:`Fit.save`, attached to ``module`` (re-created by the caller with the
    same architecture; its weights are not used).  A module whose parameter names, shapes or
    submodule types differ from the saved fit's is refused."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise BnnkitError(f"no saved fit at {path!r}.")
    try:
        state = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as err:  # noqa: BLE001 - any unreadable file gets the same message
        raise BnnkitError(f"{path!r} is not a readable bnnkit fit ({type(err).__name__}: {err}).") from err
    return from_state_dict(state, module, source=path)


def from_state_dict(state: dict[str, Any], module: torch.nn.Module, source: str = "the state") -> Fit:
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise BnnkitError(f"{source} is not a saved bnnkit fit (expected format {FORMAT!r}).")
    if not isinstance(module, torch.nn.Module):
        raise BnnkitError(f"load needs the re-created torch.nn.Module, got {type(module).__name__}.")
    meta = json.loads(state["meta"])
    diff = _fingerprint_difference(meta["fingerprint"], fingerprint(module))
    if diff is not None:
        raise BnnkitError(
            f"the module does not match the saved fit's architecture: {diff}. Re-create the module exactly "
            "as it was when the fit was made."
        )
    from .methods import likelihood_for

    lik = meta["likelihood"]
    net = module
    if meta["method"] == "mcdropout":
        from ..vi import MCDropout

        net = MCDropout.wrap(module, meta["options"].get("p", 0.05)).eval()
    noise = None if lik.get("learn_noise", True) else lik["noise"]
    prior = GaussianPrior(meta.get("prior_scale", 1.0), meta.get("prior_scales"))
    post = Posterior(net, likelihood_for(meta["kind"], noise), prior, num_data=meta["num_data"])
    device = next(iter(module.parameters())).device
    draws = la = None
    if "positions" in state:
        stats = {"log_weight": state["log_weight"]} if "log_weight" in state else {}
        draws = Samples(state["positions"].to(device), stats, post.view, {"method": meta["method"]})
    if "laplace" in state:
        from ..laplace import Laplace

        la = Laplace.from_state_dict(post, state["laplace"])
        post = la.posterior
    if "widening" in state:
        from ..functional.widening import PriorWidening

        post.predictive_widening = PriorWidening.from_state_dict(state["widening"])
    diagnostics = dict(meta["diagnostics"])
    if "rhat_trace" in state:
        diagnostics["rhat_trace"] = {k: v.tolist() for k, v in state["rhat_trace"].items()}
    return Fit(
        meta["method"],
        meta["kind"],
        post,
        draws,
        la,
        Scaling.from_state_dict(state["scaling"]),
        diagnostics,
        meta["fingerprint"],
        meta["options"],
        meta["seconds"],
    )


# ---------------------------------------------------------------------- diagnostics
def diagnose(method: str, chains: bool, posterior: Posterior, draws: Samples | None, check_x: Tensor) -> dict:
    """Function-space R-hat and ESS of the draws at ``check_x`` (network outputs, which unlike
    weights are comparable across chains), R-hat over the run, and a one-line verdict.  Markov
    chains that disagree (R-hat > 1.1), and draws that are few (ESS < 100: e.g. an ensemble's five
    members, independent by construction), raise a :class:`~bnnkit.diagnostics.ConvergenceWarning`."""
    if draws is None:
        return {
            "rhat": None,
            "ess": None,
            "verdict": "Gaussian (Laplace) approximation with the linearised predictive: no draws to diagnose.",
        }
    pos = draws.positions
    stop = (draws.config or {}).get("convergence", {}).get("stopped") or (draws.config or {}).get("stopped")
    if not chains:  # independent draws (VI, ensembles): nothing to compare, every draw counts
        n = int(pos.shape[0] * pos.shape[1])
        out = {"rhat": None, "ess": float(n), "draws": n}
        if n >= ESS_OK:
            out["verdict"] = (
                f"{n} independent draws ({method}): no chains to compare, ESS {n} by construction."
            )
        else:
            out["verdict"] = (
                f"{n} independent draws ({method}): ESS {n} (< {ESS_OK:.0f}) by construction; the predictive's "
                f"spread rests on {n} functions."
            )
            warnings.warn(f"bnnkit.fit({method}): {out['verdict']}", ConvergenceWarning, stacklevel=3)
        return out
    from ..diagnostics import FunctionSpaceConvergence

    rule = FunctionSpaceConvergence(posterior, check_x, min_draws=4)
    f = rule.outputs(pos.to(check_x.device))  # [K, S, P]
    k, s = f.shape[:2]
    if s < 4:
        r, e = float("nan"), float(k * s)
    else:
        r, e = float(rhat_of(f).max()), float(ess_of(f).min())
    trace = _rhat_trace(f) if s >= 8 else None
    out: dict[str, Any] = {"rhat": r, "ess": e, "chains": k, "draws_per_chain": s}
    if stop:
        out["stopped"] = stop if isinstance(stop, str) else stop.get("reason", str(stop))
    ok = r <= RHAT_OK and e >= ESS_OK
    what = f"function-space R-hat {r:.3f} ({'<=' if r <= RHAT_OK else '>'} {RHAT_OK}), ESS {e:.0f} ({'>=' if e >= ESS_OK else '<'} {ESS_OK:.0f}), {k} chains x {s} draws"
    if ok:
        out["verdict"] = f"converged: {what}."
    else:
        advice = []
        if r > RHAT_OK:
            advice.append(
                "the chains predict differently (they sit in different modes), so the predictive mixes them as an ensemble would"
            )
        if e < ESS_OK:
            advice.append(
                "few effectively independent draws: widen the budget (draws=, thin=) or run more chains"
            )
        out["verdict"] = f"not converged: {what}; " + "; ".join(advice) + "."
        warnings.warn(f"bnnkit.fit({method}): {out['verdict']}", ConvergenceWarning, stacklevel=3)
    if trace is not None:
        out["rhat_trace"] = trace
    return out


def _rhat_trace(f: Tensor, points: int = 12) -> dict[str, list[float]]:
    """Max function-space R-hat over the first ``n`` draws of every chain, at ``points`` values of n."""
    s = f.shape[1]
    ns = sorted({max(4, round(s * (i + 1) / points)) for i in range(points)})
    return {"draws": [float(n) for n in ns], "rhat": [float(rhat_of(f[:, :n]).max()) for n in ns]}
