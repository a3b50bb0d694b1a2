"""Reduce a TF2 profiler XSpace (``*.xplane.pb``) to an OpTrace. No TF.

TF2 eager and tf.function steps have no step stats; the profiler's XSpace has per-op
events ("node:Type" on the host executor lines, or a ``tf_op`` stat on device lines) and
MemoryAllocation/MemoryDeallocation events. Ops whose output the allocator did not record
get their output bytes derived from the traced graph (output shape x dtype size at the
step's batch size), labelled DERIVED; with no graph the size is UNKNOWN_BYTES, never 0.
Each op's layer and phase come from ``tb_modelmem.rules.join``, and the allocator events are
replayed by ``readers.allocator_replay`` into a timeline by category and the buffers in use at the peak.
The schema comes from ``tb_modelmem.proto``, so the TensorBoard backend reduces profiles
found in old log dirs without TensorFlow.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import os
import re
import warnings
from typing import AbstractSet, Any, Dict, Iterable, List, Mapping, Optional, Set, Tuple, Union, cast

from tb_modelmem import proto
from tb_modelmem.readers import hlo, xla
from tb_modelmem.readers.allocator_replay import Event, headline_allocators, replay
from tb_modelmem.readers.dtypes import dtype_name
from tb_modelmem.readers.graph_info import GraphInfo, OutputSpec
from tb_modelmem.readers.run_metadata import fused_ops
from tb_modelmem.rules.buffers import (
    batch_of,
    carried,
    format_shape,
    input_carried,
    input_sequence,
    once_per_token,
    step_category,
    under_mixed_policy,
)
from tb_modelmem.rules.join import Joiner, Vocabulary, node_entry
from tb_modelmem.rules.name_stacks import layer_paths, scope_name
from tb_modelmem.schema.names import DERIVED, INPUT, INPUTS_CATEGORY, MEASURED, UNATTRIBUTED_TYPE, UNKNOWN_BYTES
from tb_modelmem.schema.records import BufferTable, OpTable, OpTrace

Dims = Optional[Tuple[Optional[int], ...]]

_ALLOC, _DEALLOC = "MemoryAllocation", "MemoryDeallocation"
_THUNK = "thunk"  # a host event named after an HLO instruction: an XLA:CPU thunk
_UNSEEN = object()  # a metadata id not looked at yet
_ITERATOR_OPS = ("IteratorGetNext", "OptionalGetValue")  # what hands a step its batch
# Host threads of tf.data (its private thread pool, its iterators): ops that run there make the
# step's input (the GatherV2 slicing a batch from the arrays given to Keras' fit), never its forward pass.
_INPUT_LINES = ("tf_data_",)
_VARIANT = "variant"  # the dtype of a TensorList, an Optional, a dataset: a handle to tensors
_EAGER = "EagerLocalExecute: "  # an op run eagerly, e.g. "EagerLocalExecute: Conv2D"
_FUNCTION = "__inference_"  # a concrete function's name begins so: "EagerLocalExecute: __inference_train_step_41238"
_FUNCTION_NAME = re.compile(r"__inference_[\w.]+")
# Host allocators that trace only part of their allocations (TF's default CPU allocator with
# oneDNN sends small requests through an untraced path); a BFC allocator traces every one.
_PARTIAL_ALLOCATORS = frozenset({"cpu", "mklcpu", "cpu_pool"})
NO_ALLOCATIONS_NOTE = ("the profile has no allocation events, so the peak is unknown and output bytes come from "
                       "the graph or the compiled program. On a CPU, TensorFlow's default allocator records none "
                       "without oneDNN (its default on AMD CPUs): set TF_CPU_ALLOCATOR_USE_BFC=true before "
                       "TensorFlow starts (tb_modelmem.enable_full_memory_trace() does it). JAX records none "
                       "on a CPU.")
LARGE_ONLY_NOTE = ("TensorFlow's default CPU allocator records only its large allocations: small buffers are "
                   "missing from the list at the peak and from the allocator's own count, so the peak and its "
                   "split undercount them. Set TF_CPU_ALLOCATOR_USE_BFC=true before TensorFlow starts "
                   "(tb_modelmem.enable_full_memory_trace() does it) to record every allocation.")


def load_xspace(source: Union[str, bytes, "os.PathLike[str]"]) -> Any:
    """Parse an ``.xplane.pb`` file (path) or its bytes into an XSpace proto."""
    if not isinstance(source, bytes):
        with open(source, "rb") as f:
            source = f.read()
    return proto.XSpace.FromString(source)


def functions_run(xspace: Any) -> Set[str]:
    """Names of the tf.functions the profile saw called ("__inference_train_step_41238"), from
    the host's event names, so only the graphs that ran are read (``opgraph.graph_info``)."""
    found: Set[str] = set()
    for plane in xspace.planes:
        if plane.name.startswith("/host:"):
            for meta in plane.event_metadata.values():
                if _FUNCTION in meta.name:
                    found.update(_FUNCTION_NAME.findall(meta.name))
    return found


