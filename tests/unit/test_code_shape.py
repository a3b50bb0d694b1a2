"""No function in tb_modelmem over 80 lines (issue 37: a codebase the next engineer can change quickly).

Every function and method of every module is measured with ``ast``, from its ``def`` line (decorators
not counted) to its last line, docstring and comments included. A long function is split by job
(see readers/torch_snapshot.py's reduce_snapshot for the pattern), not allowlisted; an entry in
LONG_FOR_NOW names a function someone is splitting now, with why, and fails once it is short.
The frontend's functions are held to the same 80 lines by eslint's max-lines-per-function
(frontend/eslint.config.js, run by ``npm test``).
"""

from __future__ import annotations

import ast
import os
from typing import Dict, Iterator, Tuple

import tb_modelmem

MAX_LINES = 80
PACKAGE = os.path.dirname(os.path.abspath(tb_modelmem.__file__))
GENERATED = {os.path.join("proto", "_compiled.py")}  # protoc's output, not written by hand

# "path:function" -> why it is over MAX_LINES for now. Remove the entry when the function is split.
LONG_FOR_NOW: Dict[str, str] = {}


def _functions() -> Iterator[Tuple[str, int]]:
    """("path:qualified.name", lines) for every function in the package."""
    for root, _, files in os.walk(PACKAGE):
        for name in sorted(files):
            path = os.path.join(root, name)
            relative = os.path.relpath(path, PACKAGE)
            if not name.endswith(".py") or relative in GENERATED:
                continue
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            yield from _walk(tree, relative.replace(os.sep, "/"), "")


def _walk(node: ast.AST, path: str, prefix: str) -> Iterator[Tuple[str, int]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + child.name
            yield f"{path}:{name}", (child.end_lineno or child.lineno) - child.lineno + 1
            yield from _walk(child, path, name + ".")
        elif isinstance(child, ast.ClassDef):
            yield from _walk(child, path, prefix + child.name + ".")
        else:
            yield from _walk(child, path, prefix)


def test_no_function_is_over_80_lines():
    long = {where: lines for where, lines in _functions() if lines > MAX_LINES}
    offenders = sorted(f"{where} ({lines} lines)" for where, lines in long.items() if where not in LONG_FOR_NOW)
    assert not offenders, f"functions over {MAX_LINES} lines (split them by job): {offenders}"


def test_every_long_for_now_entry_is_still_long():
    long = {where for where, lines in _functions() if lines > MAX_LINES}
    stale = sorted(set(LONG_FOR_NOW) - long)
    assert not stale, f"no longer over {MAX_LINES} lines (or gone): remove from LONG_FOR_NOW: {stale}"


def test_the_measure_sees_nested_functions_and_methods():
    tree = ast.parse("class A:\n    def f(self):\n        def g():\n            pass\n")
    assert [where for where, _ in _walk(tree, "m.py", "")] == ["m.py:A.f", "m.py:A.f.g"]
