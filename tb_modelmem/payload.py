"""Encode records to the bytes stored in a summary, and decode them safely. No TF.

A payload is zlib-compressed JSON ``{"schema": N, "kind": K, "data": {...}}``.
Decoding never trusts its input: size limits against decompression bombs,
schema checks, and one ``PayloadError`` with a readable reason for any fault.
"""

from __future__ import annotations

import json
import zlib
from typing import Dict, Type, Union

from tb_modelmem import metadata
from tb_modelmem.records import MAX_DECODED_BYTES, Breakdown, LoadBench, MemorySample, OpTrace, Record, preview

RECORD_TYPES: Dict[str, Type[Record]] = {
    metadata.BREAKDOWN: Breakdown,
    metadata.OPS: OpTrace,
    metadata.LOADBENCH: LoadBench,
    metadata.MEMORY: MemorySample,
}
MAX_PAYLOAD_BYTES = 16 * 2**20  # stored (compressed) payload; what it may inflate to is MAX_DECODED_BYTES

Payload = Union[Breakdown, OpTrace, LoadBench, MemorySample]


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
    raw = json.dumps(doc, separators=(",", ":")).encode("utf-8")
    if len(raw) > MAX_DECODED_BYTES:  # what TensorBoard would refuse to read back is not written at all
        raise PayloadError(f"this {doc['kind']} is {len(raw):,} bytes of JSON, over the {MAX_DECODED_BYTES:,} "
                           "bytes the tab reads back; not written")
    blob = zlib.compress(raw, 6)
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
    try:
        inflater = zlib.decompressobj()
        raw = inflater.decompress(bytes(blob), MAX_DECODED_BYTES)
        if inflater.unconsumed_tail:
            raise PayloadError(f"payload inflates past {MAX_DECODED_BYTES:,} bytes (no real trace is that big); refused")
        doc = json.loads(raw.decode("utf-8"))
    except PayloadError:
        raise
    except RecursionError:  # "[[[[...": the stdlib parser recurses per level
        raise PayloadError("not a tb_modelmem payload (JSON nested too deep to parse)") from None
    except (zlib.error, UnicodeDecodeError, ValueError):
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
        return cls.from_dict(doc.get("data"))  # type: ignore[return-value]
    except (ValueError, TypeError) as e:
        raise PayloadError(f"malformed {doc['kind']} payload: {e}") from None
