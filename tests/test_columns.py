"""Compact stored columns: they read back as the plain lists they stand for, old plain payloads
still read, and a hostile one is refused with its reason before it can expand."""

from __future__ import annotations

import json
import random
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
    assert columns.decode(stored, form, MAX_DECODED_BYTES) == values


@pytest.mark.parametrize("form, values", [(columns.FRONT, ["a", 1]), (columns.DICTIONARY, [["x"], ["x"]]),
                                          (columns.DELTA, [1.5, 2.0])])
def test_values_a_form_cannot_hold_stay_a_plain_list(form, values):
    assert columns.encode(values, form) == values


def test_front_coding_stores_each_name_once_as_what_it_adds():
    stored = columns.encode(["model/dense/BiasAdd", "model/dense/MatMul", "model/dense_1/MatMul"], columns.FRONT)
    assert stored == {"shared": [0, 12, 11], "rest": ["model/dense/BiasAdd", "MatMul", "_1/MatMul"]}


@pytest.mark.parametrize("form, stored, reason", [
    (columns.DICTIONARY, {"values": ["a"], "index": [0, 1]}, "index points past its 1 values"),
    (columns.DICTIONARY, {"values": ["a"], "index": [-1]}, "index holds an integer out of its range"),
    (columns.DICTIONARY, {"values": ["a"], "index": [10 ** 4000]}, "index holds an integer out of its range"),
    (columns.DICTIONARY, {"values": ["a"], "index": [True]}, "index must be a list of integers"),
    (columns.DICTIONARY, {"values": ["a"], "index": [0.0]}, "index must be a list of integers"),
    (columns.DICTIONARY, {"values": [1], "index": [0]}, "values must be a list of text"),
    (columns.DICTIONARY, {"values": "a", "index": [0]}, "values must be a list of text"),
    (columns.FRONT, {"shared": [0, 4], "rest": ["abc", "d"]}, "item 1 shares more characters than the item before"),
    (columns.FRONT, {"shared": [0], "rest": ["a", "b"]}, "1 shared lengths for 2 rests"),
    (columns.FRONT, {"shared": [0], "rest": [None]}, "rest must be a list of text"),
    (columns.FRONT, {"shared": [-1], "rest": ["a"]}, "shared holds an integer out of its range"),
    (columns.DELTA, {"delta": [1, "2"]}, "delta must be a list of integers"),
    (columns.DELTA, {"delta": 5}, "delta must be a list of integers"),
    (columns.DELTA, {"delta": [2 ** 62, 2 ** 62]}, "adds up past the int64 range"),
    (columns.DELTA, {"delta": [10 ** 5000]}, "delta holds an integer out of its range"),
    (columns.FRONT, {"values": ["a"], "index": [0]}, "expected a list or a front column"),  # another column's form
    (columns.DICTIONARY, {"x" * 1_000_000: []}, "expected a list or a dictionary column"),
    (columns.DICTIONARY, "abc", "expected a list or a dictionary column"),
])
def test_a_malformed_compact_column_is_refused_with_a_short_reason(form, stored, reason):
    with pytest.raises(ValueError, match=reason) as raised:
        columns.decode(stored, form, MAX_DECODED_BYTES)
    assert len(str(raised.value)) < 120  # no key, number or text of the payload is repeated in it


def _ops_payload(data: dict) -> bytes:
    blob = zlib.compress(json.dumps({"schema": metadata.SCHEMA_VERSION, "kind": metadata.OPS,
                                     "data": dict({"source": "xspace"}, **data)}).encode())
    assert len(blob) < payload.MAX_PAYLOAD_BYTES
    return blob


def test_a_compact_column_that_would_expand_past_the_limit_is_refused_before_it_does():
    """A few kilobytes that would become gigabytes of names: the sum is checked, nothing is built."""
    long = "x" * 65_536
    bombs = [{"values": [long], "index": [0] * 200_000},
             {"shared": [0] + [65_535] * 200_000, "rest": [long] + ["y"] * 200_000}]
    for column, bomb in zip(("op_type", "name"), bombs):
        other = "name" if column == "op_type" else "op_type"
        with pytest.raises(payload.PayloadError, match=rf"OpRecord\.{column}: a .* 134,217,728 characters; refused"):
            payload.decode(_ops_payload({"ops": {column: bomb, other: [""] * 200_001}}))


@pytest.mark.parametrize("where", [
    {"ops": [{"name": "a", "op_type": "MatMul", "fused": {"shared": [0], "rest": ["x" * 60_000]}}]},  # row form
    {"ops": {"name": ["a"], "op_type": ["MatMul"], "fused": {"values": [["x"]], "index": [0]}}},
    {"ops": {"name": ["a"], "op_type": ["MatMul"], "calls": {"delta": [1]}}},
    {"ops": {"name": ["a"], "op_type": {"shared": [0], "rest": ["MatMul"]}}},
    {"timeline": {"t_us": [0.0], "bytes": [1], "op": {"values": ["x" * 60_000], "index": [0]}}},
    {"timeline": {"t_us": [0.0], "bytes": [1], "by_category": {"c": {"values": ["x"], "index": [0]}}}},
])
def test_a_compact_form_is_read_only_in_the_columns_its_writer_puts_it_in(where):
    """Elsewhere it is a fault: so one payload expands at most its one front-coded column, and a
    hostile one cannot multiply that limit by writing the form into every field."""
    with pytest.raises(payload.PayloadError, match="expected a list|unexpected value"):
        payload.decode(_ops_payload(where))


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


def test_front_coding_finds_each_shared_prefix_whatever_the_characters_and_lengths():
    """The block comparison (arrays of code points) against the definition, character by character:
    NULs, astral characters, lone surrogates, a block boundary (4,096 items) and 70,000-character items."""
    def shared(a: str, b: str) -> int:
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n

    rng = random.Random(0)
    alphabet = "ab/\x00é😀\ud800"
    for size in (0, 1, 2, 40, 5_000):
        values = sorted("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8))) for _ in range(size))
        if size == 40:
            values += ["x" * 70_000, "x" * 69_999 + "y", "x" * 70_000]
        stored = columns.encode(values, columns.FRONT)
        assert stored["shared"] == [0] * bool(values) + [shared(a, b) for a, b in zip(values, values[1:])]
        assert columns.decode(stored, columns.FRONT, MAX_DECODED_BYTES) == values
