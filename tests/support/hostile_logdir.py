"""A log dir of good runs beside every hostile item of issue 12, for tests/e2e/test_reliability.py
and benchmarks/bench_reliability.py: a payload whose kind disagrees with its metadata (one the
run's only breakdown), a shape of 10**4000, a rank-0 string tensor, a decompression bomb, a
100,000-character model name, a 5,000-character tag, a run name the Rust data server cannot put
in a blob key, a corrupt profile, a gzip-bomb memory profile and a truncated event file."""

from __future__ import annotations

import json
import os
import zlib
from typing import Any, Dict, Tuple

from tensorboard.compat.proto import summary_pb2, tensor_pb2, types_pb2

from tb_modelmem import summary
from tb_modelmem.readers.memory_profile import MAX_JSON_BYTES as MAX_MEMORY_PROFILE_JSON
from tb_modelmem.readers.run_metadata import reduce_run_metadata
from tb_modelmem.schema import metadata, payload
from tb_modelmem.schema.names import WEIGHT
from tb_modelmem.schema.records import Breakdown, VariableRecord
from tests.support.plugin_harness import write_events
from tests.support.trace_fixtures import synthetic_run_metadata

LONG_TAG = "t" * 5000  # a run name is a path, bounded by PATH_MAX (4096); a tag is not
QUOTED_RUN = 'run "quoted"'
BOMB_INFLATES_TO = payload.MAX_DECODED_BYTES + 2**20


def _breakdown(name: str = "model") -> Breakdown:
    return Breakdown(source="test", model_name=name, variables=[
        VariableRecord(name=f"{name}/dense/kernel", layer=f"{name}/dense", shape=[3, 4], dtype="float32", bytes=48,
                       role=WEIGHT)])


def _tensor_summary(tag: str, kind: str, tensor: tensor_pb2.TensorProto) -> summary_pb2.Summary:
    return summary_pb2.Summary(value=[summary_pb2.Summary.Value(
        tag=tag, metadata=metadata.create_summary_metadata(kind), tensor=tensor)])


def _blob_summary(tag: str, kind: str, blob: bytes) -> summary_pb2.Summary:
    """A well-formed summary of ``kind`` whose one blob is ``blob`` (whatever it holds)."""
    message = summary.pb(tag, _breakdown())
    message.value[0].metadata.CopyFrom(metadata.create_summary_metadata(kind))
    del message.value[0].tensor.string_val[:]
    message.value[0].tensor.string_val.append(blob)
    return message


def _doc_blob(kind: str, data: Dict[str, Any]) -> bytes:
    return zlib.compress(json.dumps({"schema": metadata.SCHEMA_VERSION, "kind": kind, "data": data}).encode())


def _huge_shape_blob() -> bytes:
    """A breakdown whose one variable has shape [10**4000, 10**4000] (valid JSON, no int64 can hold it)."""
    text = json.dumps({"schema": metadata.SCHEMA_VERSION, "kind": metadata.BREAKDOWN,
                       "data": _breakdown().to_dict()})
    text = text.replace("[3, 4]", f"[{10**4000}, {10**4000}]", 1)
    assert str(10**4000) in text, "the shape was not found in the payload's JSON"
    return zlib.compress(text.encode())


def _gzip_bomb(inflates_to: int) -> bytes:
    """A gzip file of white space: a few hundred KB that inflate to ``inflates_to`` bytes."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = b" " * 2**20
    return b"".join([deflate.compress(chunk) for _ in range(inflates_to // 2**20)] + [deflate.flush()])


def _bomb_blob() -> bytes:
    """A few hundred KB that inflate past the decoded-size limit."""
    deflate = zlib.compressobj(9)
    chunk = b" " * 2**20
    return b"".join([deflate.compress(chunk) for _ in range(BOMB_INFLATES_TO // 2**20)] + [deflate.flush()])


# (run, tag) -> the reason its 422 must give; routes are picked by the item's kind.
HOSTILE = {
    ("mixed", "storage"): "says it holds",  # metadata says breakdown, the payload holds an op trace
    ("mixed", "trace_says_ops"): "says it holds",  # metadata says ops, the payload holds a breakdown
    ("huge_shape", "storage"): "malformed breakdown",
    ("rank0", "storage"): "not a tb_modelmem summary",
    ("bomb", "storage"): "inflates past",
    ("long_model_name", "storage"): "malformed breakdown",
    ("corrupt_profile", "profile/session_1"): "xplane",
    ("bomb_profile", "profile/session_1"): "inflates past",
}
GOOD = {("good", "storage"), ("good", "ops"), ("mixed", "ops"), ("long_tag", LONG_TAG), ("truncated", "storage")}


def write_hostile_logdir(root: str) -> str:
    """Write the log dir into ``root`` (an empty folder); returns it."""
    trace = reduce_run_metadata(synthetic_run_metadata(200))
    write_events(os.path.join(root, "good"), [(1, summary.pb("storage", _breakdown())), (1, summary.pb("ops", trace))])
    write_events(os.path.join(root, "mixed"), [
        (1, _blob_summary("storage", metadata.BREAKDOWN, payload.encode(trace))),
        (1, _blob_summary("trace_says_ops", metadata.OPS, payload.encode(_breakdown()))),
        (1, summary.pb("ops", trace))])
    write_events(os.path.join(root, "huge_shape"),
                 [(1, _blob_summary("storage", metadata.BREAKDOWN, _huge_shape_blob()))])
    rank0 = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, string_val=[payload.encode(_breakdown())])
    write_events(os.path.join(root, "rank0"), [(1, _tensor_summary("storage", metadata.BREAKDOWN, rank0))])
    write_events(os.path.join(root, "bomb"), [(1, _blob_summary("storage", metadata.BREAKDOWN, _bomb_blob()))])
    long_name = _breakdown().to_dict()
    long_name["model_name"] = "m" * 100_000
    write_events(os.path.join(root, "long_model_name"),
                 [(1, _blob_summary("storage", metadata.BREAKDOWN, _doc_blob(metadata.BREAKDOWN, long_name)))])
    write_events(os.path.join(root, "long_tag"), [(1, summary.pb(LONG_TAG, _breakdown()))])
    write_events(os.path.join(root, QUOTED_RUN), [(1, summary.pb("storage", _breakdown()))])
    session = os.path.join(root, "corrupt_profile", "plugins", "profile", "session_1")
    os.makedirs(session)
    with open(os.path.join(session, "worker0.xplane.pb"), "wb") as f:
        f.write(b"\xff" * 4096)
    session = os.path.join(root, "bomb_profile", "plugins", "profile", "session_1")
    os.makedirs(session)
    with open(os.path.join(session, "worker0.memory_profile.json.gz"), "wb") as f:
        f.write(_gzip_bomb(MAX_MEMORY_PROFILE_JSON + 2**20))
    truncated = write_events(os.path.join(root, "truncated"),
                             [(s, summary.pb("storage", _breakdown())) for s in range(3)])
    with open(truncated, "r+b") as f:
        f.truncate(os.path.getsize(truncated) - 5)
    return root


def routes(kind: str) -> Tuple[str, ...]:
    """The routes the tab asks of an item of ``kind``."""
    return {"breakdown": ("/steps", "/breakdown", "/variables"),
            "ops": ("/steps", "/ops", "/op_rows", "/timeline", "/hosts")}.get(kind, ("/steps",))
