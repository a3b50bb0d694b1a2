"""Issue 30 item 10: a record built with the public records API and then changed is still written.

``trace.timeline = [[t, bytes, op], ...]`` after construction used to fail inside ``summary.pb`` with
``AttributeError: 'list' object has no attribute 'to_dict'``. A nested field is now converted when
it is assigned, as the constructor converts it; a value that cannot be one is refused at the
assignment, with the field's name and what it takes.
"""

import pytest

from tb_modelmem import summary
from tb_modelmem.schema import payload
from tb_modelmem.schema.names import ACTIVATIONS_CATEGORY, DERIVED, OPTIMIZER_SLOT, WEIGHT
from tb_modelmem.schema.records import (
    Breakdown,
    BufferRecord,
    Count,
    DeviceMemory,
    LayerRecord,
    LoadBench,
    LoadResult,
    MemorySample,
    OpRecord,
    OpTrace,
    Timeline,
    VariableRecord,
)

CONV1 = OpRecord(name="lenet/conv1/Conv2D", op_type="Conv2D", layer="lenet/conv1", time_us=812.5, output_bytes=100_352,
                 output_shape="[1,28,28,32]", output_dtype="float32", bytes_source=DERIVED, phase="forward")
RELU = OpRecord(name="lenet/conv1/Relu", op_type="Relu", layer="lenet/conv1", time_us=40.0, output_bytes=100_352,
                output_shape="[1,28,28,32]", output_dtype="float32", phase="forward")
POINTS = [[0.0, 0, ""], [12.0, 100_352, "lenet/conv1/Conv2D"], [40.0, 200_704, "lenet/conv1/Relu"]]
BUFFER = BufferRecord(op="lenet/conv1/Relu", bytes=100_352, shape="[1,28,28,32]", dtype="float32", region="output",
                      category=ACTIVATIONS_CATEGORY)
KERNEL = VariableRecord(name="lenet/conv1/kernel", layer="lenet/conv1", shape=[5, 5, 1, 32], dtype="float32",
                        bytes=3200, role=WEIGHT)
SLOT = VariableRecord(name="adam/m/lenet/conv1/kernel", layer="lenet/conv1", shape=[5, 5, 1, 32], dtype="float32",
                      bytes=3200, role=OPTIMIZER_SLOT, slot="m", slot_of="lenet/conv1/kernel")
CONV1_LAYER = LayerRecord(name="lenet/conv1", class_name="Conv2D", params=832, derivation="(5*5*1+1)*32 = 832")


def test_an_op_trace_changed_after_it_was_built_is_written_as_if_built_so():
    trace = OpTrace(source="xspace", ops=[CONV1], peak_bytes=100_352)
    trace.timeline = POINTS  # what the issue did
    trace.ops = [CONV1, RELU]
    trace.peak_buffers = [BUFFER]
    built = OpTrace(source="xspace", ops=[CONV1, RELU], peak_bytes=100_352, timeline=POINTS, peak_buffers=[BUFFER])
    assert isinstance(trace.timeline, Timeline) and trace.timeline.points() == POINTS
    assert summary.pb("ops", trace).SerializeToString() == summary.pb("ops", built).SerializeToString()
    decoded = payload.decode(payload.encode(trace))
    assert [op.name for op in decoded.ops] == ["lenet/conv1/Conv2D", "lenet/conv1/Relu"]
    assert decoded.timeline.points() == POINTS and decoded.peak_buffers[0].bytes == 100_352


def test_a_breakdown_and_the_list_records_changed_after_they_were_built_are_written():
    breakdown = Breakdown(source="keras", variables=[KERNEL])
    breakdown.variables = [KERNEL, SLOT]
    breakdown.layers = (layer for layer in [CONV1_LAYER])  # any iterable of rows, as the constructor takes
    built = Breakdown(source="keras", variables=[KERNEL, SLOT], layers=[CONV1_LAYER])
    assert summary.pb("storage", breakdown).SerializeToString() == summary.pb("storage", built).SerializeToString()

    bench = LoadBench(model_name="lenet", results=[])
    bench.results = [{"format": "keras", "mode": "compile=True", "file_bytes": 39_295_616, "load_seconds": 1.5}]
    assert bench.results == [LoadResult(format="keras", mode="compile=True", file_bytes=39_295_616, load_seconds=1.5)]
    sample = MemorySample(rss_bytes=1 << 30)
    sample.devices = [{"name": "GPU:0", "current_bytes": 1024, "peak_bytes": 2048}]
    sample.models = [Count(name="lenet", count=10, bytes=13_098_536)]
    assert payload.decode(payload.encode(bench)).results[0].file_bytes == 39_295_616
    decoded = payload.decode(payload.encode(sample))
    assert decoded.devices == [DeviceMemory(name="GPU:0", current_bytes=1024, peak_bytes=2048)]
    assert decoded.models[0].bytes == 13_098_536


@pytest.mark.parametrize("field, value, message", [
    ("timeline", "not a timeline",
     r"OpTrace\.timeline: expected a Timeline or a list of \[t_us, bytes, op\] points, got str"),
    ("timeline", [[0.0]], r"OpTrace\.timeline\[0\]: expected a \[t_us, bytes, op\] point, got \[0\.0\]"),
    ("ops", [CONV1, "lenet/conv1/Relu"], r"OpTrace\.ops\[1\]: expected an OpRecord \(or its dict\), got str"),
    ("ops", None, r"OpTrace\.ops: expected a list of OpRecord \(or an OpTable\), got NoneType"),
    ("peak_buffers", [CONV1], r"OpTrace\.peak_buffers\[0\]: expected a BufferRecord \(or its dict\), got OpRecord"),
])
def test_a_value_a_field_cannot_hold_is_refused_where_it_is_assigned(field, value, message):
    trace = OpTrace(source="xspace", ops=[CONV1])
    with pytest.raises(TypeError, match=message):
        setattr(trace, field, value)
    assert summary.pb("ops", trace) is not None  # the record is left as it was, and still written


def test_the_constructor_refuses_the_same_values_with_the_same_words():
    with pytest.raises(TypeError, match=r"Breakdown\.variables\[0\]: expected a VariableRecord \(or its dict\)"):
        Breakdown(source="keras", variables=["lenet/conv1/kernel"])
    with pytest.raises(TypeError, match=r"LoadBench\.results\[0\]: expected a LoadResult \(or its dict\), got str"):
        LoadBench(model_name="lenet", results=["keras"])
