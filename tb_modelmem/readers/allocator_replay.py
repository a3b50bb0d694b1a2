"""What is in use over a trace and at its peak, buffer by buffer, by category. No TF.

Both reducers (RunMetadata step stats, TF2 profiler XSpace) turn their allocator records into
``Event``s and replay them here, so a byte is categorised the same way whatever recorded it:
an allocation is an activation, a gradient, an optimizer temporary, an input or a temporary
according to the phase of the op that made it and its region (``rules.buffers.step_category``). A free
of a buffer allocated before the trace window is that buffer seen for the first time: it was
in use from the window's start until then.
"""

from __future__ import annotations

import dataclasses
import re
from typing import AbstractSet, Any, Dict, Hashable, Iterable, List, Optional, Sequence, Set, Tuple

from tb_modelmem.rules.buffers import CAST_COPY, KEEPS_WIDTH, LOSS_COPY
from tb_modelmem.schema.compaction import PER_CATEGORY
from tb_modelmem.schema.names import (
    BEFORE_WINDOW,
    MEASURED,
    MOVED_STATE,
    STEP_CATEGORIES,
)
from tb_modelmem.schema.records import BufferRecord, Timeline

MAX_TIMELINE_POINTS = 2000
_DEVICE_ALLOCATOR = re.compile(r"^(GPU|TPU)_(\d+)_bfc$", re.IGNORECASE)  # an accelerator's: "GPU_0_bfc"
# The ops that write a variable, and may write it into a new buffer (copy-on-write, while its old value is
# still read): "StatefulPartitionedCall/adam/AssignSubVariableOp_2", "ResourceApplyAdam".
_ASSIGNS = re.compile(r"(?:^|/)(?:Assign\w*VariableOp|ResourceApply\w+|ResourceScatter\w+)(?:_\d+)?$")


@dataclasses.dataclass
class Event:
    """One allocator record: an allocation (``delta`` > 0) or a free (``delta`` < 0) of ``key``."""

    t_us: float
    delta: int
    key: Hashable  # which buffer: (allocator, address), or the node for per-node records
    op: str = ""  # the op that allocated it ("" for a free: replay names the allocating op)
    category: str = ""  # a free's category says what a buffer allocated before the window was, if known
    shape: str = ""
    dtype: str = ""
    region: str = ""
    allocator: str = ""
    requested: int = 0  # the bytes asked for (``delta`` is what the allocator handed out)
    batch: bool = False  # the buffer carries the step's batch dimension (``rules.buffers.carries_batch``)
    seq: int = 0  # and its sequence length this many times (``rules.buffers.sequence_power``)
    rows: bool = False  # shaped like a position table: grows with the sequence, no batch (``OpTrace.position_tables``)
    mixed: str = ""  # what it is under a mixed policy besides 16-bit (``rules.buffers.under_mixed_policy``)
    in_use: Optional[float] = None  # the allocator's own count after the event, when it reports one
    lifetime_peak: Optional[float] = None  # the allocator's high-water mark since it started
    fragmentation: Optional[float] = None  # the allocator's own figure after the event (BFC: 0..1), if it reports one
    reserved: Optional[float] = None  # a caching allocator's device memory after it (torch's "Total Reserved")


@dataclasses.dataclass
class Replay:
    timeline: Timeline
    peak_bytes: int
    peak_time_us: float
    peak_buffers: List[BufferRecord]
    allocators: List[Dict[str, Any]] = dataclasses.field(default_factory=list)  # name, peak_bytes, min_bytes


@dataclasses.dataclass
class _Live:
    bytes: int
    op: str
    category: str
    shape: str
    dtype: str
    region: str
    batch: bool = False
    seq: int = 0
    mixed: str = ""
    requested: int = 0  # what the buffer's allocation asked for (0: not recorded)
    rows: bool = False

    @property
    def parts(self) -> Tuple[str, ...]:
        """The Timeline columns its bytes count in (``_Columns``): none once it is a variable's (``_moves``)."""
        if self.category == MOVED_STATE:
            return ()
        if not self.batch:
            return ("by_category", "rows_by_category") if self.rows else ("by_category",)
        return _BATCH_PARTS[self.seq] + _MIXED_PARTS.get(self.mixed, ())


# The per-category columns a batch-carrying buffer's bytes count in, by the times it carries the sequence,
# and by what it is under a mixed policy.
_BATCH_PARTS = {0: ("by_category", "batch_by_category"),
                1: ("by_category", "batch_by_category", "seq_by_category"),
                2: ("by_category", "batch_by_category", "seq2_by_category")}
