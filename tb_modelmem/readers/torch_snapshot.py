"""A PyTorch CUDA memory snapshot (``torch.cuda.memory._dump_snapshot``: a pickled
``torch.cuda.memory._snapshot()`` dict, ``.pickle`` or ``.pickle.gz``) as an ``OpTrace``. No torch.

The pickle is read with no class allowed at all (``safe_pickle.load_plain``). The dict holds
``segments`` (the allocator's state when it was dumped: each cudaMalloc'd segment and its blocks)
and ``device_traces`` (per device, the allocator's actions over the recorded window: ``alloc``,
``free_requested``, ``free_completed``, ``segment_alloc``, ``segment_free``, ``oom``, each with
its address, size and the frames that made it, innermost first).

What is counted is what ``torch.cuda.max_memory_allocated()`` counts: the sizes of allocated blocks,
less at ``free_requested``. The window starts with what was allocated before it: the bytes
allocated at the dump, less the window's allocations, plus its frees. Blocks alive through the
whole window are taken from the segments with the frames that allocated them; blocks freed in
the window without being allocated in it are ``before_window``; any difference left (a ring
buffer that dropped entries) is bytes in use that nothing explains, never zero.

Each block gets a category from its frames (or from the ``category`` torch's own
``_profile_to_snapshot`` writes): made in ``torch/optim`` (``_init_group``: optimizer state, else
optimizer temporaries), in backward (gradients if still alive when that backward pass ends, else
temporaries), in a module's forward (activations if alive when the next backward starts, else
temporaries), by a data loader (inputs), when the model was built or moved (weights: parameters
and buffers alike); else ``unattributed`` (``rules.buffers.lived_categories``: a trace's rule too).
The ops are the allocating sites: the innermost frame in the user's own code, with the bytes and
allocations made there.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Dict, List, Optional, Tuple

from tb_modelmem.readers.allocator_replay import downsample
from tb_modelmem.readers.bounded import InspectError, maybe_gunzip, read_file
from tb_modelmem.readers.safe_pickle import describe, load_plain, text
from tb_modelmem.rules.buffers import Lived, lived_categories
from tb_modelmem.schema.names import (
    ACTIVATIONS_CATEGORY,
    BACKWARD,
    BEFORE_WINDOW,
    FORWARD,
    GRADIENTS_CATEGORY,
    INPUT,
    INPUTS_CATEGORY,
    MEASURED,
    NON_TRAINABLE_CATEGORY,
    OPTIMIZER,
    OPTIMIZER_SLOTS_CATEGORY,
    TEMPORARIES_CATEGORY,
    TORCH_SNAPSHOT_SOURCE,
    UNATTRIBUTED_CATEGORY,
    WEIGHTS_CATEGORY,
)
from tb_modelmem.schema.records import BufferRecord, BufferTable, OpRecord, OpTable, OpTrace, Timeline

SOURCE = TORCH_SNAPSHOT_SOURCE
SUFFIXES = (".pickle", ".pickle.gz")
MiB = 1 << 20
SNAPSHOT_LIMIT = 1024 * MiB  # a snapshot file, and what a .gz one inflates to
MAX_EVENTS = 5_000_000  # trace entries of one snapshot (torch's max_entries is often 100,000)
MAX_FRAMES = 512  # frames of one entry looked at (a deep Python stack is ~100)
_MAX_INT = 1 << 63
NO_STACK = "(no stack recorded)"
# torch.profiler._memory_profiler.Category, as _profile_to_snapshot writes it
_TORCH_CATEGORIES = {"parameter": WEIGHTS_CATEGORY, "optimizer_state": OPTIMIZER_SLOTS_CATEGORY,
                     "gradient": GRADIENTS_CATEGORY, "activation": ACTIVATIONS_CATEGORY, "input": INPUTS_CATEGORY,
                     "temporary": TEMPORARIES_CATEGORY, "autograd_detail": TEMPORARIES_CATEGORY,
                     "buffer": NON_TRAINABLE_CATEGORY, "unknown": UNATTRIBUTED_CATEGORY}
_PROFILER_FRAME = re.compile(r"^(.*)\((\d+)\): (.*)$")  # _profile_to_snapshot's "torch/nn/conv.py(564): forward"
_LIBRARY = ("/torch/", "/site-packages/", "/dist-packages/", "<frozen", "/lib/python")
_BUILD = frozenset({"_apply", "to", "cuda", "__init__", "reset_parameters", "_load_from_state_dict",
                    "load_state_dict", "register_buffer", "register_parameter"})


@dataclasses.dataclass
class _Site:
    """Where an allocation was made, read from its frames."""

    label: str  # the user's code line: "train.py:42 train_step"
    kind: str  # "nn.conv", "optim.adam", "autograd", "data", or the innermost function
    phase: str
    layer: str = ""
    state: bool = False  # made by the optimizer's _init_group (its state) or by building the model

    @property
    def name(self) -> str:
        """The op row: the user's line and, when torch code made it, which part of torch."""
        return f"{self.label} [{self.kind}]" if self.kind else self.label


