"""Mutation test of the backend: real payloads, deterministically broken in many ways.

Every response is 200 (a sane view) or 422 with a readable one-line reason, never a 500
or a traceback, and a good run next to the broken ones keeps serving the same figures.
"""

from __future__ import annotations

import copy
import json
import os
import zlib
from typing import Any, Iterator, List, Optional, Tuple

import pytest
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from tb_modelmem import summary
from tb_modelmem.schema import metadata, payload
from tb_modelmem.schema.names import DERIVED, MEASURED, NON_TRAINABLE, OPTIMIZER_SLOT, PEAK_CATEGORIES, WEIGHT
from tb_modelmem.schema.records import Breakdown, LayerRecord, OpRecord, OpTrace, VariableRecord
from tests.support.plugin_harness import Served, write_events
from tests.support.trace_fixtures import synthetic_run_metadata

# Real figures: the seed-001 ConvNet's conv1 (5x5x1 -> 32) with Adam, and its forward output.
KERNEL_BYTES = 5 * 5 * 1 * 32 * 4  # 3,200 B
BIAS_BYTES = 32 * 4
CONV1_OUT_BYTES = 1 * 28 * 28 * 32 * 4  # 100,352 B


def _breakdown() -> Breakdown:
    kernel = VariableRecord("conv1/kernel", "conv1", [5, 5, 1, 32], "float32", KERNEL_BYTES, WEIGHT)
    bias = VariableRecord("conv1/bias", "conv1", [32], "float32", BIAS_BYTES, WEIGHT)
    slots = [VariableRecord(f"adam/conv1/{w.name.split('/')[1]}/{s}", "conv1", list(w.shape), "float32", w.bytes,
                            OPTIMIZER_SLOT, slot=s, slot_of=w.name) for w in (kernel, bias) for s in ("m", "v")]
    stats = VariableRecord("bn/moving_mean", "bn", [32], "float32", BIAS_BYTES, NON_TRAINABLE)
    return Breakdown(source="keras", variables=[kernel, bias, *slots, stats], model_name="seed001",
                     layers=[LayerRecord("conv1", "Conv2D", 832, "(5*5*1+1)*32 = 832")],
                     optimizer={"class_name": "Adam", "config": {"learning_rate": 0.001}}, file_bytes=20_000,
                     overhead=[{"what": "config.json", "bytes": 20_000 - 3 * (KERNEL_BYTES + BIAS_BYTES) - BIAS_BYTES}])


def _trace() -> OpTrace:
    conv = OpRecord("conv1/Conv2D", "_MklNativeFusedConv2D", "conv1", "/device:CPU:0", calls=2, time_us=310.5,
                    output_bytes=CONV1_OUT_BYTES, output_shape="[1,28,28,32]", output_dtype="float32",
                    bytes_source=MEASURED, alloc_bytes=CONV1_OUT_BYTES, fused=["Conv2D", "BiasAdd", "Relu"])
    read = OpRecord("conv1/ReadVariableOp", "ReadVariableOp", "conv1", "/device:CPU:0", time_us=1.0,
                    output_bytes=KERNEL_BYTES, output_shape="[5,5,1,32]", output_dtype="float32",
                    bytes_source=DERIVED)
    return OpTrace(source="run_metadata", ops=[conv, read], peak_bytes=CONV1_OUT_BYTES, peak_time_us=12.0,
                   timeline=[[0.0, 0, "start"], [12.0, CONV1_OUT_BYTES, "conv1/Conv2D"], [40.0, 0, "conv1/Conv2D"]],
                   devices=["/device:CPU:0"], steps=1)


# Valid JSON, wrong types or shapes: put at every key and list item of the payload's data.
WRONG_VALUES: List[Any] = [
    None, True, -1, 1.5, 1e300, -1e300, 2 ** 70, 10 ** 400, "NaN", "x" * 100_000, [], {}, [None], [[1]], [-1],
    [[[[[[[[[[1]]]]]]]]]],
]


def _paths(obj: Any, path: Tuple = ()) -> Iterator[Tuple]:
    """Every key and the first two items of every list, depth first."""
    if isinstance(obj, dict):
        items = list(obj.items())
    elif isinstance(obj, list):
        items = list(enumerate(obj[:2]))
    else:
        return
    for key, value in items:
        yield path + (key,)
        yield from _paths(value, path + (key,))