_MIXED_PARTS = {KEEPS_WIDTH: ("kept_width_by_category",), LOSS_COPY: ("loss_copy_by_category",),
                CAST_COPY: ("cast_copy_by_category",)}


class _Columns:
    """Bytes in use now by category, and the parts that carry the batch and the sequence (``PER_CATEGORY``),
    with each point's figures appended as the replay goes. A part's columns start (zeros before) when a
    buffer first counts in it: a trace with no batch or sequence known keeps one set of columns, not four."""

    def __init__(self, categories: Sequence[str]) -> None:
        self.now = {field: dict.fromkeys(categories, 0.0) for field in PER_CATEGORY}
        self.points: Dict[str, Dict[str, List[float]]] = {"by_category": {c: [] for c in categories}}
        self.count = 0

    def add(self, buffer: _Live, size: float) -> None:
        for field in buffer.parts:
            now = self.now[field]
            now[buffer.category] = now.get(buffer.category, 0.0) + size
            if field not in self.points:
                self.points[field] = {c: [0.0] * self.count for c in now}

    def shift(self, category: str, size: float) -> None:
        """``size`` bytes more in ``category``'s own column, owned by no buffer (``MOVED_STATE``'s)."""
        self.now["by_category"][category] = self.now["by_category"].get(category, 0.0) + size

    def point(self) -> None:
        self.count += 1
        for field, columns in self.points.items():
            now = self.now[field]
            for category, values in columns.items():  # a moved variable's chunk may be smaller than its old one
                values.append(now[category] if category == MOVED_STATE else max(now[category], 0.0))


def headline_allocators(names: Iterable[str]) -> Optional[Set[str]]:
    """The allocators a step's peak is counted on: one accelerator's (the lowest-numbered) when the
    profile has one, never added to host memory (pinned host buffers included); None: all of
    them, a host's."""
    devices = [(int(found.group(2)), name) for name in names for found in [_DEVICE_ALLOCATOR.match(name)] if found]
    return {min(devices)[1]} if devices else None


def replay(events: Sequence[Event], origin_us: float = 0.0, headline: Optional[AbstractSet[str]] = None) -> Replay:
    """Bytes in use after each event (by category), the peak, and every buffer in use at it.

    Events carrying ``in_use`` count what their allocator reports (memory allocated before the
    window included); others count from 0 at the window's start. Frees tie-break before
    allocations at the same instant, so a tie does not inflate the peak. ``headline``: the
    allocators whose memory this is (``headline_allocators``; None: every one); each allocator's
    own extremes are listed either way, with whether it is counted.
    """
    everything = sorted(events, key=lambda e: (e.t_us, e.delta))
    ordered = everything if headline is None else [e for e in everything if e.allocator in headline]
    moves = _moves(ordered)
    before = _allocated_before(ordered, moves)
    live: Dict[Hashable, _Live] = {}
    columns = _Columns(tuple(dict.fromkeys(STEP_CATEGORIES + (BEFORE_WINDOW, MOVED_STATE)
                                           + tuple(b.category for b in before.values()))))
    for b in before.values():
        columns.add(b, b.bytes)
    allocators: Dict[str, float] = {}  # allocator -> bytes in use now
    first_peak: Dict[str, float] = {}
    counted = 0.0
    t_us: List[float] = []
    total: List[float] = []
    ops: List[str] = []
    peak, peak_index, lifetime_rose = -1.0, -1, 0.0
    for index, event in enumerate(ordered):
        entry = live.get(event.key)
        if event.delta > 0:
            if entry is None:
                entry = live[event.key] = _Live(0, event.op, event.category, event.shape, event.dtype, event.region,
                                                event.batch, event.seq, event.mixed, rows=event.rows)
            entry.bytes += event.delta
            columns.add(entry, event.delta)
            op = entry.op
        else:
            freed = -event.delta
            if entry is not None:
                take = min(freed, entry.bytes)
                entry.bytes -= take
                columns.add(entry, -take)
                op = entry.op
                if entry.bytes <= 0:
                    del live[event.key]
            else:
                pre = before.pop(event.key, None)
                if pre is not None:
                    columns.add(pre, -pre.bytes)
                op = ""
        moved = live.get(ordered[moves[index]].key) if index in moves else None
        if moved is not None:  # a variable's new buffer, its old one just freed: resident state from now
            columns.add(moved, -moved.bytes)
            moved.category = MOVED_STATE
            columns.shift(MOVED_STATE, moved.bytes + event.delta)  # its chunk's size past the old one's
        counted += event.delta
        allocators[event.allocator] = _in_use_after(event, allocators)
        now = sum(allocators.values()) if event.in_use is not None else counted
        if event.lifetime_peak is not None:
            first_peak.setdefault(event.allocator, event.lifetime_peak)
            if event.lifetime_peak > first_peak[event.allocator]:  # the true peak happened in the window
                lifetime_rose = max(lifetime_rose, event.lifetime_peak)
        t_us.append(event.t_us - origin_us)
        total.append(float(now))
        ops.append(op)
        columns.point()
        if now > peak:
            peak, peak_index = now, len(total) - 1
    if peak_index < 0:
        return Replay(Timeline(), 0, 0.0, [])
    buffers = _in_use_at(ordered, peak_index, moves)
    peak_bytes = int(max(peak, lifetime_rose))
    timeline = _timeline(t_us, total, ops, columns.points, downsample(total, peak_index))
    return Replay(timeline, peak_bytes, round(t_us[peak_index], 6), buffers, _extremes(everything, headline))


