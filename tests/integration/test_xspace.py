"""TF2 profiler XSpace -> OpTrace, on two real LeNet training steps (docs/USER_PROBLEMS.md #3)."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import textwrap
import warnings
import zlib
from typing import Any, List, Tuple

import pytest

from tb_modelmem import proto
from tb_modelmem.capture.opgraph import graph_info, variables_of
from tb_modelmem.capture.variables import breakdown_of
from tb_modelmem.readers import xspace
from tb_modelmem.rules.join import Vocabulary
from tb_modelmem.schema import metadata, payload
from tb_modelmem.schema.names import BACKWARD, DERIVED, MEASURED, OPTIMIZER, UNKNOWN_BYTES
from tb_modelmem.schema.records import OpRecord, OpTrace
from tests.support import trace_fixtures
from tests.support.layer_time import on_layers
from tests.support.trace_fixtures import CONV1_BYTES, CONV2_BYTES, DENSE_BYTES

STEPS = trace_fixtures.LENET_STEPS
Profiled = trace_fixtures.ProfiledLeNet


@pytest.fixture(scope="module")
def profiled(profiled_lenet: Profiled) -> Profiled:
    """The tier's one LeNet profile (tests/integration/conftest.py)."""
    return profiled_lenet


def graph_and_vocabulary(profiled: Profiled, function: Any = None) -> Tuple[Any, Vocabulary]:
    """What tb_modelmem.trace(model=, optimizer=) gives the reducer: the graph and the model's layers."""
    variables = variables_of(profiled.model, profiled.optimizer)
    return (graph_info(function or profiled.train_step, variables),
            Vocabulary.from_breakdown(breakdown_of(profiled.model, profiled.optimizer)))


@pytest.fixture(scope="module")
def op_trace(profiled) -> OpTrace:
    graph, vocabulary = graph_and_vocabulary(profiled)
    return xspace.reduce_xspace(xspace.load_xspace(profiled.path), graph, vocabulary=vocabulary)


def forward(trace: OpTrace, fused: List[str]) -> List[OpRecord]:
    """Forward-pass kernels standing for ``fused`` (Keras 3 scopes are not the layer names)."""
    return [op for op in trace.ops if op.fused == fused and not op.name.startswith("gradient_tape/")]


def test_lenet_output_bytes_derived_from_the_graph_and_labelled(op_trace):
    convs = sorted(forward(op_trace, ["Conv2D", "BiasAdd", "Relu"]), key=lambda op: -op.output_bytes)
    (dense,) = forward(op_trace, ["MatMul", "BiasAdd", "Relu"])
    got = [(op.output_bytes, op.output_shape, op.output_dtype, op.bytes_source) for op in convs + [dense]]
    assert got == [(CONV1_BYTES, "[1,28,28,32]", "float32", DERIVED),
                   (CONV2_BYTES, "[1,14,14,64]", "float32", DERIVED),
                   (DENSE_BYTES, "[1,1024]", "float32", DERIVED)]
    assert all(op.op_type.endswith(("FusedConv2D", "FusedMatMul")) for op in convs + [dense])
    assert all(op.calls == STEPS for op in convs + [dense])


def test_uniquified_keras_scopes_join_the_layers_that_own_the_weights(profiled, op_trace):
    # Keras layer paths as the Storage view has them: conv, pool, conv, pool, flatten, dense, dense.
    paths = [f"{profiled.model.name}/{layer.name}" for layer in profiled.model.layers]
    assert {v.path.rpartition("/")[0] for v in profiled.model.weights} == {paths[0], paths[2], paths[5], paths[6]}
    convs = sorted(forward(op_trace, ["Conv2D", "BiasAdd", "Relu"]), key=lambda op: -op.output_bytes)
    (dense,) = forward(op_trace, ["MatMul", "BiasAdd", "Relu"])
    assert [op.layer for op in convs + [dense]] == [paths[0], paths[2], paths[5]]
    pools = sorted(op.layer for op in forward(op_trace, ["MaxPool"]))
    assert pools == [paths[1], paths[3]]  # no weights: renamed like their siblings
    grads = [op for op in op_trace.ops if op.name.startswith("gradient_tape/") and "Conv2DBackprop" in op.name]
    assert {op.layer for op in grads} == {paths[0], paths[2]} and {op.phase for op in grads} == {BACKWARD}
    # Adam's update of fc1's kernel sits under the optimizer's flat scope; it reads fc1's kernel and slots.
    updates = [op for op in op_trace.ops if op.op_type.startswith(("AssignSub", "ResourceApply"))]
    assert {op.layer for op in updates} == {paths[0], paths[2], paths[5], paths[6]}
    assert {op.phase for op in updates} == {OPTIMIZER}