def _get(data: Any, path: Tuple) -> Any:
    for key in path:
        try:
            data = data[key]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _set(data: Any, path: Tuple, value: Any) -> Any:
    data = copy.deepcopy(data)
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


def _doc(kind: str, data: Any, schema: Any = metadata.SCHEMA_VERSION) -> bytes:
    return zlib.compress(json.dumps({"schema": schema, "kind": kind, "data": data}).encode())


def mutations(kind: str, record) -> Iterator[Tuple[str, bytes]]:
    """(description, blob) pairs: deterministic, each one fault."""
    data = record.to_dict()
    for path in _paths(data):
        for value in WRONG_VALUES:
            yield f"{'.'.join(map(str, path))} = {json.dumps(value)[:24]}", _doc(kind, _set(data, path, value))
    compact = record.to_dict(compact=True)  # as payload.encode stores it: its encoded columns broken too
    for path in _paths(compact):
        if _get(compact, path) != _get(data, path):
            for value in WRONG_VALUES:
                yield (f"compact {'.'.join(map(str, path))} = {json.dumps(value)[:24]}",
                       _doc(kind, _set(compact, path, value)))
    for path in _paths(data):  # negative and non-finite numbers where numbers belong
        numeric = ("calls", "bytes", "output_bytes", "alloc_bytes", "peak_bytes", "file_bytes", "params",
                   "replicas", "steps")
        if path[-1] in numeric or (len(path) >= 2 and path[-2] in numeric) or (len(path) >= 3 and path[-3] == "shape"):
            yield f"{'.'.join(map(str, path))} = -5", _doc(kind, _set(data, path, -5))
    text = json.dumps({"schema": 1, "kind": kind, "data": data})
    for field in ("time_us", "peak_time_us", "bytes", "peak_bytes", "file_bytes"):
        for literal in ("NaN", "Infinity", "-Infinity"):
            broken = text.replace(f'"{field}": ', f'"{field}": {literal}, "_was": ', 1)
            if broken != text:
                yield f"{field} = {literal}", zlib.compress(broken.encode())
            broken = text.replace(f'"{field}": [', f'"{field}": [{literal}, ', 1)  # an item of a column
            if broken != text:
                yield f"{field}[0] = {literal}", zlib.compress(broken.encode())
    blob = payload.encode(record)
    for n in (1, 2, 5, len(blob) // 3, len(blob) // 2, len(blob) - 4, len(blob) - 1):
        yield f"truncated to {n} B", blob[:n]
    for i in range(0, len(blob), max(1, len(blob) // 40)):
        for bit in (0x01, 0x80):
            flipped = bytearray(blob)
            flipped[i] ^= bit
            yield f"bit {bit:#x} of byte {i} flipped", bytes(flipped)
    deep = "[" * 100_000 + "]" * 100_000
    yield "data nested 100,000 deep", zlib.compress(f'{{"schema":1,"kind":"{kind}","data":{deep}}}'.encode())
    yield "optimizer/timeline nested 100,000 deep", zlib.compress(
        text.replace('"source": ', f'"_deep": {deep}, "source": ', 1).encode())
    for depth in (60, 500, 990):  # 990: close to the interpreter's recursion limit
        where = ("optimizer", "config") if kind == metadata.BREAKDOWN else ("ops", "fused", 0)
        text_with_hole = json.dumps({"schema": 1, "kind": kind, "data": _set(data, where, "<hole>")})
        yield f"free-form field nested {depth} deep", zlib.compress(
            text_with_hole.replace('"<hole>"', "[" * depth + "]" * depth).encode())
    for schema in (True, 1.0, "1", None, -1, 0):
        yield f"schema = {json.dumps(schema)}", _doc(kind, data, schema)
    for wrong_kind in ([], {}, None, 1):
        yield f"kind = {json.dumps(wrong_kind)}", zlib.compress(
            json.dumps({"schema": 1, "kind": wrong_kind, "data": data}).encode())
    yield "data is a list", _doc(kind, [data])
    yield "not JSON", zlib.compress(b"{'schema': 1}")
    yield "JSON not UTF-8", zlib.compress(json.dumps({"schema": 1, "kind": kind}).encode("utf-16"))


# plugin_data.content that is not {"version": <int >= 1>, "kind": <known kind>}
BAD_PLUGIN_CONTENT = [b"", b"\xff\xfe", b"null", b"[]", b'"breakdown"', b'{"kind": "breakdown"}',
                      b'{"version": true, "kind": "breakdown"}', b'{"version": -1, "kind": "breakdown"}',
                      b'{"version": 0, "kind": "breakdown"}', b'{"version": 1.5, "kind": "breakdown"}',
                      b'{"version": NaN, "kind": "breakdown"}', b'{"version": 1e300, "kind": "breakdown"}',
                      b'{"version": 1, "kind": ["breakdown"]}', b'{"version": 1, "kind": null}',
                      b'{"version": 1, "kind": "' + b"x" * 100_000 + b'"}', b"[" * 100_000]


def _blob_summary(tag: str, kind: str, blob: bytes, content: Optional[bytes] = None) -> summary_pb2.Summary:
    md = metadata.create_summary_metadata(kind)
    if content is not None:
        md.plugin_data.content = content
    tensor = tensor_pb2.TensorProto(
        dtype=types_pb2.DT_STRING, string_val=[blob],
        tensor_shape=tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=1)]))
    return summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, metadata=md, tensor=tensor)])