def read_snapshot_file(path: str) -> OpTrace:
    """``inspect``: a snapshot file on disk, read with a size cap."""
    return reduce_snapshot(load_snapshot(read_file(path, SNAPSHOT_LIMIT, "memory snapshot"), path))


def is_snapshot_name(name: str) -> bool:
    return name.endswith(SUFFIXES)


def load_snapshot(data: bytes, where: str, limit: int = SNAPSHOT_LIMIT) -> Dict[str, Any]:
    """The snapshot dict of a file's bytes (gzipped or not); ``InspectError`` if it is not one."""
    value = load_plain(maybe_gunzip(data, limit, where), where)
    if isinstance(value, list):  # torch.cuda.memory_snapshot(): segments only, as memory_viz accepts
        value = {"segments": value, "device_traces": []}
    if not isinstance(value, dict) or not isinstance(value.get("segments"), list):
        found = f"a dict whose 'segments' is {describe(value.get('segments'))}" if isinstance(value, dict) else \
            describe(value)
        raise InspectError(f"{where}: not a PyTorch memory snapshot (expected a dict with 'segments' and "
                           f"'device_traces', as torch.cuda.memory._dump_snapshot writes; found {found})")
    traces = value.get("device_traces", [])
    if not isinstance(traces, list) or not all(isinstance(t, list) for t in traces):
        raise InspectError(f"{where}: 'device_traces' is not a list of lists")
    if sum(len(t) for t in traces) > MAX_EVENTS:
        raise InspectError(f"{where}: more than {MAX_EVENTS:,} trace entries")
    value["_where"] = where
    return value


def _int(entry: Dict[str, Any], key: str, where: str, default: Optional[int] = None) -> int:
    value = entry.get(key, default)
    if type(value) is not int or not 0 <= value < _MAX_INT:
        if value is None and default is not None:
            return default
        raise InspectError(f"{where}: '{key}' is {describe(value)}, expected bytes >= 0")
    return value


def _frames(raw: Any) -> List[Tuple[str, int, str]]:
    """(filename, line, function) of each Python frame, innermost first; C++ frames and torch's
    profile markers ("nn.Module: Conv2d_0") are kept for the layer, with line -1."""
    out: List[Tuple[str, int, str]] = []
    if not isinstance(raw, list):
        return out
    for f in raw[:MAX_FRAMES]:
        if not isinstance(f, dict):
            continue
        name, filename, line = text(f.get("name", "")), text(f.get("filename", "")), f.get("line", 0)
        found = _PROFILER_FRAME.match(name) if filename in ("", "none") else None
        if found:
            filename, line, name = found.group(1), int(found.group(2)), found.group(3)
        out.append((filename, line if type(line) is int else 0, name))
    return out


def _is_python(filename: str) -> bool:
    return filename.endswith(".py")


def _library(filename: str) -> bool:
    path = "/" + filename.replace("\\", "/")
    return any(part in path for part in _LIBRARY) or path.startswith("/torch/")


