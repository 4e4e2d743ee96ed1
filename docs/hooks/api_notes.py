"""MkDocs hook: list a package's current modules in an API page, so a module added to or removed
from the package needs no edit of the page.

- ``<!-- module-notes: bnnkit.PKG -->``: each module's docstring only (``:::`` without members);
- ``<!-- modules: bnnkit.PKG -->``: each module in full, under a ``##`` heading of its own.
"""

from __future__ import annotations

import pkgutil
import re
from pathlib import Path

_MARK = re.compile(r"^<!-- module-notes: ([\w.]+) -->$", re.M)
_FULL = re.compile(r"^<!-- modules: ([\w.]+) -->$", re.M)


def _modules(package: str, repo: Path) -> list[str]:
    folder = repo.joinpath(*package.split("."))
    return sorted(m.name for m in pkgutil.iter_modules([str(folder)]) if not m.name.startswith("_"))


def _full(package: str, repo: Path) -> str:
    blocks = [
        f"## `{package}.{m}`\n\n::: {package}.{m}\n    options:\n      show_root_heading: false\n      heading_level: 3"
        for m in _modules(package, repo)
    ]
    return "\n\n".join(blocks)


def _notes(package: str, repo: Path) -> str:
    mods = _modules(package, repo)
    blocks = [
        f"::: {package}.{m}\n    options:\n      members: false\n      show_submodules: false\n      heading_level: 3"
        for m in mods
    ]
    return "\n\n".join(blocks)


def on_page_markdown(markdown: str, page, config, files) -> str:
    repo = Path(config["docs_dir"]).parent
    markdown = _FULL.sub(lambda m: _full(m.group(1), repo), markdown)
    return _MARK.sub(lambda m: _notes(m.group(1), repo), markdown)