def reduce_xspace(xspace: Any, graph: Optional[GraphInfo] = None, batch_size: Optional[int] = None,
                  vocabulary: Optional[Vocabulary] = None,
                  weight_shapes: AbstractSet[Tuple[int, ...]] = frozenset()) -> OpTrace:
    """Per-op table, memory over time and at the peak, of the steps in ``xspace``.

    ``graph`` (``capture.opgraph.graph_info``) fills in output bytes the allocator did not
    report and lets the join place ops by the variables they read; ``vocabulary`` names the
    model's layers (the breakdown's); unknown leading dimensions take ``batch_size``, or the
    batch seen in measured shapes. Warns (and still returns what it found) when the profile
    has no op events.
    """
    programs = hlo.programs(xspace)
    tf_ops = not hlo.written_by_jax(xspace)  # a JAX profile's "a:b" host events are its runtime's, not ops
    calls, memory, xla_events, steps = _read_events(xspace, programs, tf_ops)
    step = xla.Step(programs, xla_events) if xla_events else None
    # the variables' global shapes and, under a sharding, the pieces each device's program holds
    weight_shapes = frozenset(weight_shapes) | (step.state_shapes() if step else frozenset())
    if not calls and step is None:
        warnings.warn("tb_modelmem: the profile has no TensorFlow op events (unknown device, or nothing ran "
                      "while profiling)", RuntimeWarning, stacklevel=2)
    graph = graph or GraphInfo({})
    names = [c.name for c in calls.values()] + [_op_name(m.stats) for m in memory if m.is_alloc]
    if step is not None:
        names += [scope_name(name) for name in step.op_names()]
    if not (vocabulary and vocabulary.layers) and step is not None:  # no model: the layers name stacks show
        vocabulary = Vocabulary(layer_paths(step.op_names()))
    joiner = Joiner.reused(vocabulary or Vocabulary([]), graph.graphs, names)
    origin_ps = min([c.first_ps for c in calls.values()] + [m.time_ps for m in memory]
                    + [e.start_ps for e in xla_events], default=0)
    measured = _measured_outputs(memory)
    batch = batch_size or _batch_seen(measured, graph.outputs) or _input_batch(measured, graph.outputs)
    ops = _op_table(calls.values(), measured, graph, batch, joiner, step)
    batch = batch or (step.batch_size() if step else None)
    pipeline = {c.name for c in calls.values() if c.input_calls == c.count}
    input_sizes = _input_sizes(graph, batch) | (step.batch_sizes() if step else set()) | _pipeline_sizes(memory)
    seq = _input_sequence(measured, graph.outputs) or (step.sequence_length() if step else None)
    events = _events(memory, joiner, input_sizes, batch, pipeline, weight_shapes, seq)
    allocations, note = _coverage(memory)
    if not events and step is not None and step.programs and not tf_ops:  # JAX on a CPU or TPU: XLA's plan
        planned = xla.planned_events(step.programs[0], step.first_run_us(), batch, weight_shapes, seq)
        if planned:  # a program that plans nothing leaves the peak unknown, not 0
            events, allocations, note = planned, "planned", xla.PLANNED_NOTE + _on_devices(step)
    if step is not None:
        events = xla.split_temp_allocations(events, step.programs, lambda p, b: step.describe(joiner, p, b), batch,
                                            weight_shapes, seq)
        if allocations == "planned":
            events = xla.recounted(events)
    replayed = replay(events, origin_ps / 1e6, headline_allocators({e.allocator for e in events}))
    if len(steps) > 1 and replayed.timeline.t_us:
        replayed.timeline.step_starts_us = sorted(round((start - origin_ps) / 1e6, 6) for start in steps)
    return OpTrace(source="xspace", ops=ops, peak_bytes=replayed.peak_bytes, peak_time_us=replayed.peak_time_us,
                   timeline=replayed.timeline, devices=sorted(set(ops.column("device"))),
                   steps=max(len(steps) or (step.executions() if step else 0), 1),
                   counts_resident=True, peak_buffers=BufferTable.from_rows(replayed.peak_buffers),
                   allocations=allocations, allocations_note=note, allocators=replayed.allocators,
                   layers=list(joiner.vocabulary.layers), xla=step.summary() if step else None,
                   resident=step.resident() if step else {}, batch_size=batch, sequence_length=seq)


