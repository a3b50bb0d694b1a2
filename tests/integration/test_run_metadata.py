"""RunMetadata step stats -> OpTrace, on a real TF1 LeNet session step (docs/USER_PROBLEMS.md #3)."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import textwrap
from typing import Any, Dict, List

import pytest
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

from tb_modelmem.readers.run_metadata import fused_ops, reduce_run_metadata
from tb_modelmem.schema import payload
from tb_modelmem.schema.names import FORWARD, MEASURED
from tb_modelmem.schema.records import OpRecord, OpTrace
from tests.support import trace_fixtures
from tests.support.trace_fixtures import CONV1_BYTES, CONV2_BYTES, DENSE_BYTES


@pytest.fixture(scope="module")
def traced():
    return trace_fixtures.lenet_tf1_traced(partition_graphs=False)


@pytest.fixture(scope="module")
def tf1_run_metadata(traced):
    return traced.run_metadata


@pytest.fixture(scope="module")
def op_trace(traced) -> OpTrace:
    return reduce_run_metadata(traced.run_metadata, traced.graph_info.graphs, traced.vocabulary)


def by_name(trace: OpTrace) -> Dict[str, OpRecord]:
    return {op.name: op for op in trace.ops}


def peak_point(trace: OpTrace) -> List[Any]:
    """The timeline point the Timeline view marks as the peak."""
    return next(p for p in trace.timeline.points() if p[:2] == [trace.peak_time_us, trace.peak_bytes])


def test_lenet_output_bytes_are_measured_with_their_shapes(op_trace):
    ops = by_name(op_trace)
    expected = {"conv2d/Relu": (CONV1_BYTES, "[1,28,28,32]"), "conv2d_1/Relu": (CONV2_BYTES, "[1,14,14,64]"),
                "dense/Relu": (DENSE_BYTES, "[1,1024]")}
    for name, (nbytes, shape) in expected.items():
        op = ops[name]
        assert (op.output_bytes, op.output_shape, op.output_dtype, op.bytes_source) == \
            (nbytes, shape, "float32", MEASURED)
        assert op.alloc_bytes >= nbytes  # output plus the kernel's scratch space


def test_fused_kernels_name_the_ops_they_stand_for_and_keep_the_layer(op_trace):
    ops = by_name(op_trace)
    assert ops["conv2d/Relu"].op_type.endswith("FusedConv2D")
    assert ops["conv2d/Relu"].fused == ["Conv2D", "BiasAdd", "Relu"]
    assert ops["dense_1/BiasAdd"].fused == ["MatMul", "BiasAdd"]
    assert [ops[n].layer for n in ("conv2d/Relu", "conv2d_1/Relu", "dense/Relu")] == ["conv2d", "conv2d_1", "dense"]
    assert {ops[n].phase for n in ("conv2d/Relu", "conv2d_1/Relu", "dense/Relu")} == {FORWARD}


def test_partition_graphs_give_the_exact_fused_ops():
    trace = reduce_run_metadata(trace_fixtures.lenet_tf1_run_metadata(partition_graphs=True))
    assert by_name(trace)["conv2d_1/Relu"].fused == ["Conv2D", "BiasAdd", "Relu"]


def test_fused_ops_from_kernel_names():
    assert fused_ops("_FusedConv2D", "block/Relu6_1") == ["Conv2D", "BiasAdd", "Relu6"]
    assert fused_ops("_MklNativeConv2DBackpropFilterWithBias", "g/Conv2DBackpropFilter") == \
        ["Conv2DBackpropFilter", "BiasAddGrad"]
    assert fused_ops("_MklNativeMaxPool", "pool/MaxPool") == ["MaxPool"]
    assert fused_ops("_Arg", "x") == [] and fused_ops("Relu", "r") == []


def test_every_op_is_timed(op_trace):
    assert len(op_trace.ops) > 20
    assert all(op.time_us > 0 and op.calls == 1 for op in op_trace.ops)


def test_peak_and_timeline_come_from_the_allocation_records(op_trace):
    assert op_trace.peak_bytes == max(op_trace.timeline.bytes)
    assert peak_point(op_trace)[2] in by_name(op_trace)  # the node that allocated at the peak
    assert set(op_trace.timeline.op) <= set(by_name(op_trace))  # every point names an op
    assert not op_trace.counts_resident  # step stats count from 0: weights are not in the peak
    assert op_trace.peak_bytes >= CONV1_BYTES  # conv1's output is live while conv2 runs
    assert op_trace.devices == ["/job:localhost/replica:0/task:0/device:CPU:0"]


def test_tf_proto_tensorboard_proto_and_bytes_reduce_alike(tf1_run_metadata, op_trace):
    from tensorboard.compat.proto import config_pb2

    data = tf1_run_metadata.SerializeToString()
    alone = reduce_run_metadata(tf1_run_metadata)
    assert reduce_run_metadata(data) == alone
    assert reduce_run_metadata(config_pb2.RunMetadata.FromString(data)) == alone
    assert alone.ops.column("time_us") == op_trace.ops.column("time_us")  # the graph adds layers, not figures


def test_payload_round_trips_and_is_smaller_than_the_trace(tf1_run_metadata, op_trace):
    blob = payload.encode(op_trace)
    trace_fixtures.assert_stored_as(payload.decode(blob), op_trace)
    assert len(blob) < tf1_run_metadata.ByteSize()


def test_old_logdir_written_by_plain_filewriter(tmp_path, tf1_run_metadata):
    import tensorflow as tf

    with tf.Graph().as_default():
        writer = tf.compat.v1.summary.FileWriter(str(tmp_path))
        writer.add_run_metadata(tf1_run_metadata, "step1")
        writer.close()
    (path,) = glob.glob(str(tmp_path / "events.out.tfevents.*"))
    # TensorBoard's loader turns the event into a blob under plugin graph_tagged_run_metadata.
    values = [v for e in EventFileLoader(path).Load() for v in e.summary.value
              if v.metadata.plugin_data.plugin_name == "graph_tagged_run_metadata"]
    assert [v.tag for v in values] == ["step1"]
    trace = reduce_run_metadata(values[0].tensor.string_val[0])
    assert by_name(trace)["conv2d/Relu"].output_bytes == CONV1_BYTES


def test_foreign_bytes_and_types_are_refused_clearly():
    with pytest.raises(ValueError, match="not a serialized RunMetadata"):
        reduce_run_metadata(b"\xff\xff\xff not a proto")
    with pytest.raises(TypeError, match="RunMetadata"):
        reduce_run_metadata(42)


def test_a_20000_op_trace_reduces_to_one_row_per_op_with_a_bounded_timeline():
    trace = reduce_run_metadata(trace_fixtures.synthetic_run_metadata(20_000))
    assert len(trace.ops) == 20_000
    assert len(trace.timeline) <= 2_000
    assert peak_point(trace)[2] in by_name(trace)  # downsampling kept the peak and its op


def test_reduces_without_tensorflow_as_the_backend_does():
    script = textwrap.dedent("""
        import importlib.abc, sys

        class NoTensorFlow(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name.split(".")[0] in ("tensorflow", "keras"):
                    raise ImportError("TensorFlow is blocked in this test")

        sys.meta_path.insert(0, NoTensorFlow())
        from tb_modelmem.readers.run_metadata import reduce_run_metadata
        from tests.support.trace_fixtures import synthetic_run_metadata

        trace = reduce_run_metadata(synthetic_run_metadata(100).SerializeToString())
        print(len(trace.ops), trace.ops[0].output_bytes)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["100", str(8 * 56 * 56 * 64 * 4)]


def test_run_metadata_without_step_stats_says_what_to_do():
    from tensorboard.compat.proto import config_pb2

    with pytest.raises(ValueError, match="FULL_TRACE"):
        reduce_run_metadata(config_pb2.RunMetadata())
