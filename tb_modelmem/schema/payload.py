"""Encode records to the bytes stored in a summary, and decode them safely. No TF.

A payload is zstd-compressed JSON ``{"schema": N, "kind": K, "data": {...}}`` (schema 1-3 wrote
zlib; both read). JSON goes through orjson, ~10x faster to write and 1.5x to read than the
stdlib's; text orjson refuses goes to the stdlib, so a payload with NaN or 10**400 in it is still
refused with its field named. Decoding never trusts its input: size limits against
decompression bombs, schema checks, and one ``PayloadError`` with a readable reason for any fault.
"""

from __future__ import annotations

import json
import zlib
from typing import Any, Dict, Type, Union, cast

import orjson
import zstandard

from tb_modelmem.schema import metadata
from tb_modelmem.schema.codec import Record
from tb_modelmem.schema.limits import MAX_DECODED_BYTES, preview
from tb_modelmem.schema.records import Breakdown, LoadBench, MemorySample, OomReport, OpTrace

RECORD_TYPES: Dict[str, Type[Record]] = {
    metadata.BREAKDOWN: Breakdown,
    metadata.OPS: OpTrace,
    metadata.LOADBENCH: LoadBench,
    metadata.MEMORY: MemorySample,
    metadata.OOM: OomReport,
}
MAX_PAYLOAD_BYTES = 16 * 2**20  # stored (compressed) payload; what it may inflate to is MAX_DECODED_BYTES
# zstd's level 12: a ResNet50 step's trace 2.06% of its .xplane.pb in ~3 ms, where zlib took 2.69%
# in ~6 ms and level 16+ (1.94%) ~15 ms (README, bench_trace).
ZSTD_LEVEL = 12
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

Payload = Union[Breakdown, OpTrace, LoadBench, MemorySample, OomReport]


class PayloadError(ValueError):
    """This payload cannot be read; the message says why."""


def kind_of(record: Record) -> str:
    for kind, cls in RECORD_TYPES.items():
        if isinstance(record, cls):
            return kind
    raise TypeError(f"not a payload record: {type(record).__name__}")


def encode(record: Record) -> bytes:
    """Compressed JSON bytes for one Breakdown, OpTrace or LoadBench."""
    doc = {"schema": metadata.SCHEMA_VERSION, "kind": kind_of(record), "data": record.to_dict(compact=True)}
    raw = _dumps(doc)
    if len(raw) > MAX_DECODED_BYTES:  # what TensorBoard would refuse to read back is not written at all
        raise PayloadError(f"this {doc['kind']} is {len(raw):,} bytes of JSON, over the {MAX_DECODED_BYTES:,} "
                           "bytes the tab reads back; not written")
    blob = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True).compress(raw)  # a flipped bit is a fault
    if len(blob) > MAX_PAYLOAD_BYTES:
        raise PayloadError(f"this {doc['kind']} is {len(blob):,} bytes compressed, over the {MAX_PAYLOAD_BYTES:,} "
                           "bytes the tab reads back; not written")
    return blob


def decode(blob: bytes) -> Payload:
    """The record in ``blob``; raises PayloadError with a one-line reason."""
    if not blob:
        raise PayloadError("empty payload")
    if len(blob) > MAX_PAYLOAD_BYTES:
        raise PayloadError(f"payload of {len(blob):,} bytes, over the {MAX_PAYLOAD_BYTES:,}-byte limit; refused")
    raw = inflate(blob)
    try:
        doc = _loads(raw)
    except RecursionError:  # "[[[[...": the stdlib parser recurses per level
        raise PayloadError("not a tb_modelmem payload (JSON nested too deep to parse)") from None
    except (UnicodeDecodeError, ValueError):
        raise PayloadError("not a tb_modelmem payload (corrupt or foreign bytes)") from None
    if not isinstance(doc, dict) or "schema" not in doc or "kind" not in doc:
        raise PayloadError("not a tb_modelmem payload (no schema/kind)")
    schema = doc["schema"]
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        raise PayloadError(f"invalid schema version {preview(schema)}")
    if not isinstance(doc["kind"], str):
        raise PayloadError(f"unknown payload kind {preview(doc['kind'])}")
    if schema > metadata.SCHEMA_VERSION:
        raise PayloadError(
            f"written by a newer tb_modelmem (schema {schema} > {metadata.SCHEMA_VERSION}); upgrade to read it"
        )
    cls = RECORD_TYPES.get(doc["kind"])
    if cls is None:
        raise PayloadError(f"unknown payload kind {preview(doc['kind'])}")
    try:
        return cast(Payload, cls.from_dict(doc.get("data")))
    except (ValueError, TypeError) as e:
        raise PayloadError(f"malformed {doc['kind']} payload: {e}") from None


def inflate(blob: bytes) -> bytes:
    """The JSON text of a payload: zstd (schema 4 on), else zlib (schemas 1-3); at most
    MAX_DECODED_BYTES, checked before anything that size is made (PayloadError past it)."""
    blob = bytes(blob)
    too_big = PayloadError(f"payload inflates past {MAX_DECODED_BYTES:,} bytes (no real trace is that big); refused")
    try:
        if blob.startswith(_ZSTD_MAGIC):
            size = zstandard.frame_content_size(blob)
            if size < 0:  # unknown: our writer always says it, so this is not ours
                raise PayloadError("not a tb_modelmem payload (a zstd frame that does not say its size)")
            if size > MAX_DECODED_BYTES:
                raise too_big
            return zstandard.ZstdDecompressor().decompress(blob)
        inflater = zlib.decompressobj()
        raw = inflater.decompress(blob, MAX_DECODED_BYTES)
        if inflater.unconsumed_tail:
            raise too_big
        return raw
    except (zlib.error, zstandard.ZstdError):
        raise PayloadError("not a tb_modelmem payload (corrupt or foreign bytes)") from None


def _dumps(doc: Dict[str, Any]) -> bytes:
    """Compact JSON; the stdlib's when orjson refuses (an int past 64 bits, a lone surrogate)."""
    try:
        return orjson.dumps(doc)
    except TypeError:
        return json.dumps(doc, separators=(",", ":")).encode("utf-8")


def _loads(raw: bytes) -> Any:
    """Parsed JSON; what orjson refuses (NaN, a lone surrogate, 10**400) the stdlib reads, and
    the record's checks then refuse it with its field named, as they always did."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw.decode("utf-8"))