def _on_devices(step: xla.Step) -> str:
    """How many devices ran the planned program, for its note."""
    devices = {r.device for r in step.rows if r.program is step.programs[0]}
    return f" (the same program on each of {len(devices)} devices)." if len(devices) > 1 else "."


@dataclasses.dataclass
class _Calls:
    """Running totals of one op's events on one device."""

    name: str
    op_type: str
    device: str
    count: int = 0
    duration_ps: int = 0
    first_ps: int = 2 ** 63
    input_calls: int = 0  # calls on tf.data's threads (``_INPUT_LINES``)

    def add(self, start_ps: int, duration_ps: int, input_line: bool = False) -> None:
        self.count += 1
        self.duration_ps += duration_ps
        self.first_ps = min(self.first_ps, start_ps)
        self.input_calls += input_line


@dataclasses.dataclass
class _MemoryEvent:
    time_ps: int
    is_alloc: bool
    device: str
    stats: Dict[str, Any]
    input_line: bool = False  # recorded on a tf.data thread: the input pipeline's buffer



def _read_events(xspace: Any, programs: Any, tf_ops: bool
                 ) -> Tuple[Dict[Tuple[str, str], _Calls], List[_MemoryEvent], List[xla.XlaEvent], List[int]]:
    """The profile's events, read once: the ops' running totals by (op, device), the allocator's events,
    the events of XLA programs (``programs``), and when each step (an outermost Python function call) began."""
    calls: Dict[Tuple[str, str], _Calls] = {}
    memory: List[_MemoryEvent] = []
    xla_events: List[xla.XlaEvent] = []
    steps: List[int] = []  # when each began (ps)
    for plane in xspace.planes:
        if not plane.name.startswith(("/host:", "/device:")) or plane.name == hlo.METADATA_PLANE:
            continue
        stat_names = {k: m.name for k, m in plane.stat_metadata.items()}
        device = plane.name
        host = device.startswith("/host:")
        # What an event is depends on its metadata alone (allocator event, or a host op named
        # "node:Type", whose running totals it then is): worked out once per metadata id, not
        # once per event (most repeat; most are not ops at all, e.g. the Eigen threads'
        # ThreadpoolListener). A device op's tf_op may sit in the event's own stats: per event.
        kinds: Dict[int, Any] = {}
        for line in plane.lines:
            if host and line.name == "python":
                steps += _outermost_function_calls(line, stat_names)
            base_ps = line.timestamp_ns * 1000
            input_line = host and line.name.startswith(_INPUT_LINES)
            for event in line.events:
                kind = kinds.get(event.metadata_id, _UNSEEN)
                if kind is None:
                    continue
                if kind is _UNSEEN:
                    kind = kinds[event.metadata_id] = _kind_of(plane, event, stat_names, device, host, calls,
                                                               bool(programs), tf_ops)
                    if kind is None:
                        continue
                if type(kind) is _Calls:  # a host op
                    kind.add(base_ps + event.offset_ps, event.duration_ps, input_line)
                elif kind is _ALLOC or kind is _DEALLOC:
                    memory.append(_MemoryEvent(base_ps + event.offset_ps, kind is _ALLOC, device,
                                               _stats(event.stats, stat_names), input_line))
                else:
                    meta = _event_metadata(plane, event) if kind is _THUNK else kind
                    stats = _stats(list(meta.stats) + list(event.stats), stat_names)
                    if programs and "hlo_op" in stats:  # an XLA program's thunk or kernel
                        xla_events.append(xla.XlaEvent(device, line.name, meta.name, base_ps + event.offset_ps,
                                                       event.duration_ps, {k: stats.get(k) for k in xla.STATS}))
                        continue
                    if kind is _THUNK:  # no: the events of this metadata are the runtime's, not a thunk's
                        kinds[event.metadata_id] = None
                        continue
                    op = _device_op(stats) if tf_ops else None  # a device op (a thunk ended above)
                    if op:
                        _calls_of(calls, op, device).add(base_ps + event.offset_ps, event.duration_ps)
    return calls, memory, xla_events, steps