def site_of(raw_frames: Any) -> _Site:
    """The site, phase and kind of an allocation from its frames."""
    frames = _frames(raw_frames)
    python = [f for f in frames if _is_python(f[0])]
    user = next((f for f in python if not _library(f[0])), None)
    label = (f"{os.path.basename(user[0])}:{user[1]} {user[2]}" if user else
             f"{python[0][0]}:{python[0][1]} {python[0][2]}" if python else NO_STACK)
    paths = ["/" + f[0].replace("\\", "/") for f in python]
    layer = "/".join(reversed([f[2][len("nn.Module: "):] for f in frames if f[2].startswith("nn.Module: ")]))

    def first(part: str) -> Optional[Tuple[str, int, str]]:
        return next((f for f, p in zip(python, paths) if part in p), None)

    optim, autograd = first("/torch/optim/"), first("/torch/autograd/")
    module, data = first("/torch/nn/modules/"), first("/torch/utils/data/")
    if optim is not None:
        state = any(f[2] == "_init_group" for f in python)
        return _Site(label, "optim." + _stem(optim[0]), OPTIMIZER, layer, state)
    tensor_backward = any(f[2] == "backward" and p.endswith("/torch/_tensor.py") for f, p in zip(python, paths))
    # the autograd engine's own thread (CUDA backward) has C++ frames only
    if autograd is not None or tensor_backward or any("autograd::" in f[2] for f in frames):
        return _Site(label, "autograd", BACKWARD, layer)
    if data is not None:
        return _Site(label, "data", INPUT, layer)
    if module is not None:
        build = any(f[2] in _BUILD for f in python if "/torch/nn/" in "/" + f[0])
        return _Site(label, "nn." + _stem(module[0]), "" if build else FORWARD, layer, build)
    return _Site(label, python[0][2] if python else "", "", layer)


def _stem(filename: str) -> str:
    return os.path.splitext(os.path.basename(filename))[0]


@dataclasses.dataclass
class _Block:
    size: int
    site: _Site
    category: str = ""
    start: int = 0  # index of its alloc event
    end: Optional[int] = None  # index of its free, None if alive at the dump
    requested: Optional[int] = None


def reduce_snapshot(snapshot: Dict[str, Any], device: Optional[int] = None) -> OpTrace:
    """The allocator's timeline over the recorded window, its peak, the blocks live there by category
    and the allocating sites, of one device (the one with the most trace entries, unless given)."""
    where = str(snapshot.get("_where", "snapshot"))
    notes: List[str] = []
    device, entries, segments = _pick_device(snapshot, device, notes)
    dump = _dump_state(segments, where)
    events, timed, oom = _window_events(entries, device, where)
    window = _replay(events)
    for addr, index in window.live.items():  # alive at the dump: its requested size, if the block is there
        block = dump.live.get(addr)
        if (block is not None and type(block.get("requested_size")) is int
                and block.get("size") == window.blocks[index].size):
            window.blocks[index].requested = block["requested_size"]
    through = {addr: b for addr, b in dump.live.items() if addr not in window.live}  # alive across the window
    at_start = _allocated_at_start(window, dump, through, bool(segments), where, notes)
    _categorise(window.blocks, events, snapshot_categories(entries))
    through_sites = [(b, site, _category_of_state(site)) for b in through.values()
                     for site in [site_of(b.get("frames"))]]
    series = _series(window, at_start, through_sites, where)
    peak, peak_index = series.peak, series.peak_index
    if peak_index < 0:  # no allocation in the window: the dump's state is the whole story
        peak = dump.allocated
    peak_event = window.deltas[peak_index][0] if peak_index >= 0 else len(events)
    buffers = _peak_buffers(window, events, through_sites, peak_event, peak_index, where)

    trace = OpTrace(source=SOURCE, ops=_op_table(window.blocks, f"device {device}"), peak_bytes=max(peak, 0),
                    peak_time_us=round(series.t_us[peak_index] - series.origin, 3) if peak_index >= 0 else 0.0,
                    timeline=series.timeline, devices=[f"device {device}"], steps=1, counts_resident=True,
                    peak_buffers=BufferTable.from_rows(buffers), timed=False)
    trace.allocators = [_allocator(device, peak, series.total, segments, dump.real_segments, dump.reserved,
                                   window.segment_delta, peak_event, dump.allocated)]
    notes.append("the peak of the recorded window (torch.cuda.max_memory_allocated() counts the same bytes; "
                 "it is higher only if the peak came before the window)")
    if not timed and events:
        notes.append("no time_us in this snapshot: the timeline's axis is the entry's index")
    trace.allocations_note = "; ".join(oom + notes)
    return trace