def test_almost_all_forward_and_backward_time_is_on_a_layer_of_the_model(profiled, op_trace):
    layers = {f"{profiled.model.name}/{layer.name}" for layer in profiled.model.layers}
    fraction, elsewhere = on_layers(((op.phase, op.layer, op.time_us) for op in op_trace.ops), layers)
    assert fraction >= 0.9, (fraction, elsewhere)


def test_large_allocations_are_measured_by_the_allocator(op_trace):
    measured = [op for op in op_trace.ops if op.bytes_source == MEASURED]
    # The dense kernel's gradient and Adam temporaries: [3136,1024] float32.
    assert measured and all(op.output_bytes == 3136 * 1024 * 4 for op in measured)
    assert all(op.output_shape == "[3136,1024]" and op.alloc_bytes >= op.output_bytes for op in measured)


def test_every_op_event_is_timed_and_steps_counted(op_trace):
    timed = [op for op in op_trace.ops if op.op_type]
    assert len(timed) > 100
    assert all(op.time_us > 0 for op in timed)
    assert op_trace.steps == STEPS
    assert op_trace.devices == ["/host:CPU"]


def test_peak_and_timeline_from_memory_events(op_trace):
    assert op_trace.timeline.t_us and op_trace.counts_resident
    assert op_trace.peak_bytes >= max(op_trace.timeline.bytes)
    assert 0 <= op_trace.peak_time_us <= op_trace.timeline.t_us[-1]


def test_timeline_points_name_ops_of_the_table(op_trace):
    names = {op.name for op in op_trace.ops}
    peak = max((p for p in op_trace.timeline.points() if p[0] == op_trace.peak_time_us), key=lambda p: p[1])
    assert peak[2] in names  # the op whose allocation made the peak
    assert {op for op in op_trace.timeline.op if op} <= names


def test_payload_is_a_small_fraction_of_the_xplane(profiled, op_trace, record_property):
    blob = payload.encode(op_trace)
    ratio = len(blob) / os.path.getsize(profiled.path)
    record_property("payload_bytes", len(blob))
    record_property("xplane_bytes", os.path.getsize(profiled.path))
    print(f"\nxplane.pb {os.path.getsize(profiled.path):,} B -> OpTrace payload {len(blob):,} B, ratio {ratio:.3f}")
    assert ratio < 1
    trace_fixtures.assert_stored_as(payload.decode(blob), op_trace)
    # rows in name order, so each stored name is what it adds to the one before (schema 3)
    names = op_trace.ops.column("name")
    assert names == sorted(names)
    stored = json.loads(payload.inflate(blob))["data"]["ops"]["name"]
    assert sum(stored["shared"]) > sum(map(len, stored["rest"]))  # most of a name is its scope, stored once
    plain = zlib.compress(json.dumps({"schema": 2, "kind": metadata.OPS, "data": op_trace.to_dict()}).encode(), 6)
    assert len(blob) < len(plain)  # ResNet50: 2.9% of its .xplane.pb against 5.0% (benchmarks/bench_trace.py)


def conv1_name(trace: OpTrace) -> str:
    (op,) = [op for op in forward(trace, ["Conv2D", "BiasAdd", "Relu"]) if op.output_bytes == CONV1_BYTES]
    return op.name


def test_without_the_graph_unmeasured_bytes_stay_unknown(profiled):
    trace = xspace.reduce_xspace(xspace.load_xspace(profiled.path))
    convs = forward(trace, ["Conv2D", "BiasAdd", "Relu"])
    assert len(convs) == 2
    assert all((op.output_bytes, op.output_shape, op.bytes_source) == (0, "", UNKNOWN_BYTES) for op in convs)


def test_unknown_batch_dimension_takes_the_given_batch_size(profiled, op_trace):
    import tensorflow as tf

    polymorphic = profiled.train_step.get_concrete_function(tf.TensorSpec([None, 28, 28, 1], tf.float32),
                                                    tf.TensorSpec([None], tf.int32))
    space = xspace.load_xspace(profiled.path)
    graph, vocabulary = graph_and_vocabulary(profiled, polymorphic)
    for batch_size, want in ((1, (CONV1_BYTES, "[1,28,28,32]", DERIVED)), (None, (0, "[?,28,28,32]", UNKNOWN_BYTES))):
        trace = xspace.reduce_xspace(space, graph, batch_size, vocabulary)
        conv1 = {op.name: op for op in trace.ops}[conv1_name(op_trace)]
        assert (conv1.output_bytes, conv1.output_shape, conv1.bytes_source) == want


