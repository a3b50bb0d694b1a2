"""The unit tier's promise: run alone, it cannot import TensorFlow, and none of its modules did."""

from __future__ import annotations

import ast
import os
import sys

import pytest

from tests.support import no_tensorflow

UNIT = os.path.dirname(os.path.abspath(__file__))
FRAMEWORKS = ("tensorflow", "keras", "jax", "torch")


def test_no_unit_test_imports_a_framework():
    """Read from the source, so it holds in a session that runs the other tiers (and imports TF) too."""
    found = []
    for name in sorted(os.listdir(UNIT)):
        if name.endswith(".py"):
            with open(os.path.join(UNIT, name), encoding="utf-8") as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                modules = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                           [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                found += [(name, m) for m in modules if m.split(".")[0] in FRAMEWORKS]
    assert found == [(__file__.rsplit(os.sep, 1)[1], "tensorflow"), (__file__.rsplit(os.sep, 1)[1],
                                                                      "tensorflow.tsl.profiler.protobuf")]


def test_tensorflow_cannot_be_imported_when_the_unit_tier_runs_alone():
    """Run alone (``bash scripts/test.sh tests/unit``), the tier has TensorFlow blocked; in a whole run the
    other tiers have imported it, and the block is off (the static check above covers that case)."""
    if not no_tensorflow.blocked():
        assert "tensorflow" not in sys.modules or not any(
            m.startswith("tests.unit.") and "tensorflow" in vars(sys.modules[m]) for m in list(sys.modules))
        return
    assert not [m for m in sys.modules if m == "tensorflow" or m.startswith("tensorflow.")]
    with pytest.raises(ModuleNotFoundError, match="blocked"):
        import tensorflow  # noqa: F401
    with pytest.raises(ModuleNotFoundError, match="blocked"):
        from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: F401


def test_the_block_answers_find_spec_probes_and_refuses_only_the_import():
    """torch's dynamo asks ``importlib.util.find_spec("tensorflow")``: it gets an answer, not an error."""
    finder = no_tensorflow.NoTensorFlow()
    spec = finder.find_spec("tensorflow.python")
    assert spec is not None and spec.name == "tensorflow.python"
    assert finder.find_spec("tensorboard") is None and finder.find_spec("tensorflow_io_x") is None
    with pytest.raises(ModuleNotFoundError, match="tensorflow.python"):
        spec.loader.create_module(spec)


def _imported_modules(tree: ast.AST, package: str) -> list:
    """The modules a module's imports name, relative ones made absolute from its ``package``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            found += [module] + [f"{module}.{a.name}" for a in node.names]
    return found


def test_no_test_module_imports_another():
    """What tests share lives in tests/support/ (or a conftest.py fixture): a test module imported by another
    runs its module-level setup in the wrong tier and ties one file's tests to another's."""
    tests = os.path.dirname(UNIT)
    found = []
    for root, _, files in os.walk(tests):
        for name in sorted(files):
            if not (name.startswith("test_") and name.endswith(".py")):
                continue
            path = os.path.join(root, name)
            package = os.path.relpath(root, os.path.dirname(tests)).replace(os.sep, ".")
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
            found += [(os.path.relpath(path, tests), m) for m in _imported_modules(tree, package)
                      if m.startswith("tests.") and m.rsplit(".", 1)[-1].startswith("test_")]
    assert not found, f"test modules that import a test module (move what they share to tests/support/): {found}"


def test_the_import_check_sees_absolute_and_relative_imports():
    tree = ast.parse("from tests.unit.test_a import x\nfrom .test_b import y\nimport tests.e2e.test_c\n"
                     "from . import test_d\nfrom tests.support import paths\n")
    names = _imported_modules(tree, "tests.unit")
    assert [m for m in names if m.rsplit(".", 1)[-1].startswith("test_")] == [
        "tests.unit.test_a", "tests.unit.test_b", "tests.e2e.test_c", "tests.unit.test_d"]