def _pick_device(snapshot: Dict[str, Any], device: Optional[int],
                 notes: List[str]) -> Tuple[int, List[Any], List[Dict[str, Any]]]:
    """The device read (``device``, else the one with the most trace entries), its trace entries and
    its segments; a note when the snapshot holds several."""
    segments = [s for s in snapshot["segments"] if isinstance(s, dict)]
    traces = snapshot.get("device_traces") or []
    devices = sorted({d for d, t in enumerate(traces) if t} | {s.get("device", 0) for s in segments
                                                              if type(s.get("device", 0)) is int})
    if device is None:
        device = max(devices, key=lambda d: (len(traces[d]) if d < len(traces) else 0, -d)) if devices else 0
    entries = traces[device] if device < len(traces) else []
    segments = [s for s in segments if s.get("device", 0) == device]
    if len(devices) > 1:
        notes.append(f"the snapshot holds devices {', '.join(map(str, devices))}: this is device {device}, "
                     "the one with the most recorded entries")
    return device, entries, segments


@dataclasses.dataclass
class _Dump:
    """The dump's own state: allocated blocks by address, and the segments' sizes."""
    live: Dict[int, Dict[str, Any]]
    reserved: int
    allocated: int
    real_segments: bool


def _dump_state(segments: List[Dict[str, Any]], where: str) -> _Dump:
    live_at_dump: Dict[int, Dict[str, Any]] = {}
    reserved_at_dump = 0
    real_segments = bool(segments) and all("segment_type" in s or "allocated_size" in s for s in segments)
    for i, seg in enumerate(segments):
        reserved_at_dump += _int(seg, "total_size", f"{where}: segment {i}", 0)
        seg_blocks = seg.get("blocks") or []
        address = seg.get("address") if type(seg.get("address")) is int else None
        for j, block in enumerate(seg_blocks if isinstance(seg_blocks, list) else []):
            if not isinstance(block, dict):
                continue
            size = _int(block, "size", f"{where}: segment {i} block {j}")
            key = block.get("address") if type(block.get("address")) is int else address
            if block.get("state") == "active_allocated" and key is not None:
                live_at_dump[key] = block
            if address is not None:
                address += size
    allocated_at_dump = sum(_int(b, "size", where) for b in live_at_dump.values())
    return _Dump(live_at_dump, reserved_at_dump, allocated_at_dump, real_segments)


_Event = Tuple[str, int, int, float, Any]  # action, addr, size, t_us, frames


def _window_events(entries: List[Any], device: int, where: str) -> Tuple[List[_Event], bool, List[str]]:
    """The window's allocator events in the allocator's own order, whether they carry times, and what
    ran out of memory."""
    events: List[_Event] = []
    timed = False
    oom: List[str] = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not isinstance(e.get("action"), str):
            raise InspectError(f"{where}: device {device} trace entry {i} is not an allocator action")
        action = e["action"]
        if action == "oom":
            oom.append(f"an allocation of {_int(e, 'size', where, 0):,} B failed (out of memory"
                       + (f", {e['device_free']:,} B free on the device)" if type(e.get("device_free")) is int
                          else ")"))
            continue
        if action not in ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
                          "segment_map", "segment_unmap"):
            continue
        t = e.get("time_us")
        timed = timed or isinstance(t, (int, float)) and not isinstance(t, bool)
        events.append((action, _int(e, "addr", f"{where}: entry {i}"), _int(e, "size", f"{where}: entry {i}"),
                       float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else float(i),
                       e.get("frames")))
    return events, timed, oom


@dataclasses.dataclass
class _Window:
    """The window's allocations and frees replayed."""
    blocks: List[_Block] = dataclasses.field(default_factory=list)
    live: Dict[int, int] = dataclasses.field(default_factory=dict)  # addr -> index into blocks, alive at the end
    freed_before: Dict[int, int] = dataclasses.field(default_factory=dict)  # addr -> size: allocated before, freed in
    # (event index, delta, t_us, block index or -1)
    deltas: List[Tuple[int, int, float, int]] = dataclasses.field(default_factory=list)
    segment_delta: List[Tuple[int, int]] = dataclasses.field(default_factory=list)


def _replay(events: List[_Event]) -> _Window:
    """Allocations and frees: a free counts at free_requested (or a free_completed with none before it)."""
    window = _Window()
    blocks, live = window.blocks, window.live
    pending: Dict[int, int] = {}  # addr -> size freed by a free_requested not yet completed
    sites: Dict[Any, _Site] = {}
    for n, (action, addr, size, t, frames) in enumerate(events):
        if action == "alloc":
            key = _frames_key(frames)
            site = sites.get(key) or sites.setdefault(key, site_of(frames))
            live[addr] = len(blocks)
            blocks.append(_Block(size, site, start=n))
            window.deltas.append((n, size, t, live[addr]))
        elif action == "free_requested" or (action == "free_completed" and addr not in pending):
            if action == "free_requested":
                pending[addr] = size
            index = live.pop(addr, None)
            if index is not None:
                blocks[index].end = n
            else:
                window.freed_before[addr] = size
            window.deltas.append((n, -size, t, -1 if index is None else index))
        elif action == "free_completed":
            pending.pop(addr, None)
        elif action in ("segment_alloc", "segment_map"):
            window.segment_delta.append((n, size))
        else:
            window.segment_delta.append((n, -size))
    return window


