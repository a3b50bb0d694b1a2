"""The TensorFlow line, read from the source: which code may import TensorFlow, and which way the
folders depend on each other. Every import counts, a function's own included (the runtime
check, a backend served with TensorFlow blocked, is tests/integration/test_no_tensorflow.py)."""

import ast
import json
import pathlib
import re
from typing import Dict, Set

from tb_modelmem.schema import names

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "tb_modelmem"
LIVE = ("tensorflow", "keras", "jax", "tb_modelmem.capture", "tb_modelmem.callbacks", "tb_modelmem.tracing",
        "tb_modelmem.summary")
# What each TF-free folder may import from the package: nothing above it.
ALLOWED = {
    "schema": {"schema"},
    "rules": {"schema", "rules"},
    "readers": {"schema", "rules", "readers", "proto", "messages"},
    "plugin": {"schema", "rules", "readers", "plugin", "proto", "messages", "gc_paused"},
}


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> Dict[str, Set[str]]:
    """Every module of the package -> every module it imports, anywhere in its body."""
    found: Dict[str, Set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        module = _module_name(path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        imported: Set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [base]).strip(".")
                imported.add(base)
                imported.update(f"{base}.{alias.name}" for alias in node.names)  # from pkg import module
        found[module] = imported
    return found


IMPORTS = _imports()


def _live_imports(imports: Dict[str, Set[str]]) -> Dict[str, list]:
    """Each module the TF-free folders reach (following every import) -> what it imports of TensorFlow,
    Keras, JAX or live capture."""
    pending = [m for m in imports if m.count(".") and m.split(".")[1] in ALLOWED]
    seen: Set[str] = set()
    while pending:
        module = pending.pop()
        if module not in seen:
            seen.add(module)
            pending.extend(m for m in imports[module] if m in imports)
    found = {module: sorted(i for i in imports[module] if any(_is(i, live) for live in LIVE)) for module in seen}
    return {module: live for module, live in found.items() if live}


def _is(imported: str, prefix: str) -> bool:
    return imported == prefix or imported.startswith(prefix + ".")


def test_the_backend_and_the_readers_reach_no_tensorflow():
    assert not _live_imports(IMPORTS)
    # and the check sees one when there is, however deep: the plugin reaches readers.dtypes
    planted = dict(IMPORTS, **{"tb_modelmem.readers.dtypes": IMPORTS["tb_modelmem.readers.dtypes"] | {"tensorflow"}})
    assert _live_imports(planted) == {"tb_modelmem.readers.dtypes": ["tensorflow"]}


def _upward(imports: Dict[str, Set[str]]) -> list:
    """"module imports name" for each import of a TF-free folder that reaches above it."""
    found = []
    for module, imported in imports.items():
        folder = module.split(".")[1] if "." in module else ""
        for name in imported:
            if folder in ALLOWED and _is(name, "tb_modelmem") and name != "tb_modelmem":
                if name.split(".")[1] not in ALLOWED[folder]:
                    found.append(f"{module} imports {name}")
    return found


def test_no_folder_imports_one_above_it():
    assert not _upward(IMPORTS)
    # and the check sees one when there is: rules reaching up into the readers, schema into capture
    planted = dict(IMPORTS, **{"tb_modelmem.rules.join": {"tb_modelmem.readers.xspace"},
                               "tb_modelmem.schema.names": {"tb_modelmem.capture.variables"}})
    assert sorted(_upward(planted)) == ["tb_modelmem.rules.join imports tb_modelmem.readers.xspace",
                                        "tb_modelmem.schema.names imports tb_modelmem.capture.variables"]


def test_the_test_sees_function_level_imports():
    """A live import hidden inside a function is still an import (loadbench.py imports TF to save models)."""
    assert "tensorflow" in IMPORTS["tb_modelmem.loadbench"]
    assert "tensorflow" in IMPORTS["tb_modelmem.summary"]
    assert "tensorflow" not in IMPORTS["tb_modelmem.cli"]  # inspect --logdir writes through writer.FileWriter


# Outside the package, imports go one way: what each folder may import of the others (the package, none).
OUTSIDE = ("tb_modelmem", "demo", "tests", "benchmarks", "scripts")
MAY_IMPORT = {
    "tb_modelmem": {"tb_modelmem"},
    "demo": {"tb_modelmem", "demo"},
    "tests": {"tb_modelmem", "demo", "tests"},
    "benchmarks": {"tb_modelmem", "demo", "tests", "benchmarks"},  # tests.support: harnesses, synthetic records
    "scripts": {"tb_modelmem", "demo", "tests", "scripts"},
}


def _outside_imports(folder: str) -> Set[str]:
    """"path: top-level folder" for each import in ``folder`` of one of OUTSIDE it may not import."""
    found = set()
    for path in (ROOT / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            modules = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                       [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            found.update(f"{path.relative_to(ROOT)}: {m.split('.')[0]}" for m in modules
                         if m.split(".")[0] in OUTSIDE and m.split(".")[0] not in MAY_IMPORT[folder])
    return found


def test_outside_the_package_imports_go_one_way():
    """The product imports none of the folders beside it; the demo imports the product only (tests may
    import the demo's models, never the reverse); benchmarks and scripts, development tools, may import
    tests/support/ too (docs/ARCHITECTURE.md, "Outside the package")."""
    assert not set().union(*(_outside_imports(folder) for folder in MAY_IMPORT))


def _js_list(source: str, name: str) -> list:
    found = re.search(rf"export const {name} = (\[[^\]]*\]);", source)
    assert found, f"frontend/src/roles.js exports no {name}"
    return json.loads(re.sub(r",\s*\]", "]", found.group(1)))


def _js_keys(source: str, name: str) -> Set[str]:
    found = re.search(rf"export const {name} = \{{(.*?)\n\}};", source, re.S)
    assert found, f"frontend/src/roles.js exports no {name}"
    return set(re.findall(r"^\s*(\w+):", found.group(1), re.M))


def test_the_frontend_names_what_the_backend_names():
    source = (ROOT / "frontend" / "src" / "roles.js").read_text()
    assert _js_list(source, "ROLES") == list(names.ROLES)
    assert _js_list(source, "PHASES") == list(names.PHASES)
    assert sorted(_js_list(source, "CATEGORIES")) == sorted(names.PEAK_CATEGORIES)  # stacking order, not the backend's
    assert _js_list(source, "RESIDENT") == list(names.RESIDENT_CATEGORIES)
    assert _js_list(source, "TORCH_BREAKDOWN_SOURCES") == list(names.TORCH_BREAKDOWN_SOURCES)
    for table in ("ROLE_LABEL", "ROLE_COLOR"):
        assert _js_keys(source, table) - {"total"} == set(names.ROLES), table
    # and a buffer's own (a variable's moved one), What-if's chunking row (labelled and hinted, not stacked) and
    # its caching allocator's reserved row
    for table in ("CATEGORY_LABEL", "CATEGORY_COLOR", "CATEGORY_HINT"):
        shown = set(names.PEAK_CATEGORIES) | {names.MOVED_STATE, names.RESERVED_ROW}
        shown |= {names.CHUNKING_CATEGORY} if table != "CATEGORY_COLOR" else set()
        assert _js_keys(source, table) - {"total"} == shown, table
