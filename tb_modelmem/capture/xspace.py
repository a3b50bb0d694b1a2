"""Reduce a TF2 profiler XSpace (``*.xplane.pb``) to an OpTrace.

TF2 eager and tf.function steps have no step stats; the profiler's XSpace has per-op
events ("node:Type" on the host executor lines, or a ``tf_op`` stat on device lines) and
MemoryAllocation/MemoryDeallocation events. On CPU the profiler records only large
allocations, so the output bytes of every other op are derived from the traced graph
(output shape x dtype size at the step's batch size) and labelled DERIVED.
"""

from __future__ import annotations

import dataclasses
import math
import os
import warnings
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from tb_modelmem.capture.run_metadata import downsample, dtype_name, format_shape, fused_ops, layer_of
from tb_modelmem.records import DERIVED, MEASURED, OpRecord, OpTrace

Dims = Optional[Tuple[Optional[int], ...]]  # None: unknown rank
# One output of a graph op: (dims, dtype name, bytes per element; 0 if not a plain array).
OutputSpec = Tuple[Dims, str, int]
GraphOutputs = Dict[str, List[OutputSpec]]

_ALLOC, _DEALLOC = "MemoryAllocation", "MemoryDeallocation"


def load_xspace(source: Union[str, bytes, "os.PathLike[str]"]) -> Any:
    """Parse an ``.xplane.pb`` file (path) or its bytes into an XSpace proto."""
    xplane_pb2 = _xplane_pb2()
    data = source if isinstance(source, bytes) else open(source, "rb").read()
    return xplane_pb2.XSpace.FromString(data)


def graph_outputs(source: Any) -> GraphOutputs:
    """{op name: output specs} of a tf.function, ConcreteFunction or tf.Graph, nested functions included.

    A tf.function contributes every concrete function traced so far, so call it once
    before profiling. Reads shapes and dtypes only.
    """
    pending = list(_graphs_of(source))
    seen, out = set(), {}  # type: ignore[var-annotated]
    while pending:
        graph = pending.pop()
        if id(graph) in seen:
            continue
        seen.add(id(graph))
        for op in graph.get_operations():
            out.setdefault(op.name, [_spec(t) for t in op.outputs])
        pending.extend(f.graph for f in getattr(graph, "_functions", {}).values()
                       if getattr(f, "graph", None) is not None)
    return out


def reduce_xspace(xspace: Any, graph: Optional[GraphOutputs] = None, batch_size: Optional[int] = None) -> OpTrace:
    """Per-op table and bytes-in-use timeline of the steps in ``xspace``.

    ``graph`` (from ``graph_outputs``) fills in output bytes the allocator did not report;
    unknown leading dimensions take ``batch_size``, or the batch seen in measured shapes.
    Warns (and still returns what it found) when there are no op or allocation events.
    """
    calls: Dict[Tuple[str, str], _Calls] = {}
    memory: List[_MemoryEvent] = []
    steps = 0
    for plane in xspace.planes:
        if not plane.name.startswith(("/host:", "/device:")):
            continue
        stat_names = {k: m.name for k, m in plane.stat_metadata.items()}
        host = plane.name.startswith("/host:")
        for line in plane.lines:
            if host and line.name == "python":
                steps += _outermost_function_calls(plane, line, stat_names)
                continue
            base_ps = line.timestamp_ns * 1000
            for event in line.events:
                meta = plane.event_metadata[event.metadata_id]
                if meta.name in (_ALLOC, _DEALLOC):
                    memory.append(_MemoryEvent(base_ps + event.offset_ps, meta.name == _ALLOC, plane.name,
                                               _stats(event.stats, stat_names)))
                    continue
                op = _op_of(meta, event, stat_names, host)
                if op:
                    key = (op[0], plane.name)
                    acc = calls.get(key) or calls.setdefault(key, _Calls(op[0], op[1], plane.name))
                    acc.add(base_ps + event.offset_ps, event.duration_ps)
    if not calls:
        warnings.warn("tb_modelmem: the profile has no TensorFlow op events (unknown device, or nothing ran "
                      "while profiling)", RuntimeWarning, stacklevel=2)
    if not memory:
        warnings.warn("tb_modelmem: the profile has no allocation events; output bytes are derived from "
                      "shapes and the peak is unknown", RuntimeWarning, stacklevel=2)
    origin_ps = min([c.first_ps for c in calls.values()] + [m.time_ps for m in memory], default=0)
    rows = _rows(calls.values(), memory, graph or {}, batch_size)
    timeline, peak_bytes, peak_time = _memory_timeline(memory, origin_ps)
    return OpTrace(source="xspace", ops=rows, peak_bytes=peak_bytes, peak_time_us=peak_time,
                   timeline=downsample(timeline), devices=sorted({r.device for r in rows}),
                   steps=max(steps, 1))


