"""Fixtures shared by several integration modules (real TensorFlow runs, made once per session)."""

from __future__ import annotations

import pytest

from tests.support import trace_fixtures


@pytest.fixture(scope="session")
def profiled_lenet(tmp_path_factory) -> trace_fixtures.ProfiledLeNet:
    """The one LeNet profile the tier shares (``trace_fixtures.profile_lenet``), made once per session."""
    return trace_fixtures.profile_lenet(str(tmp_path_factory.mktemp("lenet_profile")))


@pytest.fixture(scope="session")
def lenet_xplane_bytes(profiled_lenet: trace_fixtures.ProfiledLeNet) -> bytes:
    """The ``.xplane.pb`` of the profiled LeNet steps, as the TF2 profiler wrote it."""
    with open(profiled_lenet.path, "rb") as f:
        return f.read()
