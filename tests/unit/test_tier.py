"""The unit tier's promise: run alone, it cannot import TensorFlow, and none of its modules did."""

from __future__ import annotations

import sys

import pytest

from tests.support import no_tensorflow


def test_tensorflow_cannot_be_imported_when_the_unit_tier_runs_alone():
    if not no_tensorflow.blocked():
        pytest.skip("this session runs other tiers too, which import TensorFlow")
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
