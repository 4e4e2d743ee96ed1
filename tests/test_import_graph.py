"""The import graph of the ``bnnkit`` package: no cycles, and ``bnnkit.core`` at the bottom.

The graph is read from the source with :mod:`ast`; nothing is imported.  Its rules:

- A node is a module: ``bnnkit/a/b.py`` is ``bnnkit.a.b`` and ``bnnkit/a/__init__.py`` is
  ``bnnkit.a``.
- Every import statement counts, wherever it stands: at module level, inside a function or a
  method (a "lazy" import), and under ``if TYPE_CHECKING:``.  An import moved into a function
  still makes the two modules depend on each other; a cycle is broken by moving the code both
  sides need, not by hiding the import.
- ``import bnnkit.a.b`` and ``from bnnkit.a import b`` (``b`` a module) are edges to
  ``bnnkit.a.b``; relative imports are resolved against the importing module's package.
- ``from P import name`` where ``name`` is not a module: if ``P`` is a package whose
  ``__init__`` re-exports ``name`` from one of its modules (``from .m import name``), the edge
  goes to the module that defines ``name`` (followed through nested re-exports); otherwise to
  ``P`` itself.  So a package's ``__init__`` gathering its modules' public names does not by
  itself make a cycle with a module that uses one of those names.
- Importing ``bnnkit.a.b`` also runs ``bnnkit.a``'s ``__init__``; that implicit edge to the
  parent packages is not counted (every module would otherwise depend on ``bnnkit/__init__``).
  An explicit import of a package (``import bnnkit.a``, ``from bnnkit import a``) is an edge to
  its ``__init__``, and from there to whatever the ``__init__`` imports.

Imports of other distributions (torch, gpytorch, ...) are not part of the graph.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = "bnnkit"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE

# bnnkit.core is the bottom layer: it imports none of these subpackages.
CORE_MUST_NOT_IMPORT = (
    "samplers",
    "sgmcmc",
    "vi",
    "functional",
    "laplace",
    "bench",
    "cli",
    "api",
    "predict",
    "diagnostics",
    "decisions",
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, tuple[Path, ast.Module]]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        out[_module_name(path)] = (path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    return out


def _is_package(name: str, modules: dict) -> bool:
    return name in modules and modules[name][0].name == "__init__.py"


def _base(module: str, is_pkg: bool, node: ast.ImportFrom) -> str | None:
    """The absolute module a ``from ... import`` names (None: outside bnnkit)."""
    if node.level == 0:
        return node.module
    package = module if is_pkg else module.rpartition(".")[0]
    parts = package.split(".")
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    if node.module:
        parts.append(node.module)
    return ".".join(parts)


def _raw_imports(modules: dict) -> dict[str, list[tuple[str, str | None, int]]]:
    """Per module: ``(target module, imported name or None, line)`` for every import statement."""
    raw: dict[str, list[tuple[str, str | None, int]]] = {}
    for name, (_, tree) in modules.items():
        is_pkg = _is_package(name, modules)
        found = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                        found.append((alias.name, None, node.lineno))
            elif isinstance(node, ast.ImportFrom):
                base = _base(name, is_pkg, node)
                if base and (base == PACKAGE or base.startswith(PACKAGE + ".")):
                    for alias in node.names:
                        found.append((base, alias.name, node.lineno))
        raw[name] = found
    return raw


def _resolve(base: str, name: str | None, modules: dict, raw: dict, seen: frozenset = frozenset()) -> str:
    """The module an import of ``name`` from ``base`` depends on (see the module docstring)."""
    if name is None or name == "*":
        return base
    sub = f"{base}.{name}"
    if sub in modules:
        return sub
    if _is_package(base, modules) and base not in seen:
        for target, imported, _ in raw[base]:  # a re-export in the package's __init__
            if imported == name:
                return _resolve(target, imported, modules, raw, seen | {base})
    return base


def import_graph() -> dict[str, dict[str, list[int]]]:
    """``graph[a][b]``: the lines of ``a`` whose imports make ``a`` depend on ``b``."""
    modules = _modules()
    raw = _raw_imports(modules)
    graph: dict[str, dict[str, list[int]]] = {m: defaultdict(list) for m in modules}
    for module, imports in raw.items():
        for base, name, line in imports:
            target = _resolve(base, name, modules, raw)
            if target not in modules:  # e.g. a name from bnnkit.x that is neither module nor package
                target = base
            if target in modules and target != module and line not in graph[module][target]:
                graph[module][target].append(line)
    return graph


def _strongly_connected(graph: dict[str, dict[str, list[int]]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively; the components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _cycle_path(graph: dict[str, dict[str, list[int]]], component: list[str]) -> list[str]:
    """One cycle through the component's first module (breadth-first: a shortest one)."""
    members = set(component)
    start = component[0]
    prev: dict[str, str] = {}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for child in sorted(graph[node]):
            if child not in members:
                continue
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return [start, *reversed(path[:-1]), start]
            if child not in prev:
                prev[child] = node
                queue.append(child)
    return component


def _describe(graph: dict[str, dict[str, list[int]]], component: list[str]) -> str:
    path = _cycle_path(graph, component)
    steps = [f"{a} -> {b} (line {', '.join(map(str, graph[a][b]))})" for a, b in zip(path, path[1:])]
    return f"{len(component)} modules {component}; one cycle:\n    " + "\n    ".join(steps)


def test_the_import_graph_is_read():
    graph = import_graph()
    assert "bnnkit.core.driver" in graph
    assert "bnnkit.core.target" in graph["bnnkit.core.driver"]
    # a re-export in a package __init__ resolves to the module that defines the name
    assert "bnnkit.core.driver" in graph["bnnkit"]


def test_no_import_cycle_among_bnnkit_modules():
    graph = import_graph()
    cycles = _strongly_connected(graph)
    report = "\n".join(_describe(graph, c) for c in cycles)
    assert not cycles, f"{len(cycles)} import cycle(s) in bnnkit:\n{report}"


def test_core_imports_no_higher_layer():
    graph = import_graph()
    bad = []
    for module, targets in sorted(graph.items()):
        if not (module == f"{PACKAGE}.core" or module.startswith(f"{PACKAGE}.core.")):
            continue
        for target, lines in sorted(targets.items()):
            top = target.split(".")[1] if target.count(".") else ""
            if top in CORE_MUST_NOT_IMPORT:
                bad.append(f"{module} -> {target} (line {', '.join(map(str, lines))})")
    assert not bad, "bnnkit.core imports a higher layer:\n" + "\n".join(bad)


def test_cycle_finder_finds_a_lazy_cycle():
    graph = {"a": {"b": [1]}, "b": {"c": [2]}, "c": {"a": [3]}, "d": {"a": [1]}}
    assert _strongly_connected(graph) == [["a", "b", "c"]]
    assert _cycle_path(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]


def test_the_bench_stays_a_small_part_of_the_package():
    # The user-facing benches are a protocol, a runner, records and a report each; experiments and
    # their history live in experiments/ (issue 44's bar: at most 10 % of the package's lines).
    def lines(files):
        return sum(len(f.read_text().splitlines()) for f in files)

    bench, total = lines((ROOT / "bench").rglob("*.py")), lines(ROOT.rglob("*.py"))
    assert bench <= 0.10 * total, f"bnnkit/bench is {bench} of {total} lines ({bench / total:.1%})"