def _space(plane_name: str, with_memory: bool):
    """A one-op XSpace built by hand."""
    space = proto.XSpace()
    plane = space.planes.add(name=plane_name)
    plane.event_metadata[1].CopyFrom(type(plane.event_metadata[1])(id=1, name="dense/Relu:Relu",
                                                                    display_name="Relu"))
    line = plane.lines.add(name="tf_Compute/1", timestamp_ns=1000)
    line.events.add(metadata_id=1, offset_ps=0, duration_ps=5_000_000)
    if with_memory:  # dense/Relu allocates 4096 B at 1 us; it is freed at 3 us
        plane.event_metadata[2].name = "MemoryAllocation"
        plane.event_metadata[3].name = "MemoryDeallocation"
        for stat_id, stat in enumerate(("bytes_allocated", "addr", "tf_op"), 1):
            plane.stat_metadata[stat_id].name = stat
        event = line.events.add(metadata_id=2, offset_ps=1_000_000)
        event.stats.add(metadata_id=1, int64_value=4096)
        event.stats.add(metadata_id=2, uint64_value=7)
        event.stats.add(metadata_id=3, str_value="dense/Relu:Relu")
        event = line.events.add(metadata_id=3, offset_ps=3_000_000)
        event.stats.add(metadata_id=1, int64_value=0)
        event.stats.add(metadata_id=2, uint64_value=7)
    return space


def test_no_allocation_events_says_so_and_still_gives_the_table():
    trace = xspace.reduce_xspace(_space("/host:CPU", with_memory=False))
    assert [(op.name, op.time_us) for op in trace.ops] == [("dense/Relu", 5.0)]
    assert (trace.peak_bytes, trace.timeline.t_us, trace.allocations) == (0, [], "none")
    assert "no allocation events" in trace.allocations_note


def test_unknown_device_plane_warns_and_is_skipped():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trace = xspace.reduce_xspace(_space("/custom:FPGA", with_memory=True))
    assert (len(trace.ops), trace.timeline.t_us) == (0, [])
    assert ["no TensorFlow op events" in str(w.message) for w in caught] == [True]


def test_hand_built_memory_events_make_the_timeline_named_by_op():
    trace = xspace.reduce_xspace(_space("/host:CPU", with_memory=True))
    # tf_op "node:Type" keeps the node; the free (no tf_op) names the op that allocated the address.
    assert trace.timeline.points() == [[1.0, 4096.0, "dense/Relu"], [3.0, 0.0, "dense/Relu"]]
    assert (trace.peak_bytes, trace.peak_time_us) == (4096, 1.0)


def test_eager_ops_are_rows_named_by_their_type(tmp_path):
    import tensorflow as tf

    x, kernel = tf.ones([1, 28, 28, 1]), tf.ones([5, 5, 1, 32])
    tf.profiler.experimental.start(str(tmp_path))
    for _ in range(3):
        tf.nn.relu(tf.nn.conv2d(x, kernel, 1, "SAME"))
    tf.profiler.experimental.stop()
    (path,) = glob.glob(str(tmp_path / "**" / "*.xplane.pb"), recursive=True)
    trace = xspace.reduce_xspace(xspace.load_xspace(path))
    rows = {op.name: op for op in trace.ops}
    assert [(rows[t].op_type, rows[t].calls, rows[t].time_us > 0) for t in ("Conv2D", "Relu")] == \
        [("Conv2D", 3, True), ("Relu", 3, True)]


def test_reading_a_profile_does_not_import_tensorflow(profiled):
    script = textwrap.dedent(f"""
        import sys
        from tb_modelmem.readers import xspace

        trace = xspace.reduce_xspace(xspace.load_xspace({profiled.path!r}))
        print(len(trace.ops) > 100, trace.steps, "tensorflow" in sys.modules)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["True", str(STEPS), "False"]


def test_events_without_metadata_are_read_from_their_own_stats_and_the_input_is_left_alone():
    """A device event may carry its tf_op stat itself and point at no event metadata (a
    truncated or merged profile); reducing must neither drop it nor add entries to the proto."""
    space = proto.XSpace()
    plane = space.planes.add(name="/device:GPU:0")
    plane.stat_metadata[1].name = "tf_op"
    event = plane.lines.add(name="stream", timestamp_ns=0).events.add(metadata_id=9, duration_ps=2_000_000)
    event.stats.add(metadata_id=1, str_value="dense/MatMul:MatMul")
    before = space.SerializeToString()
    trace = xspace.reduce_xspace(space)
    assert [(op.name, op.op_type, op.time_us, op.device) for op in trace.ops] == \
        [("dense/MatMul", "MatMul", 2.0, "/device:GPU:0")]
    assert space.SerializeToString() == before