def _kind_of(plane: Any, event: Any, stat_names: Dict[int, str], device: str, host: bool,
             calls: Dict[Tuple[str, str], _Calls], xla_programs: bool, tf_ops: bool = True) -> Any:
    """What events of this metadata are: _ALLOC or _DEALLOC; on a host, the op's running totals,
    _THUNK (maybe an XLA:CPU thunk, when the profile has XLA programs: the first event's stats
    say), or None (not an op); on a device, the metadata (its events' own stats name their op)."""
    meta = _event_metadata(plane, event)
    name = meta.name  # each read of a proto field makes a new string: once
    if name == _ALLOC or name == _DEALLOC:
        return _ALLOC if name == _ALLOC else _DEALLOC  # the constants: compared by identity
    if not host:
        return meta
    op = _host_op(name, meta.display_name) if tf_ops else None
    if op:
        return _calls_of(calls, op, device)
    return _THUNK if xla_programs else None


def _calls_of(calls: Dict[Tuple[str, str], _Calls], op: Tuple[str, str], device: str) -> _Calls:
    """The running totals of op (node, type) on ``device``, made when first seen."""
    key = (op[0], device)
    found = calls.get(key)
    if found is None:
        found = calls[key] = _Calls(op[0], op[1], device)
    return found


def _stats(stats: Iterable[Any], stat_names: Dict[int, str]) -> Dict[str, Any]:
    out = {}
    for stat in stats:
        kind = stat.WhichOneof("value")
        value = getattr(stat, kind) if kind else None
        out[stat_names.get(stat.metadata_id, "")] = stat_names.get(stat.ref_value, "") if kind == "ref_value" else value
    return out


def _event_metadata(plane: Any, event: Any) -> Any:
    """The event's metadata, or an empty one if the plane has none for it: indexing a proto map
    with a missing key would add the entry, changing the caller's XSpace."""
    found = plane.event_metadata.get(event.metadata_id)
    return found if found is not None else proto.XEventMetadata()


def _device_op(stats: Dict[str, Any]) -> Optional[Tuple[str, str]]:
    """(node, type) of a device event's TF op, from its ``tf_op`` stat ("scope/MatMul:MatMul")."""
    tf_op = stats.get("tf_op")
    if isinstance(tf_op, str) and ":" in tf_op:
        name, _, op_type = tf_op.rpartition(":")
        return name, op_type
    return None


def _host_op(name: str, display_name: str) -> Optional[Tuple[str, str]]:
    """(node, type) of a host event's metadata name, None if it names no op."""
    if display_name and name.endswith(":" + display_name):
        return name[:-len(display_name) - 1], display_name
    eager = name[len(_EAGER):] if name.startswith(_EAGER) else ""
    return (eager, eager) if eager and not eager.startswith("__") else None


