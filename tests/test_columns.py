"""Compact stored columns: they read back as the plain lists they stand for, old plain payloads
still read, and a hostile one is refused with its reason before it can expand."""

from __future__ import annotations

import json
import zlib

import pytest

from tb_modelmem import columns, metadata, payload
from tb_modelmem.records import MAX_DECODED_BYTES, OpRecord, OpTable, OpTrace, Timeline

NAMES = sorted(["model/dense/MatMul", "model/dense/BiasAdd", "model/dense_1/MatMul", "model/dense_1/Relu",
                "adam/Sub_10/ReadVariableOp", "adam/Sub_1/ReadVariableOp", "model", ""])


@pytest.mark.parametrize("form, values", [
    (columns.FRONT, NAMES),
    (columns.FRONT, ["b", "a", "ab", "abc", "a"]),  # any order reads back, sorted is only smaller
    (columns.DICTIONARY, ["float32", "int64", "float32", "", "float32"]),
    (columns.DELTA, [0, 4096, 4096, 1024, 2**40, 0]),
    (columns.DELTA, [8388608.0, 34930688.0, 0.0]),  # whole floats, as the replay adds them
])
def test_a_compact_column_reads_back_as_its_values(form, values):
    stored = json.loads(json.dumps(columns.encode(values, form)))
    assert isinstance(stored, dict)
    assert columns.decode(stored, MAX_DECODED_BYTES) == values


@pytest.mark.parametrize("form, values", [(columns.FRONT, ["a", 1]), (columns.DICTIONARY, [["x"], ["x"]]),
                                          (columns.DELTA, [1.5, 2.0])])
def test_values_a_form_cannot_hold_stay_a_plain_list(form, values):
    assert columns.encode(values, form) == values


def test_front_coding_stores_each_name_once_as_what_it_adds():
    stored = columns.encode(["model/dense/BiasAdd", "model/dense/MatMul", "model/dense_1/MatMul"], columns.FRONT)
    assert stored == {"shared": [0, 12, 11], "rest": ["model/dense/BiasAdd", "MatMul", "_1/MatMul"]}


@pytest.mark.parametrize("stored, reason", [
    ({"values": ["a"], "index": [0, 1]}, "index 1 is past its 1 values"),
    ({"values": ["a"], "index": [-1]}, "index must be >= 0"),
    ({"values": ["a"], "index": [True]}, "index must be a list of integers"),
    ({"values": ["a"], "index": [0.0]}, "index must be a list of integers"),
    ({"values": [1], "index": [0]}, "values must be a list of text"),
    ({"values": "a", "index": [0]}, "values must be a list of text"),
    ({"shared": [0, 4], "rest": ["abc", "d"]}, "item 1 shares 4 characters of a 3-character one"),
    ({"shared": [0], "rest": ["a", "b"]}, "1 shared lengths for 2 rests"),
    ({"shared": [0], "rest": [None]}, "rest must be a list of text"),
    ({"shared": [-1], "rest": ["a"]}, "shared must be >= 0"),
    ({"delta": [1, "2"]}, "delta must be a list of integers"),
    ({"delta": 5}, "delta must be a list of integers"),
    ({"index": [0]}, "an object with keys ['index']"),
    ("abc", "expected a list, got str"),
])
def test_a_malformed_compact_column_is_refused_with_its_reason(stored, reason):
    with pytest.raises(ValueError, match=reason.replace("[", r"\[").replace("]", r"\]")):
        columns.decode(stored, MAX_DECODED_BYTES)


def test_a_compact_column_that_would_expand_past_the_limit_is_refused_before_it_does():
    """A few kilobytes that would become gigabytes of names: the sum is checked, nothing is built."""
    long = "x" * 65_536
    bombs = [{"values": [long], "index": [0] * 200_000},
             {"shared": [0] + [65_535] * 200_000, "rest": [long] + ["y"] * 200_000}]
    for bomb in bombs:
        blob = zlib.compress(json.dumps({"schema": metadata.SCHEMA_VERSION, "kind": metadata.OPS, "data": {
            "source": "xspace", "ops": {"name": bomb, "op_type": [""] * 200_000}}}).encode())
        assert len(blob) < payload.MAX_PAYLOAD_BYTES
        with pytest.raises(payload.PayloadError, match=r"OpRecord\.name: .* expands past 134,217,728 characters"):
            payload.decode(blob)


def test_a_stored_trace_is_compact_and_a_plain_one_still_reads():
    rows = [OpRecord(name, "MatMul" if name.endswith("MatMul") else "Other", "model/dense", "/device:CPU:0",
                     time_us=1.5 + i, output_bytes=64 * i, output_dtype="float32") for i, name in enumerate(NAMES)]
    trace = OpTrace(source="xspace", ops=OpTable.by_name(reversed(rows)),
                    timeline=Timeline([0.0, 1.25, 2.5], [4096.0, 8192.0, 4096.0], ["", "a", "b"],
                                      {"activations": [0.0, 4096.0, 0.0]}))
    assert trace.ops.column("name") == NAMES  # readers keep rows in name order
    stored = json.loads(zlib.decompress(payload.encode(trace)))["data"]
    assert set(stored["ops"]["name"]) == {"shared", "rest"}
    assert set(stored["ops"]["device"]) == {"values", "index"}
    assert stored["timeline"]["bytes"] == {"delta": [4096, 4096, -4096]}
    assert stored["timeline"]["by_category"] == {"activations": {"delta": [0, 4096, -4096]}}
    assert payload.decode(payload.encode(trace)) == trace
    plain = zlib.compress(json.dumps({"schema": 2, "kind": metadata.OPS, "data": trace.to_dict()}).encode())
    assert payload.decode(plain) == trace