def _timeline(t_us: List[float], total: List[float], ops: List[str], columns: Dict[str, Dict[str, List[float]]],
              keep: List[int]) -> Timeline:
    """The replay's points at ``keep`` (``downsample``), categories that never held a byte left out."""
    # to the picosecond, the profiler's unit: what a float subtraction adds past it is noise that costs bytes
    parts: Dict[str, Any] = {field: {c: [v[i] for i in keep] for c, v in per_category.items() if any(v)}
                             for field, per_category in columns.items()}
    return Timeline([round(t_us[i], 6) for i in keep], [total[i] for i in keep], [ops[i] for i in keep], **parts)


def _in_use_after(event: Event, in_use: Dict[str, float]) -> float:
    """What the event's allocator holds after it: its own count when it reports one, else what it
    held before (from the count before its first event in the window, or 0) plus the event."""
    if event.in_use is not None:
        return event.in_use
    return in_use.get(event.allocator, 0.0) + event.delta


def _extremes(ordered: Sequence[Event], headline: Optional[AbstractSet[str]]) -> List[Dict[str, Any]]:
    """Each allocator's lowest and highest bytes in use over the window (from what it held before
    its first event), whether the step's figures count it, and where it reports them, its fragmentation
    and what it held reserved at its highest point (a caching allocator's: what it holds beyond the tensors
    in use is its fragmentation there) and at most."""
    in_use: Dict[str, float] = {}
    extremes: Dict[str, List[float]] = {}
    at_peak: Dict[str, Dict[str, Any]] = {}  # allocator -> what it reported at its highest point
    most_reserved: Dict[str, float] = {}
    for event in ordered:
        if event.allocator not in in_use:  # what it held before the window's first event
            in_use[event.allocator] = (event.in_use - event.delta) if event.in_use is not None else 0.0
            extremes[event.allocator] = [in_use[event.allocator]] * 2
        now = in_use[event.allocator] = _in_use_after(event, in_use)
        low_high = extremes[event.allocator]
        low_high[0] = min(low_high[0], now)
        if event.reserved is not None:
            most_reserved[event.allocator] = max(most_reserved.get(event.allocator, 0.0), event.reserved)
        if now >= low_high[1]:  # what it reported there, worked out only at a new high (the replay's hot loop)
            reported = _reported(event, now)
            if now > low_high[1] or reported:
                at_peak[event.allocator] = reported
        low_high[1] = max(low_high[1], now)
    return [{"name": name, "peak_bytes": int(high), "min_bytes": int(low), **at_peak.get(name, {}),
             **({"max_reserved_bytes": int(most_reserved[name])} if name in most_reserved else {}),
             **({} if headline is None else {"counted": name in headline})}
            for name, (low, high) in sorted(extremes.items())]


def _reported(event: Event, in_use: float) -> Dict[str, Any]:
    """What an allocator said of itself after ``event``, ``in_use`` bytes in use then: its fragmentation
    figure, or a caching allocator's reserved bytes and the share of them not in use."""
    if event.reserved is not None and event.reserved > 0:
        return {"reserved_at_peak_bytes": int(event.reserved),
                "fragmentation_at_peak": round(max(event.reserved - in_use, 0.0) / event.reserved, 4)}
    return {} if event.fragmentation is None else {"fragmentation_at_peak": round(event.fragmentation, 4)}