def _outermost_function_calls(line: Any, stat_names: Dict[int, str]) -> List[int]:
    """Steps = tf.function calls from Python that are not nested inside another one: when each began (ps)."""
    marker = {k for k, name in stat_names.items() if name == "tf_function_call"}
    starts: List[int] = []
    end_ps = -1
    for event in sorted(line.events, key=lambda e: e.offset_ps):
        if any(s.metadata_id in marker for s in event.stats) and event.offset_ps >= end_ps:
            starts.append(line.timestamp_ns * 1000 + event.offset_ps)
            end_ps = event.offset_ps + event.duration_ps
    return starts


_COLUMNS = ("name", "op_type", "layer", "phase", "device", "calls", "time_us", "fused", "bytes_source",
            "output_bytes", "alloc_bytes", "output_shape", "output_dtype", "source")


def _op_table(calls: Iterable[_Calls], measured: Dict[str, _Measured], graph: GraphInfo, batch: Optional[int],
              joiner: Joiner, step: Optional[xla.Step] = None) -> OpTable:
    """One row per op, made column by column (a ResNet50 step has 8,356: no record object each);
    ``measured``: what the allocator reported per op (``_measured_outputs``); ``step``: the XLA
    programs that ran, one row per instruction (its shape from the program: DERIVED) and one per
    group of their events no rule tied to an instruction."""
    measured = dict(measured)  # each op event takes its own; what is left had no op event
    rows = []
    for acc in calls:
        layer, phase = ("", INPUT) if acc.input_calls == acc.count else joiner.assign(acc.name, acc.op_type)
        rows.append((acc.name, acc.op_type, layer, phase, acc.device, acc.count, acc.duration_ps / 1e6,
                     fused_ops(acc.op_type, acc.name),
                     *_output_figures(measured.pop(acc.name, None), graph, acc.name, batch), ""))
    for name, m in measured.items():  # allocations by ops with no op event: keep every byte
        layer, phase = joiner.assign(name)
        rows.append((name, "", layer, phase, m.device, m.steps, 0.0, [], *_output_figures(m, None, name, batch), ""))
    if step is not None:
        rows += _instruction_rows(step, joiner)
    return OpTable.by_name(dict(zip(_COLUMNS, map(list, zip(*rows)))))


def _instruction_rows(step: xla.Step, joiner: Joiner) -> List[Tuple[Any, ...]]:
    """An XLA step's rows: each instruction that ran, with its output as the program declares it
    (DERIVED), the framework ops it implements and where in the user's code it was traced
    (``Program.source``); then each group of events no rule placed."""
    rows: List[Tuple[Any, ...]] = []
    for row in step.rows:
        instruction = row.instruction
        layer, phase = step.place(joiner, row.program, instruction)
        rows.append((step.name(row.program, instruction), instruction.kind, layer, phase, row.device, row.calls,
                     row.duration_ps / 1e6, list(row.program.framework_ops(instruction.id)[:_MAX_FUSED]), DERIVED,
                     instruction.bytes, 0, instruction.shape, instruction.dtype, row.program.source(instruction)))
    for left in step.unattributed:
        rows.append((left.name, UNATTRIBUTED_TYPE, "", "", left.device, left.calls, left.duration_ps / 1e6, [],
                     UNKNOWN_BYTES, 0, 0, "", "", ""))
    return rows


_MAX_FUSED = 32  # framework ops listed for one instruction (a big fusion implements hundreds)


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


def _output_figures(measured: Optional[_Measured], graph: Optional[GraphInfo], name: str,
                    batch: Optional[int]) -> Tuple[str, int, int, str, str]:
    """(bytes_source, output_bytes, alloc_bytes, output_shape, output_dtype): the allocator's
    figures when the op's output was recorded, else what the graph says (``_from_graph``)."""
    if measured and measured.output_bytes:
        return (MEASURED, measured.output_bytes, measured.alloc_bytes, ";".join(measured.shapes),
                ";".join(measured.dtypes))
    source, output_bytes, shape, dtype = _from_graph(graph, name, batch) if graph else _NO_SPECS
    return source, output_bytes, measured.alloc_bytes if measured else 0, shape, dtype


