"""How a payload stores records compactly, and how older schemas' forms read back.

The forms of ``columns`` (front-coded names, dictionaries with runs, fixed-point times, deltas,
places in the op table) applied to a record's plain dict on the way out and undone, bounded, on
the way in; and schema 1's timeline points. A record type declares which of its columns take a
form (``codec.Record._front_coded``, ``_times``, ``_repeated``); nothing here knows a record type.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from tb_modelmem.schema import columns as forms
from tb_modelmem.schema.limits import MAX_DECODED_BYTES, is_number, preview

# A payload keeps times (an op's time, a timeline point's) to 1/TIME_PER_UNIT µs, 0.01 µs: the
# finest step the tab shows (times under 10 µs, to two decimals); the last digit of a time in ns
# cost a tenth of a ResNet50 trace's payload (README, bench_trace).
TIME_PER_UNIT = 100


def encode_column(values: list, form: Optional[str]) -> Any:
    """A column as a payload stores it in ``form`` (a plain list when None)."""
    if not form:
        return list(values)
    return forms.encode(values, form, TIME_PER_UNIT if form == forms.FIXED else None)


def decode_column(owner: str, name: str, stored: Any, form: str, base: Optional[list] = None,
                  rows: Optional[int] = None) -> list:
    """A stored column as its plain list (``columns.decode``); its error names ``owner.name``."""
    try:
        return forms.decode(stored, form, MAX_DECODED_BYTES, base, rows)
    except ValueError as e:
        raise ValueError(f"{owner}.{name}: {e}") from None


# A timeline's columns kept per category: bytes in use, and the parts of them that grow with the batch, with
# the batch and the sequence length, with the batch and the sequence length squared, and that a mixed policy
# leaves as traced or copies to float32 for the loss, or, of a mixed step, that its casts made; and what grows with
# the sequence alone, shaped like a position table (``schema.records.Timeline``).
PER_CATEGORY = ("by_category", "batch_by_category", "seq_by_category", "seq2_by_category", "kept_width_by_category",
                "loss_copy_by_category", "cast_copy_by_category", "rows_by_category")


def compact_timeline(out: Dict[str, Any]) -> None:
    """A timeline's plain dict, compacted in place: times and bytes in use as steps from the point
    before (they climb and fall in steps), times to 1/TIME_PER_UNIT µs."""
    out["t_us"] = forms.encode(out["t_us"], forms.DELTA, TIME_PER_UNIT)
    out["bytes"] = forms.encode(out["bytes"], forms.DELTA)
    for field in PER_CATEGORY:
        out[field] = {k: forms.encode(v, forms.DELTA) for k, v in out[field].items()}


def expand_timeline(data: Any) -> Any:
    """``data`` with ``t_us``, ``bytes`` and the per-category columns read back from ``compact_timeline``'s
    forms (plain lists pass as they are)."""
    if isinstance(data, dict) and "t_us" in data:
        data = dict(data, t_us=decode_column("Timeline", "t_us", data["t_us"], forms.DELTA))
    if isinstance(data, dict) and "bytes" in data:
        data = dict(data, bytes=decode_column("Timeline", "bytes", data["bytes"], forms.DELTA))
    for field in PER_CATEGORY:
        if isinstance(data, dict) and isinstance(data.get(field), dict):
            data = dict(data, **{field: {k: decode_column("Timeline", f"{field}[{preview(k)}]", v, forms.DELTA)
                                         for k, v in data[field].items()}})
    return data


# The parts of a trace whose ``op`` column names ops of its op table, and the record its errors name.
_OP_PLACES = (("timeline", "Timeline"), ("peak_buffers", "BufferRecord"))


def compact_op_places(out: Dict[str, Any], names: List[str]) -> None:
    """A trace's plain dict, with the op names of its timeline and peak buffers stored as places
    in its op table's ``names`` (``columns.EXTENDS``): they name its ops, already stored."""
    for part, _ in _OP_PLACES:
        out[part]["op"] = forms.encode(out[part]["op"], forms.EXTENDS, base=names)


def has_op_places(data: Any) -> bool:
    """True when a stored trace holds ``op`` columns as places in its op table."""
    return isinstance(data, dict) and "ops" in data and any(
        isinstance(data.get(part), dict) and isinstance(data[part].get("op"), dict) for part, _ in _OP_PLACES)


def expand_op_places(data: Dict[str, Any], names: List[str]) -> Dict[str, Any]:
    """``data`` with the ``op`` columns stored as places in the op table's ``names`` read as names."""
    data = dict(data)
    for part, owner in _OP_PLACES:
        stored = data.get(part)
        if isinstance(stored, dict) and isinstance(stored.get("op"), dict):
            data[part] = dict(stored, op=decode_column(owner, "op", stored["op"], forms.EXTENDS, names))
    return data


def timeline_from_points(points: List[Any]) -> Dict[str, Any]:
    """Schema 1's timeline, ``[[t_us, bytes_in_use, op?], ...]``, as the plain columns of today's."""
    for i, point in enumerate(points):
        if not (isinstance(point, list) and 2 <= len(point) <= 3 and is_number(point[0])
                and is_number(point[1]) and (len(point) == 2 or isinstance(point[2], str))):
            raise ValueError(f"OpTrace.timeline[{i}]: expected [t_us, bytes_in_use, op_name?], got {preview(point)}")
    return {"t_us": [p[0] for p in points], "bytes": [p[1] for p in points],
            "op": [p[2] if len(p) > 2 else "" for p in points], "by_category": {}}