def _allocated_before(ordered: Sequence[Event], moves: Dict[int, int]) -> Dict[Hashable, _Live]:
    """Buffers freed in the window that no event allocated in it: in use since before it. A variable's old
    buffer, which a copy replaces when it is freed (``moves``), is not one: it is the variable's till then."""
    allocated, before = set(), {}
    for i, event in enumerate(ordered):
        if event.delta > 0:
            allocated.add(event.key)
        elif event.key not in allocated and event.key not in before and i not in moves:
            before[event.key] = _Live(-event.delta, "", event.category or BEFORE_WINDOW, "", "", event.region,
                                      event.batch, event.seq)
    return before


def _moves(ordered: Sequence[Event]) -> Dict[int, int]:
    """Where a variable's buffer moved: {index of the free of its old buffer: index of the allocation that
    holds it from then on}. An op that writes a variable (``_ASSIGNS``) can write a new buffer when the old
    value is still read (TensorFlow's copy-on-write); when a buffer of the same requested size that was
    allocated before the window, or was itself such a copy, is freed, the oldest copy still waiting takes
    its place (seed 002's LeNet on BFC: conv2's kernel, 204,800 B, each step; fc1's 12.25 MiB in some runs)."""
    live: Dict[Hashable, int] = {}  # key -> index of its allocation in use
    waiting: Dict[int, List[int]] = {}  # requested bytes -> copies not yet holding a variable, oldest first
    holding: Set[int] = set()
    moves: Dict[int, int] = {}
    for i, event in enumerate(ordered):
        size = event.requested or abs(event.delta)
        if event.delta > 0:
            live[event.key] = i
            if _ASSIGNS.search(event.op):
                waiting.setdefault(size, []).append(i)
            continue
        made = live.pop(event.key, None)
        if made is not None and made not in holding:
            if made in waiting.get(size, ()):
                waiting[size].remove(made)  # a copy freed before it held anything: it was the step's own
            continue
        if made is None and event.category not in ("", BEFORE_WINDOW):
            continue  # an input from before the window, not a variable's
        queue = [k for k in waiting.get(size, ()) if ordered[k].key in live and live[ordered[k].key] == k]
        if queue:
            waiting[size].remove(queue[0])
            holding.add(queue[0])
            moves[i] = queue[0]
    return moves


def _in_use_at(ordered: Sequence[Event], index: int, moves: Optional[Dict[int, int]] = None) -> List[BufferRecord]:
    """Every buffer in use just after event ``index``: allocated in the window and not yet
    freed, or allocated before it and freed later; a variable's moved buffer (``_moves``) as MOVED_STATE."""
    live: Dict[Hashable, _Live] = {}
    moves = moves or {}
    holding = {made for freed, made in moves.items() if freed <= index}
    for i, event in enumerate(ordered[:index + 1]):
        entry = live.get(event.key)
        if event.delta > 0:
            if entry is None:
                entry = live[event.key] = _Live(0, event.op, event.category, event.shape, event.dtype, event.region,
                                                event.batch, event.seq, event.mixed)
            entry.bytes += event.delta
            entry.requested += max(event.requested, 0)
            if i in holding:
                entry.category = MOVED_STATE
        elif entry is not None:
            entry.bytes += event.delta
            if entry.bytes <= 0:
                del live[event.key]
    allocated = {e.key for e in ordered[:index + 1] if e.delta > 0}
    later: Dict[Hashable, _Live] = {}
    for i, event in enumerate(ordered[index + 1:], index + 1):
        if event.delta > 0:
            allocated.add(event.key)
        elif event.key not in allocated and event.key not in later:
            category = MOVED_STATE if i in moves else event.category or BEFORE_WINDOW  # a variable's, till then
            later[event.key] = _Live(-event.delta, "", category, "", "", event.region)
    out = [BufferRecord(op=b.op, bytes=b.bytes, shape=b.shape, dtype=b.dtype, region=b.region, category=b.category,
                        bytes_source=MEASURED, requested_bytes=b.requested or None, batch=b.batch, seq=b.seq,
                        mixed=b.mixed)
           for b in list(live.values()) + list(later.values()) if b.bytes > 0]
    return sorted(out, key=lambda b: -b.bytes)


def downsample(values: List[float], peak_index: int, limit: int = MAX_TIMELINE_POINTS) -> List[int]:
    """Indices of at most ~``limit`` points: each bucket keeps its lowest and highest point,
    and the peak is always kept."""
    n = len(values)
    if n <= limit:
        return list(range(n))
    size = -(-n * 2 // limit)
    kept = set()
    for start in range(0, n, size):
        bucket = range(start, min(start + size, n))
        kept.add(min(bucket, key=values.__getitem__))
        kept.add(max(bucket, key=values.__getitem__))
    kept.add(peak_index)
    return sorted(kept)