@dataclasses.dataclass
class _Calls:
    """Running totals of one op's events on one device."""

    name: str
    op_type: str
    device: str
    count: int = 0
    duration_ps: int = 0
    first_ps: int = 2 ** 63

    def add(self, start_ps: int, duration_ps: int) -> None:
        self.count += 1
        self.duration_ps += duration_ps
        self.first_ps = min(self.first_ps, start_ps)


@dataclasses.dataclass
class _MemoryEvent:
    time_ps: int
    is_alloc: bool
    device: str
    stats: Dict[str, Any]


def _xplane_pb2() -> Any:
    try:
        from tensorflow.tsl.profiler.protobuf import xplane_pb2
    except ImportError:  # standalone tsl / xprof installs
        from tsl.profiler.protobuf import xplane_pb2  # type: ignore[no-redef]
    return xplane_pb2


def _graphs_of(source: Any) -> Iterator[Any]:
    if hasattr(source, "get_operations"):  # tf.Graph / FuncGraph
        yield source
    elif hasattr(source, "graph") and hasattr(source.graph, "get_operations"):  # ConcreteFunction
        yield source.graph
    elif hasattr(source, "_list_all_concrete_functions"):  # tf.function: every signature traced so far
        yield from (f.graph for f in source._list_all_concrete_functions())
    else:
        raise TypeError(f"expected a tf.function, ConcreteFunction or tf.Graph, got {type(source).__name__}")


def _spec(tensor: Any) -> OutputSpec:
    dims = None if tensor.shape.rank is None else tuple(tensor.shape.as_list())
    return dims, tensor.dtype.name, int(tensor.dtype.size)


def _stats(stats: Iterable[Any], stat_names: Dict[int, str]) -> Dict[str, Any]:
    out = {}
    for stat in stats:
        kind = stat.WhichOneof("value")
        value = getattr(stat, kind) if kind else None
        out[stat_names.get(stat.metadata_id, "")] = stat_names.get(value, "") if kind == "ref_value" else value
    return out


def _op_of(meta: Any, event: Any, stat_names: Dict[int, str], host: bool) -> Optional[Tuple[str, str]]:
    """(node, type) of a TF op event: host executor events are named "node:Type"."""
    if host:
        if meta.display_name and meta.name.endswith(":" + meta.display_name):
            return meta.name[:-len(meta.display_name) - 1], meta.display_name
        return None
    tf_op = _stats(list(meta.stats) + list(event.stats), stat_names).get("tf_op")
    if isinstance(tf_op, str) and ":" in tf_op:
        name, _, op_type = tf_op.rpartition(":")
        return name, op_type
    return None




def _outermost_function_calls(plane: Any, line: Any, stat_names: Dict[int, str]) -> int:
    """Steps = tf.function calls from Python that are not nested inside another one."""
    marker = {k for k, name in stat_names.items() if name == "tf_function_call"}
    count, end_ps = 0, -1
    for event in sorted(line.events, key=lambda e: e.offset_ps):
        if any(s.metadata_id in marker for s in event.stats) and event.offset_ps >= end_ps:
            count, end_ps = count + 1, event.offset_ps + event.duration_ps
    return count


def _rows(calls: Iterable[_Calls], memory: List[_MemoryEvent], graph: GraphOutputs,
          batch_size: Optional[int]) -> List[OpRecord]:
    measured = _measured_outputs(memory)
    batch = batch_size or _batch_seen(measured, graph)
    rows = []
    for acc in calls:
        row = OpRecord(name=acc.name, op_type=acc.op_type, layer=layer_of(acc.name), device=acc.device,
                       calls=acc.count, time_us=acc.duration_ps / 1e6, fused=fused_ops(acc.op_type, acc.name))
        _fill_bytes(row, measured.pop(acc.name, None), _lookup(graph, acc.name), batch)
        rows.append(row)
    for name, m in measured.items():  # allocations by ops with no op event: keep every byte
        row = OpRecord(name=name, op_type="", layer=layer_of(name), device=m.device, calls=m.steps)
        _fill_bytes(row, m, None, batch)
        rows.append(row)
    return rows


@dataclasses.dataclass
class _Measured:
    """What the allocator reported for one op in its largest step."""

    device: str
    output_bytes: int = 0
    alloc_bytes: int = 0
    shapes: List[str] = dataclasses.field(default_factory=list)
    dtypes: List[str] = dataclasses.field(default_factory=list)
    steps: int = 1