def _allocated_at_start(window: _Window, dump: _Dump, through: Dict[int, Dict[str, Any]], has_segments: bool,
                        where: str, notes: List[str]) -> int:
    """Bytes allocated when the window began: the dump's less what the window added, or (without a
    usable dump) what the window itself shows; a note when the two disagree."""
    net = sum(d for _, d, _, _ in window.deltas)
    at_start = dump.allocated - net
    known_start = sum(_int(b, "size", where) for b in through.values()) + sum(window.freed_before.values())
    if at_start < 0 or not has_segments:
        if has_segments:
            notes.append(f"the dump's allocated blocks ({dump.allocated:,} B) are fewer than the window's "
                         "allocations leave: counting from what the window itself shows")
        at_start = known_start
    elif at_start != known_start:
        notes.append(f"{abs(at_start - known_start):,} B allocated before the window are not explained by the "
                     "blocks in the dump (a trace that dropped its oldest entries?): counted, in no category")
    return at_start


@dataclasses.dataclass
class _Series:
    timeline: Timeline
    t_us: List[float]
    total: List[float]
    origin: float
    peak: int
    peak_index: int  # into the window's deltas; -1: no allocation in the window


def _series(window: _Window, at_start: int, through_sites: List[Tuple[Dict[str, Any], _Site, str]],
            where: str) -> _Series:
    """The allocated bytes after each event, in all and by category, and the highest point."""
    running = at_start
    by_category: Dict[str, int] = {}
    for b, _, category in through_sites:
        by_category[category] = by_category.get(category, 0) + _int(b, "size", where)
    by_category[BEFORE_WINDOW] = sum(window.freed_before.values())
    t_us: List[float] = []
    total: List[float] = []
    ops: List[str] = []
    columns: Dict[str, List[float]] = {}
    peak, peak_index = -1, -1
    for position, (n, delta, t, index) in enumerate(window.deltas):
        running += delta
        if index >= 0:
            block = window.blocks[index]
            by_category[block.category] = by_category.get(block.category, 0) + delta
            op = block.site.name
        else:
            by_category[BEFORE_WINDOW] += delta
            op = ""
        t_us.append(t)
        total.append(float(running))
        ops.append(op)
        for category in by_category:  # a category first met here: zeros before it
            if category not in columns:
                columns[category] = [0.0] * position
        for category, column in columns.items():
            column.append(float(max(by_category.get(category, 0), 0)))
        if running > peak:
            peak, peak_index = running, position
    origin = t_us[0] if t_us else 0.0
    keep = downsample(total, peak_index) if total else []
    timeline = Timeline([round(t_us[i] - origin, 3) for i in keep], [total[i] for i in keep], [ops[i] for i in keep],
                        {c: [v[i] for i in keep] for c, v in columns.items() if any(v)})
    return _Series(timeline, t_us, total, origin, peak, peak_index)


def _peak_buffers(window: _Window, events: List[_Event], through_sites: List[Tuple[Dict[str, Any], _Site, str]],
                  peak_event: int, peak_index: int, where: str) -> List[BufferRecord]:
    """The blocks live at the peak, largest first: the window's, those alive across it, and those
    allocated before it and freed after the peak."""
    buffers: List[BufferRecord] = []
    for block in window.blocks:
        if block.start <= peak_event and (block.end is None or block.end > peak_event):
            buffers.append(BufferRecord(op=block.site.name, bytes=block.size, region=block.site.kind,
                                        category=block.category, bytes_source=MEASURED,
                                        requested_bytes=block.requested))
    for b, site, category in through_sites:
        buffers.append(BufferRecord(op=site.name, bytes=_int(b, "size", where), region=site.kind, category=category,
                                    bytes_source=MEASURED, requested_bytes=b.get("requested_size")
                                    if type(b.get("requested_size")) is int else None))
    freed_later = {events[n][1] for n, d, _, i in window.deltas[peak_index + 1:] if i < 0 and d < 0}
    for addr, size in window.freed_before.items():
        if addr in freed_later:
            buffers.append(BufferRecord(op="", bytes=size, category=BEFORE_WINDOW, bytes_source=MEASURED))
    buffers.sort(key=lambda b: -b.bytes)
    return buffers


