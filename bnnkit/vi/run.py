"""Running a VI algorithm's kernel through the one driver (:func:`bnnkit.sample`).

The ``fit`` methods of the VI algorithms are this: the data as a :class:`bnnkit.data.Minibatches`
stream of the algorithm's ``batch_size``, the posterior at ``N`` = the data's rows, one chain
through the driver (its progress bar, ``output=`` streaming and checkpoints, bit-identical
resume), and the fitted state read back from ``samples.final_states``.
"""

from __future__ import annotations

from typing import Any

from ..core.driver import sample
from ..core.errors import BnnkitError, DivergenceError, resolve_batch_size
from ..core.posterior import Posterior
from ..data.minibatch import Minibatches
from .kernel import VIState, history_dict

HISTORY_BBB = ["elbo", "nll", "kl", "val_nll"]
HISTORY_FBNN = ["elbo", "nll", "kl_surrogate"]


class _WithValidation:
    """An algorithm whose kernel also tracks a validation NLL (``fit(validation=...)``)."""

    def __init__(self, algorithm: Any, validation: Any):
        self.algorithm, self.validation = algorithm, validation
        self.name = algorithm.name
        self.needs_model = True
        self.default_init = getattr(algorithm, "default_init", None)

    def config(self) -> dict:
        return {**self.algorithm.config(), "validation_rows": int(self.validation[0].shape[0])}

    def build(self, target: Any, model: Any = None):
        return self.algorithm.build(target, model, validation=self.validation)


def run_fit(
    algorithm: Any,
    posterior: Posterior,
    data: Any,
    seed: int,
    progress: bool,
    output: str | None,
    validation: Any,
    names: list[str],
    what: str,
) -> tuple[VIState, dict[str, list[float]]]:
    """Fit ``algorithm`` on ``data`` through the driver; the final state and the history.

    ``what`` names the objective in the error raised when it becomes non-finite."""
    inputs, targets = data
    n = int(inputs.shape[0])
    bs = resolve_batch_size(algorithm.batch_size, n)
    algo = algorithm if validation is None else _WithValidation(algorithm, validation)
    stream = Minibatches(inputs, targets, batch_size=bs)
    try:
        samples = sample(
            algo,
            posterior.with_num_data(n),
            stream,
            num_samples=1,
            seed=seed,
            progress=progress,
            output=output,
        )
    except DivergenceError as err:
        epoch = err.step // -(-n // bs) + 1
        raise BnnkitError(
            f"{what} became non-finite in epoch {epoch}; lower lr (e.g. by 10x), lower init_sigma, or "
            "check the data scale (standardise the targets)."
        ) from err
    state = samples.final_states[0]
    history = history_dict(state, names)
    return state, history


def _require_posterior(model: Any, name: str) -> Posterior:
    if not isinstance(model, Posterior):
        raise BnnkitError(
            f"{name} fits a variational posterior to a bnnkit.Posterior (its network, likelihood and prior); "
            f"got {type(model).__name__}. Run it with bnnkit.sample({name}(...), posterior, data) or "
            f"{name}(...).fit(posterior, data)."
        )
    return model


def _check_weights_only(posterior: Posterior, what: str) -> None:
    if posterior.initial_extras:
        raise BnnkitError(
            f"{what} covers the network weights only; this posterior also samples "
            f"{', '.join(posterior.initial_extras)}. Use a fixed noise (learn_noise=False) and a fixed prior scale."
        )
