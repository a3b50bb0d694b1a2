"""The docs name what exists: every module of the package in docs/ARCHITECTURE.md, every route of the
plugin in docs/HTTP_API.md, and nothing there that is gone (issue 37: docs had drifted)."""

from __future__ import annotations

import ast
import os
import re
from typing import List, Set

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(ROOT, "tb_modelmem")
GENERATED = {"proto/_compiled.py"}  # written by scripts/gen_protos.py, described with proto/ as a whole


def _read(*parts: str) -> str:
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def _modules() -> List[str]:
    """Every module of the package as a path under tb_modelmem/ ("plugin/views/pager.py")."""
    found = []
    for folder, _, names in os.walk(PACKAGE):
        for name in names:
            if name.endswith(".py") and name != "__init__.py":
                path = os.path.relpath(os.path.join(folder, name), PACKAGE).replace(os.sep, "/")
                if path not in GENERATED:
                    found.append(path)
    return sorted(found)


def _named_in_architecture(path: str, text: str) -> bool:
    """A module is named by its path below its folder's heading: `summaries.py` under plugin/sources/,
    or a longer suffix of its path (`sources/summaries.py`), in backticks."""
    parts = path.split("/")
    return any(f"`{'/'.join(parts[i:])}`" in text for i in range(len(parts)))


def test_every_module_is_in_the_architecture():
    text = _read("docs", "ARCHITECTURE.md")
    missing = [path for path in _modules() if not _named_in_architecture(path, text)]
    assert not missing, f"modules not in docs/ARCHITECTURE.md: {missing}"


def test_the_check_sees_a_missing_module():
    assert not _named_in_architecture("readers/not_a_module.py", _read("docs", "ARCHITECTURE.md"))


def _routes() -> Set[str]:
    """The routes ``ModelMemPlugin.get_plugin_apps`` returns, read from its source."""
    tree = ast.parse(_read("tb_modelmem", "plugin", "plugin.py"))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "get_plugin_apps":
            (returned,) = [n for n in ast.walk(node) if isinstance(n, ast.Return)]
            assert isinstance(returned.value, ast.Dict)
            return {k.value for k in returned.value.keys if isinstance(k, ast.Constant)}
    raise AssertionError("no get_plugin_apps in plugin.py")


def test_the_http_api_doc_names_every_route_and_no_other():
    documented = set(re.findall(r"^\| `(/[\w.]+)` \|", _read("docs", "HTTP_API.md"), re.MULTILINE))
    routes = _routes()
    assert len(routes) >= 10
    assert documented == routes, {"undocumented": sorted(routes - documented), "gone": sorted(documented - routes)}
