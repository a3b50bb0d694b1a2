"""The unit tier runs without TensorFlow: when a session runs only tests/unit (``bash scripts/test.sh
tests/unit``), importing ``tensorflow`` raises ModuleNotFoundError, as if it were not installed, from
before the first unit module is imported (test_tier.py checks it). A session that also runs the other
tiers imports TensorFlow there, so the block is left off."""

from __future__ import annotations

import os

import pytest

from tests.support import no_tensorflow

UNIT = os.path.dirname(os.path.abspath(__file__))


def _in_unit(arg: str, start: str) -> bool:
    path = os.path.abspath(os.path.join(start, arg.split("::")[0]))
    return os.path.commonpath([path, UNIT]) == UNIT


def pytest_configure(config: pytest.Config) -> None:
    start = str(config.invocation_params.dir)
    if config.args and all(_in_unit(arg, start) for arg in config.args):
        no_tensorflow.block()
