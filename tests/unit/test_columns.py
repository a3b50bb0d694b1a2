"""Compact stored columns: they read back as the plain lists they stand for, old plain payloads
still read, and a hostile one is refused with its reason before it can expand."""

from __future__ import annotations

import json
import random
import zlib

import pytest

from tb_modelmem.schema import columns, metadata, payload
from tb_modelmem.schema.limits import MAX_DECODED_BYTES
from tb_modelmem.schema.records import OpRecord, OpTable, OpTrace, Timeline

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


@pytest.mark.parametrize("form, values", [(columns.FIXED, [1.0, float("nan")]), (columns.FIXED, [float("inf")]),
                                          (columns.FIXED, [2.0**70]), (columns.DELTA, [0.5, "1"]),
                                          (columns.FIXED, [True])])
def test_numbers_a_resolution_cannot_hold_stay_a_plain_list(form, values):
    assert columns.encode(values, form, per_unit=100) == values


def test_times_are_kept_to_their_resolution_and_read_back_as_floats():
    """0.01 µs: 12.344 µs is stored as 1234 hundredths and reads back as 12.34; steps too."""
    times = [0.004, 12.344, 12.345001, 1_000_000.0, 0.0]
    fixed = columns.encode(times, columns.FIXED, per_unit=100)
    assert fixed == {"per_unit": 100, "units": [0, 1234, 1235, 100_000_000, 0]}
    assert columns.decode(json.loads(json.dumps(fixed)), columns.FIXED, MAX_DECODED_BYTES) == [
        0.0, 12.34, 12.35, 1_000_000.0, 0.0]
    steps = columns.encode([0.0, 4301.349, 4301.351, 6019.733], columns.DELTA, per_unit=100)
    assert steps == {"delta": [0, 430135, 0, 171838], "per_unit": 100}
    assert columns.decode(steps, columns.DELTA, MAX_DECODED_BYTES) == [0.0, 4301.35, 4301.35, 6019.73]


def test_rows_that_repeat_the_row_before_are_stored_as_runs():
    layers = ["conv", "conv", "conv", "dense", "dense", "conv", "", ""]
    stored = columns.encode(layers, columns.DICTIONARY)
    assert stored == {"values": ["conv", "dense", ""], "index": [0, 1, 0, 2], "runs": [3, 2, 1, 2]}
    assert columns.decode(stored, columns.DICTIONARY, MAX_DECODED_BYTES, rows=8) == layers
    assert columns.encode(["a", "b", "a", "b"], columns.DICTIONARY) == {"values": ["a", "b"], "index": [0, 1, 0, 1]}


@pytest.mark.parametrize("stored, rows, reason", [
    ({"values": ["a"], "index": [0], "runs": [10 ** 12]}, 3, "add up to 1,000,000,000,000 rows, not its table's 3"),
    ({"values": ["a"], "index": [0], "runs": [3]}, None, "needs another column that says the table's length"),
    ({"values": ["a"], "index": [0], "runs": [2 ** 23]}, 2 ** 23, "stands for more than 4,194,304 rows; refused"),
    ({"values": ["a"], "index": [0], "runs": [0, 3]}, 3, "runs holds an integer out of its range"),
    ({"values": ["a"], "index": [0, 0], "runs": [3]}, 3, "2 values for 1 runs"),
    ({"values": ["a"], "index": [1], "runs": [3]}, 3, "index points past its 1 values"),
])
def test_a_run_length_column_reads_back_only_as_long_as_its_table(stored, rows, reason):
    """Ten bytes of runs could otherwise stand for a trillion rows."""
    with pytest.raises(ValueError, match=reason):
        columns.decode(stored, columns.DICTIONARY, MAX_DECODED_BYTES, rows=rows)


def test_a_table_of_run_length_columns_only_is_refused():
    with pytest.raises(payload.PayloadError, match="needs another column that says the table's length"):
        payload.decode(_ops_payload({"ops": {"op_type": {"values": ["a"], "index": [0], "runs": [10 ** 9]}}}))


