"""Fixtures shared by several integration modules (real TensorFlow runs, made once per session)."""

from __future__ import annotations

import glob
import os

import pytest

from tests.support import trace_fixtures


@pytest.fixture(scope="session")
def lenet_xplane_bytes(tmp_path_factory) -> bytes:
    """The ``.xplane.pb`` of two profiled LeNet training steps (batch 1), as the TF2 profiler wrote it."""
    import tensorflow as tf

    model = trace_fixtures.lenet_keras()
    training = trace_fixtures.lenet_train_step(model)
    logdir = str(tmp_path_factory.mktemp("lenet_profile"))
    tf.profiler.experimental.start(logdir)
    for _ in range(2):
        training.step(*training.batch)
    tf.profiler.experimental.stop()
    (path,) = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
    with open(path, "rb") as f:
        return f.read()
