"""What the bad-input tests write: names that are markup, a good breakdown named so, and summaries
under the plugin's name holding any blobs (tests/unit/test_plugin_bad_input.py, the browser tests)."""

from __future__ import annotations

from tensorboard.compat.proto import summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2

from tb_modelmem.schema import metadata
from tb_modelmem.schema.names import WEIGHT
from tb_modelmem.schema.records import Breakdown, VariableRecord

XSS = "<img src=x onerror=alert(1)>"


def good_breakdown() -> Breakdown:
    """One weight whose layer and name are markup: served, it must stay text."""
    return Breakdown(source="test", variables=[
        VariableRecord(name=f"{XSS}/kernel", layer=XSS, shape=[3, 4], dtype="float32", bytes=48, role=WEIGHT)])


def raw_summary(tag: str, blobs, content: bytes = None) -> summary_pb2.Summary:
    """A summary under our plugin name with arbitrary blobs and plugin content."""
    md = metadata.create_summary_metadata(metadata.BREAKDOWN)
    if content is not None:
        md.plugin_data.content = content
    tensor = tensor_pb2.TensorProto(
        dtype=types_pb2.DT_STRING, string_val=blobs,
        tensor_shape=tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=len(blobs))]))
    return summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, metadata=md, tensor=tensor)])
