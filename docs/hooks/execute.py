"""MkDocs hook: run the tutorial and the quick examples while the site builds.

- ``docs/tutorial/*.py`` are literate scripts: ``# %% [markdown]`` cells hold the prose (comment
  lines), ``# %%`` cells the code.  Each script runs once, in its own process, cell by cell in one
  namespace; every code cell is followed on the page by what it printed and the figures it left
  open (saved as PNG, then closed).  The page ``tutorial/<name>.md`` and its figures are added to
  the build as generated files: nothing is written into the repository.
- ``EXAMPLES`` below lists the scripts of ``examples/`` with the arguments they run with here, or
  the reason they are not run; ``tutorial/examples.md`` shows each one's command and output.

A script that fails fails the build, with its traceback.  Results are cached under the system
temporary directory, keyed by the script, its arguments and the source of the ``bnnkit`` package,
so ``mkdocs serve`` does not rerun unchanged scripts; ``BNNKIT_DOCS_CACHE=0`` turns the cache off.
``BNNKIT_DOCS_EXECUTE=0`` skips running them, for a quick preview of the prose (never in CI).
Scripts run with one CPU thread per process (``OMP_NUM_THREADS=1`` unless set) and at most two at
a time.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.execute")

TIMEOUT_S = 300  # per script

# examples/ scripts: (file, arguments, None) to run, or (file, None, why not) to list only.
EXAMPLES = [
    ("markov_chain_3state.py", [], None),
    ("extrapolation_1d.py", ["--quick", "--out", "{out}"], None),
    (
        "sghmc_uci.py",
        None,
        "needs the UCI Boston housing files (not shipped with the package; `--download` fetches them) "
        "and takes about 2 minutes (`--quick`: a smoke run).",
    ),
    (
        "torchrun_sgld.py",
        None,
        "starts two processes under `torchrun` (data- or chain-parallel SGLD over `torch.distributed`); "
        "see [Distributed sampling](../distributed.md).",
    ),
]

# The runner executes a literate script cell by cell and writes cells.json plus one PNG per figure.
RUNNER = r"""
import contextlib, io, json, os, sys, time, traceback
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

script, out = sys.argv[1], sys.argv[2]
cells = json.load(open(os.path.join(out, "cells_in.json")))
ns = {"__name__": "__main__", "__file__": script}
sys.argv = [script]
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
results = []
for i, cell in enumerate(cells):
    if cell["kind"] != "code":
        results.append({"stdout": "", "figures": []})
        continue
    buf = io.StringIO()
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(buf):
            exec(compile(cell["source"], f"{script} (cell {i + 1}, line {cell['line']})", "exec"), ns)
    except BaseException:
        sys.stdout.write(buf.getvalue())
        traceback.print_exc()
        sys.exit(1)
    figures = []
    for k, num in enumerate(plt.get_fignums()):
        name = f"cell{i + 1:02d}_fig{k + 1}.png"
        plt.figure(num).savefig(os.path.join(out, name), dpi=90, bbox_inches="tight")
        figures.append(name)
    plt.close("all")
    results.append({"stdout": buf.getvalue(), "figures": figures, "seconds": time.perf_counter() - t0})
json.dump(results, open(os.path.join(out, "cells_out.json"), "w"))
"""


# ---------------------------------------------------------------------------------------------
# literate scripts


def split_cells(source: str) -> list[dict]:
    """``# %%`` cells of a script: ``{"kind": "markdown" | "code", "source", "line"}``."""
    cells: list[dict] = []
    kind, lines, start = "code", [], 1
    for n, line in enumerate(source.splitlines(), 1):
        if line.startswith("# %%"):
            cells.append({"kind": kind, "source": "\n".join(lines), "line": start})
            kind = "markdown" if "[markdown]" in line else "code"
            lines, start = [], n + 1
        else:
            lines.append(line)
    cells.append({"kind": kind, "source": "\n".join(lines), "line": start})
    for c in cells:
        if c["kind"] == "markdown":
            c["source"] = "\n".join(
                ln[2:] if ln.startswith("# ") else ln.lstrip("#") for ln in c["source"].splitlines()
            )
        c["source"] = c["source"].strip("\n")
    return [c for c in cells if c["source"].strip()]


