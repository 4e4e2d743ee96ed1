"""The UCI regression protocol: one frozen config.

Every cell is :func:`bnnkit.fit` with the method's defaults (:data:`bnnkit.api.methods.METHODS`) on
one split's rows, standardised with the training statistics (``standardize=False``: they are
already); the network is ``d -> 100 -> 100 -> 1`` with tanh (:func:`bnnkit.nets.mlp`),
built in a generator forked from seed ``seed + split``.  The fitted baselines (laplace, mcdropout,
ensemble, bbb) take as their fixed noise (laplace: its start) the one fit's own GP would give, an
RBF GP fitted by marginal likelihood to at most 1,000 training rows: the bench fits it once per
split, with fit's settings, and passes it as ``noise=``.  ``--quick`` is :data:`QUICK`, a smoke
test of the pipeline (tiny network, short runs, 200 training rows), not results.  Earlier
protocols' tables rebuild at the commits that made them (docs/archive/uci_results_protocols_2_11.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from ...api.methods import METHODS
from ...api.recipe import DEFAULT_RECIPE, SamplerRecipe, noise_drifted

# Written into every cell (key "protocol"); --resume and --from-cells take only cells of it (or CARRIED).
PROTOCOL = (
    16  # 16: the default samples again with the GP's noise held where its sampled noise drifted (CHANGELOG)
)
_BASELINES = frozenset({"ensemble", "mcdropout", "laplace", "bbb"})
# the methods whose cells an older protocol wrote exactly as this one writes them (same code, same
# numbers), so --resume and --from-cells take them: protocol version -> methods
# (13: NUTS and HMC, which run no MAP phase, too; 14: also fsgld and fsghmc, which keep their
# sampled noise under 15's noise rule).  No default or sghmc cell of 14 is carried: it does not
# record the MAP phase's held-out error that decides whether 15 holds its noise.  A default or
# sghmc cell of 15 is carried where 16's drift rule cannot have applied (drift_cannot_apply)
_NO_RECIPE = frozenset({"nuts", "hmc", "fsgld", "fsghmc"})  # samplers whose noise no recipe rule holds
CARRIED: Mapping[int, frozenset[str]] = MappingProxyType(
    {
        10: _BASELINES,
        12: _BASELINES,
        13: _BASELINES | {"nuts", "hmc"},
        14: _BASELINES | _NO_RECIPE,
        15: _BASELINES | _NO_RECIPE,
    }
)
_RECIPE_METHODS = frozenset({"default", "sghmc"})  # the methods that run bnnkit.api.recipe.run_recipe
DEFAULT_METHODS = ("default", "ensemble", "mcdropout", "laplace", "bbb")


@dataclass(frozen=True)
class UCIProtocol:
    """What a cell depends on beyond bnnkit.fit's defaults."""

    hidden: int = 100  # units in each of the two hidden layers
    batch_size: int = 32  # fit's default
    gp_fit_steps: int = 300  # the split's GP fit, as fit's own (bnnkit.api.gp_fit.fitted_gp)
    gp_fit_max_points: int = 1000
    max_rows: int | None = None  # the first max_rows training rows only (quick)
    recipe: SamplerRecipe = DEFAULT_RECIPE  # default, sghmc, fsgld, fsghmc
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: MappingProxyType({}))

    def fit_options(self, method: str) -> dict[str, Any]:
        """Keywords of the method's :func:`bnnkit.fit` call beyond its data, seed and noise."""
        return {"batch_size": self.batch_size, "recipe": self.recipe, **self.options.get(method, {})}

    def config(self) -> dict[str, Any]:
        """The protocol as plain data (``uci.json``)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out.update(recipe=self.recipe.config(), options={m: dict(o) for m, o in self.options.items()})
        return {"version": PROTOCOL, **out}


FULL = UCIProtocol()
_QUICK_RECIPE = SamplerRecipe(
    chains=2, map_max_steps=100, burn_in=50, draws=8, thin=5, check_every=4, ess=20.0, check_inputs=20
)
QUICK = UCIProtocol(
    hidden=20,
    batch_size=256,  # full batch on the 200 rows: the fitted baselines' epochs are single steps
    gp_fit_steps=30,
    max_rows=200,
    recipe=_QUICK_RECIPE,
    options=MappingProxyType(
        {
            m: MappingProxyType(o)
            for m, o in {
                "ensemble": {"members": 2},
                "mcdropout": {"draws": 20},
                "bbb": {"draws": 20},
                "nuts": {"warmup": 20, "draws": 5},
                "hmc": {"warmup": 20, "draws": 5},
            }.items()
        }
    ),
)


def drift_cannot_apply(cell: Mapping[str, Any]) -> bool:
    """Whether a protocol-15 cell of the default (or sghmc) is what protocol 16 writes: 16 differs
    only where :func:`bnnkit.api.recipe.noise_drifted` sends the chains back, which a 15 cell's
    record (``noise_gp``, ``noise_held``, ``noise_sampled``, ``map_heldout_rmse``) decides; a cell
    that cannot say is not taken."""
    if (
        cell.get("protocol") != 15
        or cell.get("method") not in _RECIPE_METHODS
        or "map_heldout_rmse" not in cell
    ):
        return False
    gp_fitted, held = cell.get("noise_gp") is not None, cell.get("noise_held")
    sampled, held_rmse = cell.get("noise_sampled"), cell.get("map_heldout_rmse")
    if gp_fitted and held is None and (sampled is None or held_rmse is None):
        return False  # the rule could have applied, and the record does not say
    return not noise_drifted(DEFAULT_RECIPE, held_rmse, held, gp_fitted, sampled)


def uses_gp_noise(method: str) -> bool:
    """Whether ``method`` takes the GP fit's noise: the fitted baselines (no Markov chains)."""
    return method in METHODS and not METHODS[method][1]
