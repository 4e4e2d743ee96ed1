"""The image bench's MNIST rows with the default row's recipe changed: what the recipe experiments
(``map_cap``, ``classifier_cap``, ``fan_in_prior``) run on MNIST."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any


def mnist_records(recipe: dict[str, Any], methods: tuple[str, ...], root: str | None) -> list[dict]:
    """``bnnkit bench image --dataset mnist --methods ...`` with the ``default`` row's recipe given
    these :class:`~bnnkit.api.SamplerRecipe` fields (the others as the recipe has them), run in a
    temporary folder: each method's record (scores, seconds, the default's convergence record),
    its reliability bins dropped."""
    from bnnkit.bench import image

    before = image.DEFAULTS["default_recipe"]
    image.DEFAULTS["default_recipe"] = dict(recipe)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            image.run_image("mnist", methods, out=tmp, root=root, progress=False)
            lines = (Path(tmp) / image.ROWS_FILE).read_text().splitlines()
    finally:
        image.DEFAULTS["default_recipe"] = before
    return [{k: v for k, v in json.loads(line).items() if k != "reliability"} for line in lines]