_NO_SPECS = (UNKNOWN_BYTES, 0, "", "")


def _from_graph(graph: GraphInfo, name: str, batch: Optional[int]) -> Tuple[str, int, str, str]:
    """(bytes_source, output_bytes, output_shape, output_dtype) of op ``name`` at ``batch``:
    shape x dtype size from the graph; UNKNOWN_BYTES when it cannot say (no such op, or a
    dimension only known at run time). Worked out once per graph (``GraphInfo.derived``)."""
    found = graph.derived.get((name, batch))
    if found is None:
        specs = node_entry((graph.outputs,), name)
        if not specs:
            found = _NO_SPECS
        else:
            same = (tuple(specs), batch)  # a ResNet50 step's 7,571 ops with specs have 53 distinct
            found = graph.derived.get(same)
            if found is None:
                found = graph.derived[same] = _derive(specs, batch)
        graph.derived[(name, batch)] = found
    return found


def _derive(specs: List[OutputSpec], batch: Optional[int]) -> Tuple[str, int, str, str]:
    """A variant output (a TensorList of an RNN's loop, a dataset) holds tensors its spec does not
    describe: its bytes are unknown, never the 0 of its scalar handle."""
    dims = [_at_batch(d, batch) for d, _, _ in specs]
    sizes = [None if name == _VARIANT else _nbytes(d, size) for d, (_, name, size) in zip(dims, specs)]
    shape = ";".join("?" if d is None else format_shape(d) for d in dims)
    dtype = ";".join(dict.fromkeys(name for _, name, _ in specs))
    known = [size for size in sizes if size is not None]
    if len(known) < len(sizes):
        return UNKNOWN_BYTES, 0, shape, dtype
    return DERIVED, sum(known), shape, dtype


def _batch_seen(measured: Dict[str, _Measured], graph: Mapping[str, List[OutputSpec]]) -> Optional[int]:
    """The batch size of the profiled steps, from a measured output whose graph shape has it unknown."""
    for name, m in measured.items():
        specs = node_entry((graph,), name)
        if not specs or len(m.shapes) != 1 or not specs[0][0] or specs[0][0][0] is not None:
            continue
        seen = m.shapes[0].strip("[]").split(",")
        if len(seen) == len(specs[0][0]) and seen[0].isdigit():
            return int(seen[0])  # the dimension the graph left unknown, whatever the rank
    return None


def _input_batch(measured: Dict[str, _Measured], graph: Mapping[str, List[OutputSpec]]) -> Optional[int]:
    """The batch size of the profiled steps, from the step's input (the iterator's first output): its
    measured shape, else the shape its graph traced it with."""
    for name in sorted(filter(_is_iterator_output, set(measured) | set(graph))):
        m = measured.get(name)
        found = batch_of(m.shapes[0].strip("[]").split(",") if m and m.shapes else [])
        specs = node_entry((graph,), name)
        if found is None and specs and specs[0][0]:
            found = batch_of(specs[0][0])
        if found is not None:
            return found
    return None


def _input_sequence(measured: Dict[str, _Measured], graph: Mapping[str, List[OutputSpec]]) -> Optional[int]:
    """Tokens per sample of the profiled steps (``rules.buffers.input_sequence``) from the step's input: the
    shape its graph traced it with (a dimension it left unknown from the measured shape), else, with no
    graph, its measured shape and dtype."""
    for name in sorted(filter(_is_iterator_output, set(measured) | set(graph))):
        m = measured.get(name)
        seen = [tuple(int(d) if d.isdigit() else None for d in shape.strip("[]").split(","))
                for shape in (m.shapes if m else [])]
        specs = node_entry((graph,), name)
        candidates = ([(dims, dtype) for dims, dtype, _ in specs] if specs
                      else list(zip(seen, m.dtypes if m else [])))
        for i, (dims, dtype) in enumerate(candidates):
            if dims is None:
                continue
            if i < len(seen) and len(seen[i]) == len(dims):  # a dimension the graph left unknown, as measured
                dims = tuple(d if d is not None else s for d, s in zip(dims, seen[i]))
            length = input_sequence(dims, dtype)
            if length:
                return length
    return None