def _measured_outputs(memory: List[_MemoryEvent]) -> Dict[str, _Measured]:
    per_step: Dict[Tuple[str, Any], _Measured] = {}
    for m in memory:
        op = m.stats.get("tf_op")
        if not m.is_alloc or not op:
            continue
        acc = per_step.setdefault((op, m.stats.get("id")), _Measured(device=m.device))
        acc.alloc_bytes += int(m.stats.get("allocation_bytes") or 0)
        if m.stats.get("region_type") == "output":
            acc.output_bytes += int(m.stats.get("requested_bytes") or 0)
            acc.shapes.append(str(m.stats.get("shape") or "?"))
            dtype = dtype_name(int(m.stats.get("data_type") or 0))
            acc.dtypes += [] if dtype in acc.dtypes else [dtype]
    best: Dict[str, _Measured] = {}
    for (op, _), acc in per_step.items():
        steps = best[op].steps + 1 if op in best else 1
        if op not in best or acc.alloc_bytes > best[op].alloc_bytes:
            best[op] = acc
        best[op].steps = steps
    return best


def _fill_bytes(row: OpRecord, measured: Optional[_Measured], specs: Optional[List[OutputSpec]],
                batch: Optional[int]) -> None:
    """Allocator figures when the op's output was recorded, else shape x dtype size from the graph."""
    if measured and measured.output_bytes:
        row.bytes_source = MEASURED
        row.output_bytes, row.alloc_bytes = measured.output_bytes, measured.alloc_bytes
        row.output_shape, row.output_dtype = ";".join(measured.shapes), ";".join(measured.dtypes)
        return
    row.bytes_source = DERIVED
    row.alloc_bytes = measured.alloc_bytes if measured else 0
    if specs:
        dims = [_at_batch(d, batch) for d, _, _ in specs]
        row.output_bytes = sum(_nbytes(d, size) for d, (_, _, size) in zip(dims, specs))
        row.output_shape = ";".join("?" if d is None else format_shape(d) for d in dims)
        row.output_dtype = ";".join(dict.fromkeys(name for _, name, _ in specs))


def _lookup(graph: GraphOutputs, name: str) -> Optional[List[OutputSpec]]:
    """Graph specs of an executed node; inlined function bodies carry the call node as a prefix."""
    parts = name.split("/")
    for i in range(len(parts)):
        specs = graph.get("/".join(parts[i:]))
        if specs is not None:
            return specs
    return None


def _batch_seen(measured: Dict[str, _Measured], graph: GraphOutputs) -> Optional[int]:
    """The batch size of the profiled steps, from a measured output whose graph shape has it unknown."""
    for name, m in measured.items():
        specs = graph.get(name)
        if not specs or len(m.shapes) != 1 or specs[0][0] is None or not specs[0][0] or specs[0][0][0] is not None:
            continue
        seen = m.shapes[0].strip("[]").split(",")
        if len(seen) == len(specs[0][0]) and seen[0].isdigit():
            return int(seen[0])
    return None


def _at_batch(dims: Dims, batch: Optional[int]) -> Dims:
    if dims and dims[0] is None and batch:
        return (batch,) + tuple(dims[1:])
    return dims


def _nbytes(dims: Dims, itemsize: int) -> int:
    if dims is None or any(d is None for d in dims) or not itemsize:
        return 0
    return math.prod(dims) * itemsize  # type: ignore[arg-type]


def _memory_timeline(memory: List[_MemoryEvent], origin_ps: int) -> Tuple[List[List[float]], int, float]:
    """Bytes in use (all allocators) after each allocation event, and the peak during the trace.

    The allocator's lifetime ``peak_bytes_in_use`` counts only if it rose while profiling:
    then the true peak (small allocations included) happened inside the trace.
    """
    in_use: Dict[str, int] = {}
    first_peak: Dict[str, int] = {}
    timeline: List[List[float]] = []
    peak, peak_t = 0, 0.0
    for m in sorted(memory, key=lambda e: e.time_ps):
        allocator = str(m.stats.get("allocator_name", ""))
        t = (m.time_ps - origin_ps) / 1e6
        in_use[allocator] = int(m.stats.get("bytes_allocated") or 0)
        timeline.append([t, float(sum(in_use.values()))])
        lifetime_peak = int(m.stats.get("peak_bytes_in_use") or 0)
        first_peak.setdefault(allocator, lifetime_peak)
        rose = lifetime_peak > first_peak[allocator]
        candidate = max(timeline[-1][1], lifetime_peak if rose else 0)
        if candidate > peak:
            peak, peak_t = int(candidate), t
    return timeline, peak, peak_t
