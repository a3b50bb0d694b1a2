"""Reduce a TF2 profiler XSpace (``*.xplane.pb``) to an OpTrace.

TF2 eager and tf.function steps have no step stats; the profiler's XSpace has per-op
events ("node:Type" on the host executor lines, or a ``tf_op`` stat on device lines) and
MemoryAllocation/MemoryDeallocation events. On CPU the profiler records only large
allocations, so the output bytes of every other op are derived from the traced graph
(output shape x dtype size at the step's batch size) and labelled DERIVED.
Reading and reducing a profile does not import TensorFlow, so the plugin backend can
reduce the ``plugins/profile/*/*.xplane.pb`` of a TF2 ``trace_export`` log dir.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import inspect
import math
import os
import re
import sys
import warnings
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from tb_modelmem.capture.run_metadata import downsample, dtype_name, format_shape, fused_ops, layer_of
from tb_modelmem.records import DERIVED, MEASURED, OpRecord, OpTrace

Dims = Optional[Tuple[Optional[int], ...]]  # None: unknown rank
# One output of a graph op: (dims, dtype name, bytes per element; 0 if not a plain array).
OutputSpec = Tuple[Dims, str, int]

_ALLOC, _DEALLOC = "MemoryAllocation", "MemoryDeallocation"
_EAGER = "EagerLocalExecute: "  # an op run eagerly, e.g. "EagerLocalExecute: Conv2D"
_UNIQUIFIED = re.compile(r"(?:_\d+)+")  # what tf.name_scope appends to a scope name already taken


@dataclasses.dataclass
class GraphInfo:
    """What the traced graph says about the ops a profile ran."""

    outputs: Dict[str, List[OutputSpec]]  # op name -> its outputs
    layers: Dict[str, str] = dataclasses.field(default_factory=dict)  # scope as traced -> layer path


def load_xspace(source: Union[str, bytes, "os.PathLike[str]"]) -> Any:
    """Parse an ``.xplane.pb`` file (path) or its bytes into an XSpace proto."""
    if not isinstance(source, bytes):
        with open(source, "rb") as f:
            source = f.read()
    return _xplane_pb2().XSpace.FromString(source)


def graph_info(source: Any) -> GraphInfo:
    """Output specs and layer scopes of a tf.function, ConcreteFunction or tf.Graph, nested functions included.

    A tf.function contributes every concrete function traced so far, so call it once
    before profiling. Reads shapes, dtypes and names only.

    Keras 3 traces a layer under a uniquified scope ("sequential_1/conv2d_1" for the layer
    "sequential/conv2d"), which would join the wrong layer; the variables each scope reads
    say which layer it is, and scopes without variables follow their siblings' pattern.
    """
    pending, seen = list(_graphs_of(source)), set()
    outputs: Dict[str, List[OutputSpec]] = {}
    reads: List[Tuple[str, str]] = []
    while pending:
        graph = pending.pop()
        if id(graph) in seen:
            continue
        seen.add(id(graph))
        for op in graph.get_operations():
            outputs.setdefault(op.name, [_spec(t) for t in op.outputs])
        reads.extend(_variable_reads(graph))
        pending.extend(f.graph for f in getattr(graph, "_functions", {}).values()
                       if getattr(f, "graph", None) is not None)
    return GraphInfo(outputs, _scope_layers(reads, outputs))


def reduce_xspace(xspace: Any, graph: Optional[GraphInfo] = None, batch_size: Optional[int] = None) -> OpTrace:
    """Per-op table and bytes-in-use timeline of the steps in ``xspace``.

    ``graph`` (from ``graph_info``) fills in output bytes the allocator did not report and
    maps scopes to Keras layers; unknown leading dimensions take ``batch_size``, or the
    batch seen in measured shapes.
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
                steps += _outermost_function_calls(line, stat_names)
            base_ps = line.timestamp_ns * 1000
            for event in line.events:
                meta = _event_metadata(plane, event)
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
    rows = _rows(calls.values(), memory, graph or GraphInfo({}), batch_size)
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


@functools.lru_cache(maxsize=None)
def _xplane_pb2() -> Any:
    """The XSpace proto classes TF ships; loaded from their file unless TF is already imported,
    so that reading a profile (e.g. in the TensorBoard backend) does not import TensorFlow."""
    if "tensorflow" in sys.modules:
        from tensorflow.tsl.profiler.protobuf import xplane_pb2

        return xplane_pb2
    tf_spec = importlib.util.find_spec("tensorflow")
    for root in (tf_spec.submodule_search_locations or []) if tf_spec else []:
        path = os.path.join(root, "tsl", "profiler", "protobuf", "xplane_pb2.py")
        spec = importlib.util.spec_from_file_location("tb_modelmem.capture._xplane_pb2", path)
        if spec and spec.loader and os.path.exists(path):
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    try:
        from tsl.profiler.protobuf import xplane_pb2  # standalone tsl / xprof installs
    except ImportError:
        raise ImportError("reading an .xplane.pb needs TensorFlow (or tsl) installed for its proto classes") from None
    return xplane_pb2


