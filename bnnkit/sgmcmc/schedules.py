"""Step-size schedules for stochastic-gradient samplers.

A schedule maps the step counter ``t = 0, 1, ...`` to a step size and says whether step ``t``
injects noise and yields a draw.  Plain schedules always sample; the cyclical schedule of
Zhang et al. (2020) spends the start of each cycle exploring (optimisation, no noise, no draws).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..core.errors import BnnkitError, check_int_at_least, check_positive


class _EveryStepSamples:
    """A plain schedule: every step injects noise and may yield a draw."""

    def sampling(self, t: int) -> bool:
        return True

    @property
    def sampling_fraction(self) -> float:
        return 1.0


@dataclass(frozen=True)
class Constant(_EveryStepSamples):
    """``eps_t = step_size``."""

    step_size: float

    def __post_init__(self) -> None:
        check_positive(
            "step_size", self.step_size, "Try 1e-4 for N-scaled BNN posteriors and tune with bnnkit.tune."
        )

    def __call__(self, t: int) -> float:
        return self.step_size

    def config(self) -> dict:
        return {"schedule": "constant", **asdict(self)}


@dataclass(frozen=True)
class PolynomialDecay(_EveryStepSamples):
    """``eps_t = a (b + t)^(-gamma)`` (Welling & Teh 2011); ``gamma`` in (0.5, 1] meets the
    Robbins-Monro conditions, 0.55 is the usual choice."""

    a: float
    b: float = 1.0
    gamma: float = 0.55

    def __post_init__(self) -> None:
        check_positive("a (initial scale of the step size)", self.a)
        check_positive("b (offset of the step-size decay)", self.b)
        if not 0.0 <= self.gamma <= 1.0:
            raise BnnkitError(f"gamma must lie in [0, 1] (0.55 is usual), got {self.gamma!r}.")

    def __call__(self, t: int) -> float:
        return self.a * (self.b + t) ** (-self.gamma)

    def config(self) -> dict:
        return {"schedule": "polynomial", **asdict(self)}


@dataclass(frozen=True)
class CosineCycle:
    """Cyclical cosine schedule (Zhang et al. 2020, cSG-MCMC).

    ``eps_t = step_size / 2 * (cos(pi * r_t) + 1)`` with ``r_t = (t mod L) / L`` for a cycle of
    ``L = cycle_length`` steps.  Steps with ``r_t < exploration`` explore (no injected noise, no
    draws); the rest of the cycle, where the step size is small, samples.
    """

    step_size: float
    cycle_length: int
    exploration: float = 0.8

    def __post_init__(self) -> None:
        check_positive("step_size (peak of the cycle)", self.step_size)
        check_int_at_least("cycle_length", self.cycle_length, 2)
        if not 0.0 <= self.exploration < 1.0:
            raise BnnkitError(
                f"exploration is the fraction of each cycle spent without noise and must lie in [0, 1), "
                f"got {self.exploration!r}."
            )

    def _r(self, t: int) -> float:
        return (t % self.cycle_length) / self.cycle_length

    def __call__(self, t: int) -> float:
        return 0.5 * self.step_size * (math.cos(math.pi * self._r(t)) + 1.0)

    def sampling(self, t: int) -> bool:
        return self._r(t) >= self.exploration

    @property
    def sampling_fraction(self) -> float:
        steps = sum(self.sampling(t) for t in range(self.cycle_length))
        return steps / self.cycle_length

    def config(self) -> dict:
        return {"schedule": "cosine_cycle", **asdict(self)}


Schedule = Constant | PolynomialDecay | CosineCycle


def as_schedule(step_size: float | Schedule) -> Schedule:
    """A float becomes a constant schedule; schedules pass through."""
    if isinstance(step_size, (Constant, PolynomialDecay, CosineCycle)):
        return step_size
    if isinstance(step_size, (int, float)) and not isinstance(step_size, bool):
        return Constant(float(step_size))
    raise BnnkitError(
        f"step_size must be a positive number or a schedule (Constant, PolynomialDecay, CosineCycle), "
        f"got {step_size!r}."
    )