def _at_batch(dims: Dims, batch: Optional[int]) -> Dims:
    if dims and dims[0] is None and batch:
        return (batch,) + tuple(dims[1:])
    return dims


def _nbytes(dims: Dims, itemsize: int) -> Optional[int]:
    """Bytes of an output, None when its shape is not fully known. A resource handle owns no
    buffer: 0 (a variant's contents are ``_derive``'s to call unknown)."""
    if not itemsize:
        return 0
    if dims is None or any(d is None for d in dims):
        return None
    return math.prod(cast(Tuple[int, ...], dims)) * itemsize


def _op_name(stats: Dict[str, Any]) -> str:
    """The op a memory event's ``tf_op`` stat names ("scope/MatMul" or "scope/MatMul:MatMul"),
    without the type, as the op table names it; "" if it names none."""
    tf_op = stats.get("tf_op")
    return tf_op.partition(":")[0] if isinstance(tf_op, str) else ""


def _input_sizes(graph: GraphInfo, batch: Optional[int]) -> Set[int]:
    """Bytes of each tensor the step takes in (the iterator's outputs at the step's batch): a buffer
    of exactly that size with no op, or allocated before the window, is a batch of input."""
    sizes = set()
    for name in filter(_is_iterator_output, graph.outputs):  # names only: specs are read when asked
        for dims, _, itemsize in graph.outputs[name]:
            size = _nbytes(_at_batch(dims, batch), itemsize)
            if size:
                sizes.add(size)
    return sizes


def _is_iterator_output(name: str) -> bool:
    """Whether op ``name`` is the iterator's ("IteratorGetNext", "OptionalGetValue_3"). Both have
    "Get": that substring test first, as a step's graph has ~14,000 names and one or two such ops."""
    return "Get" in name and name.rpartition("/")[2].startswith(_ITERATOR_OPS)


def _events(memory: List[_MemoryEvent], joiner: Joiner, input_sizes: AbstractSet[int] = frozenset(),
            batch: Optional[int] = None, pipeline: AbstractSet[str] = frozenset(),
            weight_shapes: AbstractSet[Tuple[int, ...]] = frozenset(), seq: Optional[int] = None) -> List[Event]:
    """Allocator events for ``allocator_replay.replay``: each allocation categorised by its op's phase,
    with whether it carries the ``batch``, how many times the sequence length ``seq`` (a batch-carrying one
    of an op run once per token once more, ``_per_token``), and what it would be under a mixed policy.
    Deallocations carry no ``tf_op``; replay names the op that allocated the address. A buffer
    with no op (tf.data's own) or from before the window whose size is an input's is an input, and
    so is one made on tf.data's threads or by an op that ran only there (``pipeline``)."""
    out = []
    made: List[Event] = []  # the allocations, and their ops' phases
    phases: List[str] = []
    last: Dict[str, float] = {}  # allocator -> its count after the previous event
    for m in sorted(memory, key=lambda e: e.time_ps):
        stats = m.stats
        allocator = str(stats.get("allocator_name", ""))
        in_use = float(stats.get("bytes_allocated") or 0)
        # A profile that omits the sizes still has the allocator's count before and after.
        size = int(stats.get("allocation_bytes") or stats.get("requested_bytes")
                   or abs(in_use - last.get(allocator, 0)))
        last[allocator] = in_use
        event = Event(t_us=m.time_ps / 1e6, delta=size if m.is_alloc else -size, key=(allocator, stats.get("addr")),
                      allocator=allocator, region=str(stats.get("region_type") or ""), in_use=in_use,
                      lifetime_peak=float(stats.get("peak_bytes_in_use") or 0),
                      fragmentation=_fraction(stats.get("fragmentation")))
        requested = int(stats.get("requested_bytes") or 0)
        event.requested = requested
        if m.is_alloc:
            event.op = _op_name(stats)
            phase = INPUT if m.input_line or event.op in pipeline else joiner.assign(event.op)[1] if event.op else ""
            event.category = (INPUTS_CATEGORY if not event.op and requested in input_sizes
                              else step_category(phase, event.region))
            event.shape = str(stats.get("shape") or "")
            event.dtype = dtype_name(int(stats.get("data_type") or 0)) if stats.get("data_type") else ""
            event.batch, event.seq = carried(event.shape, batch, weight_shapes, seq)
            if event.category == INPUTS_CATEGORY and not event.batch:
                event.batch, event.seq = input_carried(event.shape, batch, seq)
            made.append(event)
            phases.append(phase)
        elif requested in input_sizes:
            event.category = INPUTS_CATEGORY  # read only if it was allocated before the window
            event.batch = True
            event.seq = 1 if seq else 0  # a batch of [batch, seq] tokens
        out.append(event)
    per_token = _per_token([e.op for e in made], seq)
    for event in made:
        if event.batch and event.op in per_token:
            event.seq = min(event.seq + 1, 2)
    for i, role in under_mixed_policy([e.op for e in made], phases, [e.batch for e in made],
                                      [e.dtype for e in made],
                                      [(e.requested or e.delta) if e.region == "output" else 0 for e in made]).items():
        made[i].mixed = role
    return out


