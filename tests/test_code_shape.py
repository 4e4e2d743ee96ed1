"""Shape rules of the package's code that issue 44 asks to keep."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "bnnkit"
MAX_LINES = 80


def long_functions_without_a_reason(root: Path = PACKAGE) -> list[str]:
    """Functions over MAX_LINES lines with no comment saying why ("over 80 lines", in the body or
    on the line above the definition)."""
    out = []
    for path in sorted(root.rglob("*.py")):
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if node.end_lineno - node.lineno + 1 <= MAX_LINES:
                continue
            text = "\n".join(lines[start - 2 : node.end_lineno]).lower()
            if f"over {MAX_LINES} lines" not in text:
                out.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name}")
    return out


def test_no_long_library_function_without_a_comment_that_says_why():
    assert long_functions_without_a_reason() == []


def test_the_long_function_check_finds_one(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    (tmp_path / "m.py").write_text(f"def long():\n{body}\n\n\ndef short():\n    return 1\n")
    assert long_functions_without_a_reason(tmp_path) == [f"{tmp_path.name}/m.py:1 long"]