def render_literate(name: str, cells: list[dict], results: list[dict], figdir: str) -> str:
    parts = []
    for cell, res in zip(cells, results):
        if cell["kind"] == "markdown":
            parts.append(cell["source"])
            continue
        parts.append(f"```python\n{cell['source']}\n```")
        if res["stdout"].strip():
            parts.append(output_block(res["stdout"]))
        for fig in res["figures"]:
            parts.append(f"![figure]({figdir}/{fig})")
    parts.append(
        f"---\n\n*This page was generated by running [`{name}`]({name}) when the site was built "
        f"(`docs/tutorial/{name}` in the repository).*"
    )
    return "\n\n".join(parts) + "\n"


def output_block(text: str) -> str:
    text = text.rstrip()
    fence = "```"
    while fence in text:
        fence += "`"
    return f'{fence}text title="output"\n{text}\n{fence}'


# ---------------------------------------------------------------------------------------------
# running, with a cache


def _source_key(repo: Path) -> str:
    h = hashlib.sha256()
    for p in sorted((repo / "bnnkit").rglob("*.py")):
        h.update(str(p.relative_to(repo)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def _env(repo: Path) -> dict:
    env = dict(os.environ)
    # the scripts run in a scratch folder (nothing lands in the repository); bnnkit from the checkout
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(repo), env.get("PYTHONPATH", "")) if p)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("MKL_NUM_THREADS", "1")
    env["MPLBACKEND"] = "Agg"
    env["PYTHONWARNINGS"] = env.get("PYTHONWARNINGS", "ignore")
    return env


def _cached(key: str) -> Path | None:
    if os.environ.get("BNNKIT_DOCS_CACHE", "1") == "0":
        return None
    d = Path(tempfile.gettempdir()) / "bnnkit-docs-cache" / key
    return d if (d / "done").exists() else None


def _cache_dir(key: str) -> Path:
    d = Path(tempfile.gettempdir()) / "bnnkit-docs-cache" / key
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    return d