def _per_token(ops: List[str], seq: Optional[int]) -> Set[str]:
    """The ops that run once per token: those whose allocations in the window are a multiple of ``seq`` times
    the most common count, what an op run once per training step makes (Keras' LSTM and GRU on TensorFlow loop
    over the time steps in a ``while``, the input unstacked into a TensorList of one element per step, and
    their gradients; a tf.function that runs several steps, ``steps_per_execution``, multiplies every count
    alike), and every op of the innermost loop one of them runs in (its ``while.../body/`` scope: a turn may
    reuse a buffer and allocate once less)."""
    counts: Dict[str, int] = collections.Counter(op for op in ops if op)
    if not counts:
        return set()
    once = collections.Counter(counts.values()).most_common(1)[0][0]
    repeated = {op for op, count in counts.items() if once_per_token(count, once, seq)}
    loops = {loop for loop in map(_loop_of, repeated) if loop}
    return repeated | {op for op in counts if _loop_of(op) in loops}


def _loop_of(op: str) -> str:
    """The innermost ``while`` loop an op runs in ("…/lstm_1/while", "…/while_grad"), "" if none."""
    found = _LOOP.match(op)
    return found.group(1) if found else ""


_LOOP = re.compile(r"(.*/while[^/]*)/body/")


def _fraction(value: Any) -> Optional[float]:
    """A 0..1 figure the allocator reports (BFC's fragmentation), or None."""
    return float(value) if isinstance(value, (int, float)) and 0 <= value <= 1 else None


def _pipeline_sizes(memory: List[_MemoryEvent]) -> Set[int]:
    """Bytes of the op outputs tf.data's threads allocated in the window (the next batch, sliced by a
    GatherV2): a buffer from before the window of one of these sizes is the batch the step runs on."""
    return {int(m.stats.get("requested_bytes") or 0) for m in memory if m.is_alloc and m.input_line
            and m.stats.get("region_type") == "output" and _op_name(m.stats)} - {0}


def _coverage(memory: List[_MemoryEvent]) -> Tuple[str, str]:
    """Which allocations the profile recorded ("all", "large", "none") and what that means."""
    if not memory:
        return "none", NO_ALLOCATIONS_NOTE
    allocators = {str(m.stats.get("allocator_name", "")) for m in memory}
    if allocators & _PARTIAL_ALLOCATORS:
        return "large", LARGE_ONLY_NOTE
    return "all", ""
