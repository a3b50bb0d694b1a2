"""Reduce a ``<host>.memory_profile.json.gz`` (the JSON form of the profiler's MemoryProfile,
written by TF 2.3-2.10; XProf no longer reads it) to an OpTrace. No TF.

It has the allocator's timeline (one snapshot per allocator event, with the bytes in use
after it), the peak and the allocations active at the peak (op, shape, dtype, region type),
but no op times: the trace is ``timed=False``. Each allocation is categorised by its op's
phase like every other source (``tb_modelmem.rules.join``, ``readers.allocator_replay``).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Tuple

from tb_modelmem.readers.allocator_replay import MAX_TIMELINE_POINTS
from tb_modelmem.readers.bounded import maybe_gunzip
from tb_modelmem.rules.buffers import step_category
from tb_modelmem.rules.join import Joiner, Vocabulary
from tb_modelmem.schema.names import BEFORE_WINDOW, MEASURED
from tb_modelmem.schema.records import BufferRecord, BufferTable, OpRecord, OpTable, OpTrace, Timeline

MAX_JSON_BYTES = 128 * 2**20  # a TF 2.3-2.10 step profile is a few MB; parsing this much already costs ~1 GiB


def reduce_memory_profile(data: bytes, vocabulary: Optional[Vocabulary] = None) -> OpTrace:
    """The OpTrace of a memory profile (gzip-compressed or plain JSON bytes). ValueError if it is not one."""
    doc = _load(data)
    per_allocator = doc.get("memoryProfilePerAllocator")
    if not isinstance(per_allocator, dict) or not per_allocator:
        raise ValueError("not a memory profile (no memoryProfilePerAllocator)")
    names = [str(_activity(s).get("tfOpName", "")) for a in per_allocator.values() if isinstance(a, dict)
             for s in _list(a, "memoryProfileSnapshots")]
    joiner = Joiner(vocabulary or Vocabulary([]), (), names)
    ops: Dict[Tuple[str, str], OpRecord] = {}
    buffers: List[BufferRecord] = []
    timelines: List[Tuple[str, List[Tuple[float, float, str]]]] = []
    allocators, peak_bytes, peak_time = [], 0, 0.0
    for allocator, profile in sorted(per_allocator.items()):
        if not isinstance(profile, dict):
            continue
        snapshots = _list(profile, "memoryProfileSnapshots")
        for snapshot in snapshots:
            _count_op(ops, joiner, _activity(snapshot), allocator)
        summary = _dict(profile, "profileSummary")
        peak_stats = _dict(summary, "peakStats")
        allocator_peak = _int(peak_stats.get("peakBytesInUse"))
        if allocator_peak >= peak_bytes:
            peak_bytes, peak_time = allocator_peak, _int(summary.get("peakStatsTimePs")) / 1e6
        buffers += _active(profile, snapshots, joiner)
        points = [(_int(s.get("timeOffsetPs")) / 1e6, _in_use(s), str(_activity(s).get("tfOpName", "")))
                  for s in _list(profile, "sampledTimelineSnapshots") or snapshots]
        timelines.append((allocator, points))
        in_use = [p[1] for p in points] or [allocator_peak]
        allocators.append({"name": allocator, "peak_bytes": max(allocator_peak, int(max(in_use))),
                           "min_bytes": int(min(in_use))})
    timeline, origin = _timeline(timelines)
    return OpTrace(source="memory_profile", ops=OpTable.by_name(ops.values()), peak_bytes=peak_bytes,
                   peak_time_us=max(peak_time - origin, 0.0), timeline=timeline, devices=sorted(per_allocator),
                   steps=1, counts_resident=True, timed=False, allocators=allocators,
                   peak_buffers=BufferTable.from_rows(sorted(buffers, key=lambda b: -b.bytes)),
                   allocations="all", layers=list(joiner.vocabulary.layers))


def _load(data: bytes) -> Dict[str, Any]:
    raw = maybe_gunzip(data, MAX_JSON_BYTES, "the memory profile's JSON")  # InspectError is a ValueError
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise ValueError("not JSON") from None
    if not isinstance(doc, dict):
        raise ValueError("not a memory profile (not a JSON object)")
    return doc


def _dict(obj: Dict[str, Any], key: str) -> Dict[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def _list(obj: Dict[str, Any], key: str) -> List[Dict[str, Any]]:
    value = obj.get(key)
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _activity(snapshot: Dict[str, Any]) -> Dict[str, Any]:
    value = snapshot.get("activityMetadata")
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int:
    """int64 fields are JSON strings in a MemoryProfile; anything unreadable counts as 0."""
    try:
        return max(int(value), 0)
    except (TypeError, ValueError):
        return 0


def _in_use(snapshot: Dict[str, Any]) -> float:
    stats = _dict(snapshot, "aggregationStats")
    return float(_int(stats.get("heapAllocatedBytes")) + _int(stats.get("stackReservedBytes")))


def _count_op(ops: Dict[Tuple[str, str], OpRecord], joiner: Joiner, activity: Dict[str, Any], allocator: str) -> None:
    name = str(activity.get("tfOpName") or "")
    if not name or activity.get("memoryActivity") != "ALLOCATION":
        return
    row = ops.get((name, allocator))
    if row is None:
        layer, phase = joiner.assign(name)
        row = ops[(name, allocator)] = OpRecord(name=name, op_type="", layer=layer, phase=phase, device=allocator,
                                                calls=0, time_us=0.0, bytes_source=MEASURED)
    row.calls += 1
    size = _int(activity.get("allocationBytes"))
    if size >= row.alloc_bytes:
        row.alloc_bytes = size
        if activity.get("regionType") == "output":
            row.output_bytes = _int(activity.get("requestedBytes"))
            row.output_shape = str(activity.get("tensorShape") or "")
            row.output_dtype = str(activity.get("dataType") or "")


def _active(profile: Dict[str, Any], snapshots: List[Dict[str, Any]], joiner: Joiner) -> List[BufferRecord]:
    """The allocations active at the peak: snapshots by index, and the profile's special
    allocations (memory held before the window, preallocated pools) as BEFORE_WINDOW."""
    special = _list(profile, "specialAllocations")
    out = []
    for entry in _list(profile, "activeAllocations"):
        index, special_index = _signed(entry.get("snapshotIndex")), _signed(entry.get("specialIndex"))
        times = max(_int(entry.get("numOccurrences")), 1)
        if 0 <= index < len(snapshots):
            activity, before = _activity(snapshots[index]), False
        elif 0 <= special_index < len(special):
            activity, before = special[special_index], True
        else:
            continue
        op = "" if before else str(activity.get("tfOpName") or "")
        region = str(activity.get("regionType") or "")
        category = BEFORE_WINDOW if before else step_category(joiner.assign(op)[1] if op else "", region)
        for _ in range(min(times, 10_000)):
            out.append(BufferRecord(op=op or str(activity.get("tfOpName") or ""),
                                    bytes=_int(activity.get("allocationBytes")),
                                    shape=str(activity.get("tensorShape") or ""),
                                    dtype=str(activity.get("dataType") or ""), region=region, category=category))
    return out


def _signed(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1


def _timeline(per_allocator: List[Tuple[str, List[Tuple[float, float, str]]]]) -> Tuple[Timeline, float]:
    """One timeline summing the allocators' bytes in use, at most MAX_TIMELINE_POINTS points,
    from 0 at its first event; and that event's time."""
    events = sorted((t, name, used, op) for name, points in per_allocator for t, used, op in points)
    current: Dict[str, float] = {}
    t_us, total, ops = [], [], []
    for t, name, used, op in events:
        current[name] = used
        t_us.append(t)
        total.append(sum(current.values()))
        ops.append(op)
    step = max(1, -(-len(t_us) // MAX_TIMELINE_POINTS))
    peak = {max(range(len(total)), key=total.__getitem__)} if total else set()
    keep = sorted(set(range(0, len(t_us), step)) | peak)
    origin = t_us[0] if t_us else 0.0
    return Timeline([t_us[i] - origin for i in keep], [total[i] for i in keep], [ops[i] for i in keep]), origin