def _run(cmd: list[str], cwd: Path, repo: Path, what: str) -> tuple[str, float]:
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=_env(repo), capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as err:
        raise PluginError(f"{what} did not finish within {TIMEOUT_S} s") from err
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise PluginError(f"{what} failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout, elapsed


def run_literate(script: Path, repo: Path, src_key: str) -> tuple[list[dict], list[dict], Path, float]:
    source = script.read_text()
    cells = split_cells(source)
    key = hashlib.sha256(("literate\0" + RUNNER + source + "\0" + src_key).encode()).hexdigest()[:24]
    hit = _cached(key)
    if hit is not None:
        meta = json.loads((hit / "meta.json").read_text())
        return cells, json.loads((hit / "cells_out.json").read_text()), hit, meta["seconds"]
    out = _cache_dir(key)
    (out / "cells_in.json").write_text(json.dumps(cells))
    (out / "runner.py").write_text(RUNNER)
    work = out / "cwd"
    work.mkdir()
    _, elapsed = _run(
        [sys.executable, str(out / "runner.py"), str(script), str(out)],
        work,
        repo,
        f"docs/tutorial/{script.name}",
    )
    (out / "meta.json").write_text(json.dumps({"seconds": elapsed}))
    (out / "done").touch()
    return cells, json.loads((out / "cells_out.json").read_text()), out, elapsed


def run_example(name: str, args: list[str], repo: Path, src_key: str) -> tuple[str, list[Path], float]:
    script = repo / "examples" / name
    key = hashlib.sha256(
        ("example\0" + script.read_text() + "\0" + " ".join(args) + "\0" + src_key).encode()
    ).hexdigest()[:24]
    hit = _cached(key)
    if hit is None:
        out = _cache_dir(key)
        files = out / "files"
        files.mkdir()
        argv = [a.replace("{out}", str(files)) for a in args]
        work = out / "cwd"
        work.mkdir()
        stdout, elapsed = _run([sys.executable, str(script), *argv], work, repo, f"examples/{name}")
        (out / "stdout.txt").write_text(stdout.replace(str(files), "OUT"))
        (out / "meta.json").write_text(json.dumps({"seconds": elapsed}))
        (out / "done").touch()
        hit = out
    meta = json.loads((hit / "meta.json").read_text())
    pngs = sorted((hit / "files").rglob("*.png"))
    return (hit / "stdout.txt").read_text(), pngs, meta["seconds"]


def render_examples(results: dict, repo: Path) -> str:
    parts = [
        "# Examples",
        "The scripts in `examples/` of the repository. Those that finish in seconds are run when this "
        "site is built: each section shows the command and what it printed (and drew). Run them from the "
        "repository root.",
    ]
    for name, args, why in EXAMPLES:
        doc = _module_doc(repo / "examples" / name)
        parts.append(f"## `{name}`")
        if doc:
            parts.append(doc)
        if why is not None:
            parts.append(f'!!! note "Not run when the site is built"\n    {why}')
            continue
        stdout, pngs, seconds = results[name]
        shown = " ".join(a if a != "{out}" else "OUT" for a in args)
        parts.append(f"```bash\npython examples/{name}{' ' + shown if shown else ''}\n```")
        parts.append(output_block(stdout or "(no output)"))
        for png in pngs:
            parts.append(f"![{png.stem}](examples_files/{name[:-3]}_{png.name})")
        parts.append(f"*Ran in {seconds:.0f} s when the site was built.*")
    return "\n\n".join(parts) + "\n"


def _escape_stars(text: str) -> str:
    """``p*`` in plain-text docstrings is not emphasis (code spans are left as they are)."""
    out, pos = [], 0
    for m in re.finditer(r"(`+).+?\1", text, re.S):
        out += [text[pos : m.start()].replace("*", "\\*"), m.group(0)]
        pos = m.end()
    return "".join([*out, text[pos:].replace("*", "\\*")])


def _module_doc(path: Path) -> str:
    import ast

    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    # keep the prose, show indented blocks (formulas, matrices) as code
    out = []
    for para in doc.split("\n\n"):
        if para.startswith("    ") or para.startswith("Run:"):
            out.append(f"```text\n{textwrap.dedent(para).strip()}\n```")
        else:
            out.append(_escape_stars(para))
    return "\n\n".join(out)


# ---------------------------------------------------------------------------------------------
# the hook


def _add(files: Files, config, src_uri: str, content: str | bytes) -> None:
    old = files.get_file_from_path(src_uri)
    if old is not None:
        files.remove(old)
    files.append(File.generated(config, src_uri, content=content))


def on_files(files: Files, config) -> Files:
    docs = Path(config["docs_dir"])
    repo = docs.parent
    src_key = _source_key(repo)
    scripts = sorted((docs / "tutorial").glob("*.py"))
    jobs = {}
    start = time.perf_counter()
    if os.environ.get("BNNKIT_DOCS_EXECUTE", "1") == "0":  # a quick preview: code without outputs
        log.info("BNNKIT_DOCS_EXECUTE=0: the tutorial and examples are not run")
        return _add_unexecuted(files, config, scripts, repo)
    with ThreadPoolExecutor(max_workers=2) as pool:
        for script in scripts:
            jobs[("tutorial", script.name)] = pool.submit(run_literate, script, repo, src_key)
        for name, args, why in EXAMPLES:
            if why is None:
                jobs[("example", name)] = pool.submit(run_example, name, args, repo, src_key)
        done = {k: f.result() for k, f in jobs.items()}
    for script in scripts:
        cells, results, outdir, seconds = done[("tutorial", script.name)]
        stem = script.stem
        _add(
            files,
            config,
            f"tutorial/{stem}.md",
            render_literate(script.name, cells, results, f"{stem}_files"),
        )
        for res in results:
            for fig in res["figures"]:
                _add(files, config, f"tutorial/{stem}_files/{fig}", (outdir / fig).read_bytes())
        log.info("tutorial/%s: %d cells, %.1f s", script.name, len(cells), seconds)
        for i, res in enumerate(results):
            if res.get("seconds") is not None:
                log.debug("tutorial/%s cell %d: %.1f s", script.name, i + 1, res["seconds"])
    example_results = {}
    for name, _args, why in EXAMPLES:
        if why is None:
            stdout, pngs, seconds = done[("example", name)]
            example_results[name] = (stdout, pngs, seconds)
            for png in pngs:
                _add(files, config, f"tutorial/examples_files/{name[:-3]}_{png.name}", png.read_bytes())
            log.info("examples/%s: %.1f s", name, seconds)
    _add(files, config, "tutorial/examples.md", render_examples(example_results, repo))
    log.info("executed docs scripts in %.1f s", time.perf_counter() - start)
    return files


def _add_unexecuted(files: Files, config, scripts: list[Path], repo: Path) -> Files:
    for script in scripts:
        cells = split_cells(script.read_text())
        empty = [{"stdout": "", "figures": []} for _ in cells]
        _add(files, config, f"tutorial/{script.stem}.md", render_literate(script.name, cells, empty, ""))
    results = {name: ("(not run in this build)", [], 0.0) for name, _args, why in EXAMPLES if why is None}
    _add(files, config, "tutorial/examples.md", render_examples(results, repo))
    return files