def _write_run_metadata(run_dir: str, tagged: List[Tuple[str, bytes]]) -> None:
    """Events as TF1 ``FileWriter.add_run_metadata`` writes them (TF-free writer)."""
    os.makedirs(run_dir, exist_ok=True)
    writer = EventFileWriter(run_dir)
    for step, (tag, raw) in enumerate(tagged):
        tagged_run_metadata = event_pb2.TaggedRunMetadata(tag=tag, run_metadata=raw)
        writer.add_event(event_pb2.Event(step=step, wall_time=1.0 + step, tagged_run_metadata=tagged_run_metadata))
    writer.close()


def _run_metadata_mutations() -> Iterator[Tuple[str, bytes]]:
    raw = synthetic_run_metadata(20).SerializeToString()
    yield "garbage", b"\xff\xff\xff not a proto"
    yield "empty", b""
    yield "a proto of no step stats", b"\x08\x01"
    for n in (1, 3, len(raw) // 2, len(raw) - 1):
        yield f"truncated to {n} B", raw[:n]
    for i in range(0, len(raw), max(1, len(raw) // 30)):
        flipped = bytearray(raw)
        flipped[i] ^= 0x80
        yield f"bit 0x80 of byte {i} flipped", bytes(flipped)


CASES = {}  # tag -> (route, description)


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Served:
    logdir = str(tmp_path_factory.mktemp("fuzz"))
    good = [(0, summary.pb("storage", _breakdown())), (0, summary.pb("ops", _trace()))]
    write_events(os.path.join(logdir, "good"), good)
    bad = list(good)
    for kind, route, record in ((metadata.BREAKDOWN, "/breakdown", _breakdown()), (metadata.OPS, "/ops", _trace())):
        for i, (what, blob) in enumerate(mutations(kind, record)):
            tag = f"{kind}_{i}"
            CASES[tag] = (route, what)
            bad.append((0, _blob_summary(tag, kind, blob)))
    for i, content in enumerate(BAD_PLUGIN_CONTENT):
        CASES[f"meta_{i}"] = ("/breakdown", f"plugin content {content[:40]!r}")
        bad.append((0, _blob_summary(f"meta_{i}", metadata.BREAKDOWN, payload.encode(_breakdown()), content)))
    write_events(os.path.join(logdir, "mutated"), bad)
    tagged = list(_run_metadata_mutations())
    for i, (what, _) in enumerate(tagged):
        CASES[f"rm_{i}"] = ("/ops", "RunMetadata " + what)
    _write_run_metadata(os.path.join(logdir, "old_tf1"), [(f"rm_{i}", raw) for i, (_, raw) in enumerate(tagged)])
    return Served(logdir)


def _run_of(tag: str) -> str:
    return "old_tf1" if tag.startswith("rm_") else "mutated"


def _good_figures(served: Served) -> Tuple[Any, Any]:
    storage = served.json("/breakdown", run="good", tag="storage")
    ops = served.json("/ops", run="good", tag="ops")
    return storage["totals"], {row["name"]: row["new_bytes"] for row in ops["ops"]["rows"]}


def test_the_mutations_are_many_and_the_good_run_is_right(served):
    assert len(CASES) > 500
    totals, new_bytes = _good_figures(served)
    assert totals == {WEIGHT: KERNEL_BYTES + BIAS_BYTES, NON_TRAINABLE: BIAS_BYTES,
                      OPTIMIZER_SLOT: 2 * (KERNEL_BYTES + BIAS_BYTES), "other": 0}
    assert new_bytes == {"conv1/Conv2D": CONV1_OUT_BYTES, "conv1/ReadVariableOp": 0}


def _sane(route: str, body: Any) -> bool:
    """A 200 holds figures that add up: no negative sizes or counts."""
    if route == "/breakdown":
        return (body["total_bytes"] == sum(body["totals"].values())
                and all(v["bytes"] >= 0 and v["params"] >= 0 for v in body["variables"]["rows"]))
    parts = body["peak_by_category"]
    return (parts["total"] == sum(parts[c] or 0 for c in PEAK_CATEGORIES)
            and all(op["calls"] >= 0 and (op["new_bytes"] or 0) >= 0 and op["time_us"] >= 0
                    for op in body["ops"]["rows"]))


def test_every_mutation_is_200_or_a_readable_422_and_the_rest_keeps_serving(served):
    expected = _good_figures(served)
    failures, refused = [], 0
    for tag, (route, what) in CASES.items():
        try:
            response = served.settled(route, run=_run_of(tag), tag=tag)
        except Exception as e:  # the test client re-raises what TensorBoard would turn into a 500
            failures.append(f"{what}: raised {type(e).__name__}: {e!s:.120}")
            continue
        text = response.get_data(as_text=True)
        if response.status_code == 422:
            refused += 1
            if "Traceback" in text or not text.strip() or len(text.strip().splitlines()) != 1:
                failures.append(f"{what}: unreadable 422 {text[:120]!r}")
        elif response.status_code == 200:
            body = json.loads(text)  # Respond turns non-finite numbers into null: the body is strict JSON
            try:
                sane = _sane(route, body)
            except (TypeError, KeyError) as e:
                sane = f"{type(e).__name__}: {e}"
            if sane is not True:
                failures.append(f"{what}: served as if it were valid ({sane})")
        else:
            failures.append(f"{what}: HTTP {response.status_code} {text[:120]!r}")
    assert not failures, "\n".join(failures[:40])
    assert refused > len(CASES) // 2  # most mutations are faults the backend must name
    assert _good_figures(served) == expected
    assert served.get("/runs").status_code == 200


@pytest.mark.parametrize("what, reason", [
    ("shape.0.0 = -5", "dimensions must be >= 0 (-1 for unknown)"),
    ("calls.0 = -5", "must be >= 0"),
    ("timeline.t_us = [[1]]", "Timeline.t_us"),
    ("bytes[0] = NaN", "finite"),
    ("truncated to 5 B", "corrupt or foreign"),
    ("data nested 100,000 deep", "nested"),
    ("free-form field nested 60 deep", "nested deeper than 32 levels"),
    ("free-form field nested 500 deep", "nested deeper than 32 levels"),
    ("free-form field nested 990 deep", "nested"),
])
def test_faults_are_named(served, what, reason):
    tags = [tag for tag, (_, w) in CASES.items() if w == what or w.endswith("." + what)]
    assert tags, what
    for tag in tags:
        response = served.settled(CASES[tag][0], run=_run_of(tag), tag=tag)
        assert response.status_code == 422, (what, response.get_data(as_text=True))
        assert reason in response.get_data(as_text=True), (what, response.get_data(as_text=True))


def test_bad_plugin_content_is_a_422_and_an_error_in_the_listing(served):
    listing = served.tags("mutated")
    for tag, (_, what) in CASES.items():
        if tag.startswith("meta_"):
            assert listing[("mutated", tag)]["error"], what
            response = served.settled("/breakdown", run="mutated", tag=tag)
            assert response.status_code == 422, (what, response.get_data(as_text=True))


def test_the_reason_names_the_item_of_a_long_list(served):
    (tag,) = [tag for tag, (_, w) in CASES.items() if w == "ops.calls.1 = -5"]
    text = served.settled("/ops", run="mutated", tag=tag).get_data(as_text=True)
    assert text.endswith("malformed ops payload: OpTrace.ops: OpRecord.calls[1]: must be >= 0, got -5"), text


@pytest.mark.parametrize("what", ["garbage", "empty", "a proto of no step stats", "truncated to 3 B"])
def test_run_metadata_garbage_is_a_422(served, what):
    (tag,) = [tag for tag, (_, w) in CASES.items() if w == "RunMetadata " + what]
    response = served.settled("/ops", run="old_tf1", tag=tag)
    assert response.status_code == 422, response.get_data(as_text=True)
    assert "cannot read this RunMetadata" in response.get_data(as_text=True)


def test_no_path_from_a_query_or_a_summary_is_opened(served, tmp_path, monkeypatch):
    """Paths in summaries (model_name, variable names, tags) and queries are data, never opened."""
    import builtins

    secret = tmp_path / "secret.txt"
    secret.write_text("never served")
    record = _breakdown()
    record.model_name, record.source = str(secret), f"file://{secret}"
    record.variables[0].name = record.variables[0].layer = str(secret)
    write_events(str(tmp_path / "logs" / "paths"), [(0, summary.pb(str(secret), record))])
    paths = Served(str(tmp_path / "logs"))
    opened = []
    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda file, *a, **k: opened.append(str(file)) or real_open(file, *a, **k))
    body = paths.json("/breakdown", run="paths", tag=str(secret))
    assert body["model_name"] == str(secret)
    for route in ("/breakdown", "/ops", "/loadbench", "/steps"):
        for run, tag in (("paths", str(secret)), (str(secret), str(secret)), ("../" * 8 + str(secret), "x")):
            assert paths.get(route, run=run, tag=tag).status_code in (200, 404), (route, run, tag)
    assert paths.get("/runs").status_code == 200
    assert opened == []
    paths.get("/index.js")  # the one file the backend reads, from its fixed allowlist: the probe sees it
    assert [os.path.basename(p) for p in opened] == ["index.js"]
    assert "never served" not in paths.get("/breakdown", run="paths", tag=str(secret)).get_data(as_text=True)


def test_from_dict_names_any_nesting_without_recursing():
    """Messages preview the bad value to a bounded depth: a 5,000-deep value is named, not a RecursionError."""
    deep: Any = []
    for _ in range(5_000):
        deep = [deep]
    data = _breakdown().to_dict()
    data["optimizer"] = {"class_name": "Adam", "config": {"schedule": deep}}
    with pytest.raises(ValueError, match="Breakdown.optimizer: nested deeper than 32 levels"):
        Breakdown.from_dict(data)
    data = _trace().to_dict()
    data["ops"]["fused"][0] = deep
    with pytest.raises(ValueError, match=r"OpTrace.ops: OpRecord.fused\[0\]: nested deeper than 32 levels"):
        OpTrace.from_dict(data)


def test_numbers_past_a_float_are_named_and_finite_extremes_are_kept():
    """JSON numbers are unbounded: an integer past a float's range is refused with its field named
    (it was an OverflowError, not a reason); finite floats whose sum overflows are still finite."""
    data = _trace().to_dict()
    data["ops"]["time_us"] = [1e308, 1e308]
    assert OpTrace.from_dict(data).ops.column("time_us") == [1e308, 1e308]
    data["ops"]["time_us"] = [10 ** 400, 1.0]
    with pytest.raises(ValueError, match=r"OpRecord.time_us\[0\]: an integer out of the int64 range"):
        OpTrace.from_dict(data)
    data = _trace().to_dict()
    data["peak_time_us"] = -(10 ** 400)
    with pytest.raises(ValueError, match=r"OpTrace.peak_time_us: an integer out of the int64 range"):
        OpTrace.from_dict(data)
    with pytest.raises(payload.PayloadError, match="time_us"):
        payload.decode(zlib.compress(json.dumps({"schema": 1, "kind": metadata.OPS, "data": data}).encode()))


def test_repeated_text_columns_keep_one_string_per_value():
    """A decoded trace holds one string per distinct op type, device, dtype...: json.loads makes one
    per row, which is most of a 200,000-op record's memory. The values are unchanged."""
    data = json.loads(json.dumps(_trace().to_dict()))  # decoded JSON: every string its own object
    devices = data["ops"]["device"]
    assert devices[0] is not devices[1]
    ops = OpTrace.from_dict(data).ops
    assert ops.column("device") == ["/device:CPU:0", "/device:CPU:0"]
    assert ops.column("device")[0] is ops.column("device")[1]
    assert ops.column("name") == ["conv1/Conv2D", "conv1/ReadVariableOp"]