def _graphs_of(source: Any) -> Iterator[Any]:
    if hasattr(source, "get_operations"):  # tf.Graph / FuncGraph
        yield source
    elif hasattr(source, "graph") and hasattr(source.graph, "get_operations"):  # ConcreteFunction
        yield source.graph
    elif hasattr(source, "_list_all_concrete_functions"):  # tf.function: every signature traced so far
        yield from (f.graph for f in source._list_all_concrete_functions())
    elif inspect.isfunction(source):  # Python code calling tf.functions, e.g. Keras 3 model.train_function
        yield from (g for f in _wrapped_tf_functions(source) for g in _graphs_of(f))
    else:
        raise TypeError(f"expected a tf.function, ConcreteFunction, tf.Graph or a Python function calling "
                        f"tf.functions, got {type(source).__name__}")


def _wrapped_tf_functions(fn: Any, depth: int = 3) -> Iterator[Any]:
    """tf.functions a Python function closes over, looking ``depth`` closures deep."""
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            inner = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if hasattr(inner, "_list_all_concrete_functions"):
            yield inner
        elif depth > 1 and inspect.isfunction(inner):
            yield from _wrapped_tf_functions(inner, depth - 1)


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


def _event_metadata(plane: Any, event: Any) -> Any:
    """The event's metadata, or an empty one if the plane has none for it: indexing a proto map
    with a missing key would add the entry, changing the caller's XSpace."""
    found = plane.event_metadata.get(event.metadata_id)
    return found if found is not None else _xplane_pb2().XEventMetadata()


def _op_of(meta: Any, event: Any, stat_names: Dict[int, str], host: bool) -> Optional[Tuple[str, str]]:
    """(node, type) of a TF op event: host executor events are named "node:Type"; an eager op
    has no node, so its type names the row; tf.function calls are left to their own ops."""
    if host:
        if meta.display_name and meta.name.endswith(":" + meta.display_name):
            return meta.name[:-len(meta.display_name) - 1], meta.display_name
        eager = meta.name[len(_EAGER):] if meta.name.startswith(_EAGER) else ""
        return (eager, eager) if eager and not eager.startswith("__") else None
    tf_op = _stats(list(meta.stats) + list(event.stats), stat_names).get("tf_op")
    if isinstance(tf_op, str) and ":" in tf_op:
        name, _, op_type = tf_op.rpartition(":")
        return name, op_type
    return None


def _outermost_function_calls(line: Any, stat_names: Dict[int, str]) -> int:
    """Steps = tf.function calls from Python that are not nested inside another one."""
    marker = {k for k, name in stat_names.items() if name == "tf_function_call"}
    count, end_ps = 0, -1
    for event in sorted(line.events, key=lambda e: e.offset_ps):
        if any(s.metadata_id in marker for s in event.stats) and event.offset_ps >= end_ps:
            count, end_ps = count + 1, event.offset_ps + event.duration_ps
    return count


def _rows(calls: Iterable[_Calls], memory: List[_MemoryEvent], graph: GraphInfo,
          batch_size: Optional[int]) -> List[OpRecord]:
    measured = _measured_outputs(memory)
    batch = batch_size or _batch_seen(measured, graph.outputs)
    rows = []
    for acc in calls:
        row = OpRecord(name=acc.name, op_type=acc.op_type, layer=_layer(acc.name, graph.layers),
                       device=acc.device, calls=acc.count, time_us=acc.duration_ps / 1e6,
                       fused=fused_ops(acc.op_type, acc.name))
        _fill_bytes(row, measured.pop(acc.name, None), _lookup(graph.outputs, acc.name), batch)
        rows.append(row)
    for name, m in measured.items():  # allocations by ops with no op event: keep every byte
        row = OpRecord(name=name, op_type="", layer=_layer(name, graph.layers), device=m.device, calls=m.steps)
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
        op = _op_name(m.stats)
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


def _lookup(graph: Dict[str, List[OutputSpec]], name: str) -> Optional[List[OutputSpec]]:
    """Graph specs of an executed node; inlined function bodies carry the call node as a prefix."""
    parts = name.split("/")
    for i in range(len(parts)):
        specs = graph.get("/".join(parts[i:]))
        if specs is not None:
            return specs
    return None


def _batch_seen(measured: Dict[str, _Measured], graph: Dict[str, List[OutputSpec]]) -> Optional[int]:
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


