"""A meta-path finder that makes TensorFlow "not installed": ``find_spec`` probes (torch's dynamo asks
whether TensorFlow exists) still get an answer; only an import fails. Used by the unit tier
(tests/unit/conftest.py) and by workers that must run without TensorFlow (keras_backend_run)."""

from __future__ import annotations

import importlib.machinery
import sys
from typing import Any


class Refused:
    """A loader that refuses to load."""

    def create_module(self, spec: Any) -> Any:
        raise ModuleNotFoundError(f"No module named {spec.name!r} (blocked: this run has no TensorFlow)")

    def exec_module(self, module: Any) -> None:
        pass


class NoTensorFlow:
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name == "tensorflow" or name.startswith("tensorflow."):
            return importlib.machinery.ModuleSpec(name, Refused())
        return None


def block() -> NoTensorFlow:
    """Puts the finder first on ``sys.meta_path`` (once) and returns it."""
    for finder in sys.meta_path:
        if isinstance(finder, NoTensorFlow):
            return finder
    finder = NoTensorFlow()
    sys.meta_path.insert(0, finder)
    return finder


def blocked() -> bool:
    return any(isinstance(finder, NoTensorFlow) for finder in sys.meta_path)