def snapshot_categories(entries: List[Any]) -> Optional[List[Optional[str]]]:
    """torch's own category of each alloc entry, in order, when the snapshot has them (``_profile_to_snapshot``)."""
    found = [e.get("category") for e in entries if isinstance(e, dict) and e.get("action") == "alloc"]
    return found if any(isinstance(c, str) for c in found) else None


def _categorise(blocks: List[_Block], events: List[Tuple[str, int, int, float, Any]],
                torch_categories: Optional[List[Optional[str]]]) -> None:
    """Each block's category: torch's own where the snapshot has it, else from its frames' phase and its
    lifetime (``rules.buffers.lived_categories``, the rule a trace of the same step is read with)."""
    if torch_categories is not None:
        for block, category in zip(blocks, torch_categories):
            block.category = _TORCH_CATEGORIES.get(str(category), UNATTRIBUTED_CATEGORY)
        return
    lived = [Lived(block.site.phase, block.start, block.end, "persist" if block.site.state else "")
             for block in blocks]
    for block, category in zip(blocks, lived_categories(lived)):
        block.category = category


def _category_of_state(site: _Site) -> str:
    """A block alive through the whole window, by the frames that allocated it."""
    if site.phase == OPTIMIZER:
        return OPTIMIZER_SLOTS_CATEGORY
    if site.state:
        return WEIGHTS_CATEGORY
    if site.phase == BACKWARD:
        return GRADIENTS_CATEGORY
    return UNATTRIBUTED_CATEGORY


def _frames_key(frames: Any) -> Any:
    if not isinstance(frames, list):
        return ()
    return tuple((_atom(f.get("filename")), _atom(f.get("line")), _atom(f.get("name"))) if isinstance(f, dict)
                 else () for f in frames[:MAX_FRAMES])


def _atom(value: Any) -> Any:
    """A frame's field as a dict key: a str or an int as it is, anything else (unhashable, crafted) as None."""
    return value if type(value) is str or type(value) is int else None


def _op_table(blocks: List[_Block], device: str) -> OpTable:
    rows: Dict[str, OpRecord] = {}
    for block in blocks:
        row = rows.get(block.site.name)
        if row is None:
            row = rows[block.site.name] = OpRecord(name=block.site.name, op_type=block.site.kind,
                                                    layer=block.site.layer, device=device, calls=0,
                                                    bytes_source=MEASURED, phase=block.site.phase)
        row.calls += 1
        row.alloc_bytes += block.size
        row.output_bytes += block.size
    return OpTable.by_name(rows.values())


def _allocator(device: int, peak: int, total: List[float], segments: List[Any], real_segments: bool,
               reserved_at_dump: int, segment_delta: List[Tuple[int, int]], peak_event: int,
               allocated_at_dump: int) -> Dict[str, Any]:
    entry: Dict[str, Any] = {"name": f"device {device} (allocated)", "peak_bytes": int(max(peak, 0)),
                             "min_bytes": int(min(total)) if total else allocated_at_dump,
                             "allocated_at_dump_bytes": allocated_at_dump}
    if not real_segments:  # _profile_to_snapshot's segments are address spans, not cudaMalloc'd memory
        entry["reserved_note"] = "no cudaMalloc segments in this snapshot: reserved memory is unknown"
        return entry
    after_peak = sum(d for n, d in segment_delta if n > peak_event)
    reserved_at_peak = reserved_at_dump - after_peak
    running, highest = reserved_at_dump - sum(d for _, d in segment_delta), 0
    highest = running
    for _, d in segment_delta:
        running += d
        highest = max(highest, running)
    entry.update({"reserved_at_peak_bytes": reserved_at_peak, "max_reserved_bytes": highest,
                  "reserved_at_dump_bytes": reserved_at_dump, "segments_at_dump": len(segments)})
    if reserved_at_peak > 0 and peak >= 0:
        entry["fragmentation_at_peak"] = round(max(reserved_at_peak - peak, 0) / reserved_at_peak, 4)
    return entry