def _op_name(stats: Dict[str, Any]) -> str:
    """The op a memory event's ``tf_op`` stat names ("scope/MatMul" or "scope/MatMul:MatMul"),
    without the type, as the op table names it; "" if it names none."""
    tf_op = stats.get("tf_op")
    return tf_op.partition(":")[0] if isinstance(tf_op, str) else ""


def _memory_timeline(memory: List[_MemoryEvent], origin_ps: int) -> Tuple[List[List[Any]], int, float]:
    """[[t_us, bytes_in_use (all allocators), op_name]] after each memory event, and the trace's peak.

    Deallocations carry no ``tf_op``: they name the op that allocated the same address during
    the trace (as RunMetadata attributes a free to the allocating node), else "".
    The allocator's lifetime ``peak_bytes_in_use`` counts only if it rose while profiling:
    then the true peak (small allocations included) happened inside the trace.
    """
    in_use: Dict[str, int] = {}
    first_peak: Dict[str, int] = {}
    owners: Dict[Tuple[str, Any], str] = {}  # (allocator, address) -> op that allocated it
    timeline: List[List[Any]] = []
    peak, peak_t = 0, 0.0
    for m in sorted(memory, key=lambda e: e.time_ps):
        allocator = str(m.stats.get("allocator_name", ""))
        t = (m.time_ps - origin_ps) / 1e6
        in_use[allocator] = int(m.stats.get("bytes_allocated") or 0)
        address = (allocator, m.stats.get("addr"))
        if m.is_alloc:
            op = owners[address] = _op_name(m.stats)
        else:
            op = owners.pop(address, "")
        timeline.append([t, float(sum(in_use.values())), op])
        lifetime_peak = int(m.stats.get("peak_bytes_in_use") or 0)
        first_peak.setdefault(allocator, lifetime_peak)
        rose = lifetime_peak > first_peak[allocator]
        candidate = max(timeline[-1][1], lifetime_peak if rose else 0)
        if candidate > peak:
            peak, peak_t = int(candidate), t
    return timeline, peak, peak_t


def _variable_reads(graph: Any) -> Iterator[Tuple[str, str]]:
    """(name of the placeholder a captured variable enters ``graph`` as, the variable's name)."""
    names = {id(v.handle): v.name.partition(":")[0] for v in getattr(graph, "variables", ())}
    for external, internal in getattr(graph, "captures", ()):
        if id(external) in names:
            yield internal.op.name, names[id(external)]


def _scope_layers(reads: Iterable[Tuple[str, str]], ops: Iterable[str]) -> Dict[str, str]:
    """{scope as traced: layer path} for scopes that differ from their layer's path."""
    found: Dict[str, set] = {}
    for reader, variable in reads:
        layer = variable.rpartition("/")[0].split("/")
        scope = reader.split("/")[:len(layer)]
        if layer != [""] and len(reader.split("/")) > len(layer) and all(map(_same_name, scope, layer)):
            found.setdefault("/".join(scope), set()).add("/".join(layer))
    renames = {scope: layers.pop() for scope, layers in found.items() if len(layers) == 1}
    # Parents whose every renamed child carries exactly one extra "_N": rename the others alike.
    pattern: Dict[str, Tuple[str, bool]] = {}
    for scope, layer in renames.items():
        parent, _, child = scope.rpartition("/")
        one_more = re.fullmatch(r"_\d+", child[len(layer.rpartition("/")[2]):]) is not None
        seen_parent, all_one_more = pattern.get(parent, (layer.rpartition("/")[0], True))
        pattern[parent] = (seen_parent, all_one_more and one_more)
    for name in ops:
        parts = name.split("/")
        for depth in range(2, len(parts)):
            scope, parent = "/".join(parts[:depth]), "/".join(parts[:depth - 1])
            base = re.fullmatch(r"(.+)_\d+", parts[depth - 1])
            if scope not in renames and base and pattern.get(parent, ("", False))[1]:
                renames[scope] = pattern[parent][0] + "/" + base.group(1)
    return {scope: layer for scope, layer in renames.items() if scope != layer}


def _same_name(traced: str, given: str) -> bool:
    """True if ``traced`` is ``given`` as tf.name_scope may have uniquified it."""
    return traced == given or (traced.startswith(given) and _UNIQUIFIED.fullmatch(traced[len(given):]) is not None)


def _layer(name: str, renames: Dict[str, str]) -> str:
    """The node's scope with the longest renamed run of components replaced by its layer path."""
    layer = layer_of(name)
    if not renames:
        return layer
    parts = layer.split("/")
    for start in range(len(parts)):  # gradient_tape/..., inlined call prefixes come first
        for end in range(len(parts), start, -1):
            layer_path = renames.get("/".join(parts[start:end]))
            if layer_path is not None:
                return "/".join(parts[:start] + [layer_path] + parts[end:])
    return layer
