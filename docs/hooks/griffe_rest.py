"""Griffe extension for the API pages: read bnnkit's reST-flavoured docstrings as Markdown.

The docstrings are prose with Google-style ``Args:`` sections, reST roles
(:class:`~bnnkit.Posterior`) and ``::`` literal blocks.  This turns a role into inline code
(``~`` keeps the last component, as Sphinx does) and a trailing ``::`` into ``:`` (the indented block
after it already renders as a code block in Markdown).  Docstrings in the package stay as they are.
"""

from __future__ import annotations

import re

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const):`(~?)([^`]+)`")


def _role(match: re.Match) -> str:
    short, target = match.group(1), match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


def rest_to_markdown(text: str) -> str:
    text = _ROLE.sub(_role, text)
    lines = []
    for line in text.split("\n"):
        if line.strip() == "::":
            continue
        if line.endswith("::"):
            line = line[:-1]
        lines.append(line)
    return "\n".join(lines)


class RestRoles(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rest_to_markdown(obj.docstring.value)
