"""What every tier shares: one TensorFlow setting, and each test marked with its tier by its folder.

tests/unit (marker ``unit``): no TensorFlow, no subprocess, no training; tests/integration
(``integration``): real TensorFlow, torch and JAX runs, the corpus; tests/e2e (``e2e``): a real
``tensorboard`` process, Chromium, the demo script. ``-m unit`` or a folder picks a tier.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Tuple

import pytest

from tests.support import growth_runs

# TensorFlow turns oneDNN on by default only on some x86 CPUs (Intel's with AVX-512; off on AMD EPYC).
# It decides which kernels run (_MklNativeFusedConv2D or _FusedConv2D) and whether its default CPU
# allocator records large allocations (oneDNN's) or none: the tests that assert either run with it on,
# everywhere, so they assert the same figures on every machine; tests/integration/test_profiles.py
# checks what a step without it shows.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

TESTS = os.path.dirname(os.path.abspath(__file__))
TIERS = ("unit", "integration", "e2e")


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    """Marks each test with the tier its folder names; a test outside the tiers is an error."""
    for item in items:
        relative = os.path.relpath(str(item.path), TESTS).split(os.sep)
        if relative[0] not in TIERS:
            raise pytest.UsageError(f"{item.nodeid}: a test belongs in one of tests/{{{','.join(TIERS)}}}")
        item.add_marker(getattr(pytest.mark, relative[0]))


@pytest.fixture(scope="session")
def growth_loop(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Tuple[str, Dict[str, Any]]]:
    """``growth_loop(mode)``: demo/growth_loops.py's (log dir, truth) for ``mode``, run once per session
    (a loop trains eight models in a fresh TensorFlow process: the tiers share it)."""
    made: Dict[str, Tuple[str, Dict[str, Any]]] = {}

    def loop(mode: str) -> Tuple[str, Dict[str, Any]]:
        if mode not in made:
            made[mode] = growth_runs.run(mode, str(tmp_path_factory.mktemp(f"growth_{mode}")))
        return made[mode]
    return loop