def test_a_column_of_another_columns_values_stores_places_in_it():
    names = ["a/MatMul", "a/Relu", "b/MatMul", "a/Relu"]  # a repeated name: its first place
    stored = columns.encode(["b/MatMul", "", "a/Relu", "", "gone"], columns.EXTENDS, base=names)
    assert stored == {"more": ["", "gone"], "index": [2, 4, 1, 4, 5]}
    assert columns.decode(stored, columns.EXTENDS, MAX_DECODED_BYTES, names) == ["b/MatMul", "", "a/Relu", "", "gone"]


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
    (columns.FIXED, {"units": [1, 2.5], "per_unit": 100}, "units must be a list of integers"),
    (columns.FIXED, {"units": [1], "per_unit": 0}, "per_unit must be an integer from 1 to"),
    (columns.FIXED, {"units": [1], "per_unit": 10 ** 30}, "per_unit must be an integer from 1 to"),
    (columns.FIXED, {"units": [1], "per_unit": True}, "per_unit must be an integer from 1 to"),
    (columns.FIXED, {"units": [1]}, "expected a list or a fixed column"),
    (columns.DELTA, {"delta": [1], "per_unit": "100"}, "per_unit must be an integer from 1 to"),
    (columns.EXTENDS, {"more": [1], "index": [0]}, "more must be a list of text"),
    (columns.EXTENDS, {"more": ["x"], "index": [1]}, "index points past its 1 values"),
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
    {"ops": {"name": ["a"], "op_type": ["MatMul"], "calls": {"units": [1], "per_unit": 1}}},
    {"ops": {"name": ["a"], "op_type": ["MatMul"], "layer": {"more": ["x"], "index": [0]}}},
    {"timeline": {"t_us": {"units": [0], "per_unit": 100}, "bytes": [1]}},
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
                    timeline=Timeline([0.0, 1.25, 2.5], [4096.0, 8192.0, 4096.0], ["", "model/dense/MatMul", "gone"],
                                      {"activations": [0.0, 4096.0, 0.0]}))
    assert trace.ops.column("name") == NAMES  # readers keep rows in name order
    stored = json.loads(payload.inflate(payload.encode(trace)))["data"]
    assert set(stored["ops"]["name"]) == {"shared", "rest"}
    assert stored["ops"]["device"] == {"values": ["/device:CPU:0"], "index": [0], "runs": [len(NAMES)]}
    assert stored["ops"]["time_us"] == {"per_unit": 100, "units": [150 + 100 * i for i in range(len(NAMES))]}
    assert stored["timeline"]["t_us"] == {"delta": [0, 125, 125], "per_unit": 100}
    # the timeline's ops are places in the op table, or names after its names
    assert stored["timeline"]["op"] == {"more": ["gone"],
                                        "index": [NAMES.index(""), NAMES.index("model/dense/MatMul"), len(NAMES)]}
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


def test_a_zstd_payload_that_would_inflate_past_the_limit_is_refused_before_it_does():
    """Its frame says how big it is: 300 MiB of zeros in 10 KB is refused from the header alone."""
    import tracemalloc

    import zstandard

    bomb = zstandard.ZstdCompressor(level=3).compress(b" " * (300 * 2**20))
    assert len(bomb) < 20_000
    tracemalloc.start()
    try:
        with pytest.raises(payload.PayloadError, match="inflates past 134,217,728 bytes"):
            payload.decode(bomb)
        assert tracemalloc.get_traced_memory()[1] < 2**20  # nothing that size was made
    finally:
        tracemalloc.stop()
    unsized = zstandard.ZstdCompressor(write_content_size=False).compress(b"{}")
    with pytest.raises(payload.PayloadError, match="does not say its size"):
        payload.decode(unsized)


def test_a_payload_is_zstd_with_a_checksum_and_zlib_payloads_still_read():
    trace = OpTrace(source="xspace", ops=OpTable.by_name([OpRecord("a", "MatMul", time_us=2.5)]))
    blob = payload.encode(trace)
    assert blob[:4] == b"\x28\xb5\x2f\xfd"
    flipped = bytearray(blob)
    flipped[len(blob) // 2] ^= 0x10
    with pytest.raises(payload.PayloadError, match="corrupt or foreign bytes"):
        payload.decode(bytes(flipped))
    schema3 = zlib.compress(json.dumps({"schema": 3, "kind": metadata.OPS, "data": trace.to_dict()}).encode())
    assert payload.decode(schema3) == payload.decode(blob) == trace
