"""The schemas shipped in tb_modelmem/proto read TensorFlow's files exactly as TensorFlow's own classes do."""

from __future__ import annotations

import subprocess
import sys

import pytest
from google.protobuf import descriptor

from tb_modelmem import proto

# Our field type -> TensorFlow's field types that share its wire encoding and value.
_SAME_WIRE = {
    descriptor.FieldDescriptor.TYPE_INT32: {descriptor.FieldDescriptor.TYPE_ENUM},  # DataType, Endianness
    descriptor.FieldDescriptor.TYPE_BYTES: {descriptor.FieldDescriptor.TYPE_MESSAGE},  # left serialized
}


def _tf_classes():
    from tensorflow.compiler.xla.service import hlo_pb2
    from tensorflow.core.protobuf import saved_model_pb2, tensor_bundle_pb2, trackable_object_graph_pb2
    from tensorflow.python.keras.protobuf import saved_metadata_pb2
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    return [(proto.XSpace, xplane_pb2.XSpace), (proto.BundleHeaderProto, tensor_bundle_pb2.BundleHeaderProto),
            (proto.BundleEntryProto, tensor_bundle_pb2.BundleEntryProto),
            (proto.TrackableObjectGraph, trackable_object_graph_pb2.TrackableObjectGraph),
            (proto.SavedModel, saved_model_pb2.SavedModel), (proto.SavedMetadata, saved_metadata_pb2.SavedMetadata),
            (proto.HloProto, hlo_pb2.HloProto)]


def _compare(ours, theirs, path, seen=None):
    """Every field we declare exists in TensorFlow's message with the same number and encoding (a
    message that holds itself, XLA's ShapeProto, is compared once)."""
    seen = set() if seen is None else seen
    if (ours.full_name, theirs.full_name) in seen:
        return []
    seen.add((ours.full_name, theirs.full_name))
    mismatches = []
    for field in ours.fields:
        other = theirs.fields_by_number.get(field.number)
        where = f"{path}.{field.name} = {field.number}"
        if other is None:
            mismatches.append(f"{where}: no such field in TensorFlow's {theirs.full_name}")
            continue
        if field.name != other.name:
            mismatches.append(f"{where}: TensorFlow calls it {other.name}")
        if field.type != other.type and other.type not in _SAME_WIRE.get(field.type, ()):
            mismatches.append(f"{where}: type {field.type} vs TensorFlow's {other.type}")
        if field.is_repeated != other.is_repeated:
            mismatches.append(f"{where}: repeated differs")
        if field.message_type is not None and other.message_type is not None:
            mismatches += _compare(field.message_type, other.message_type, where, seen)
    return mismatches


def test_shipped_schemas_match_tensorflow_field_for_field():
    pytest.importorskip("tensorflow")
    mismatches = []
    for ours, theirs in _tf_classes():
        mismatches += _compare(ours.DESCRIPTOR, theirs.DESCRIPTOR, ours.DESCRIPTOR.name)
    assert mismatches == []


def test_a_real_profile_parses_the_same_with_both_schemas(lenet_xplane_bytes):
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    ours, theirs = proto.XSpace.FromString(lenet_xplane_bytes), xplane_pb2.XSpace.FromString(lenet_xplane_bytes)
    assert ours.SerializeToString(deterministic=True) == theirs.SerializeToString(deterministic=True)
    assert sum(len(line.events) for plane in ours.planes for line in plane.lines) > 100


def test_compiled_descriptors_are_current():
    pytest.importorskip("grpc_tools")
    result = subprocess.run([sys.executable, "scripts/gen_protos.py", "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
