"""A PyTorch profiler trace (``*.pt.trace.json``, ``.json.gz``: Chrome trace events) reduced to an
``OpTrace``. No torch, no TF.

What is read: ``cpu_op`` events (a row per top-level op and layer, over calls: an op inside another op
is its parent's), the ranges around them (``ProfilerStep#N`` counts the steps; what each range says of
the layer and phase of the ops inside is ``rules.phases``: tb_modelmem's annotations, torch.optim's,
Lightning's, ``nn.Module:`` python ranges), autograd's ``Sequence number`` (a backward op is on its
forward op's layer; one outside every range that autograd numbered is forward), in each iteration what
runs before the forward pass in no other phase (input), CUDA kernels tied to the op that launched them
by correlation id, and
the ``[memory]`` instants: every allocation and free, each in its op, replayed for the timeline, the
peak and the buffers in use at it (``allocator_replay``), each with the shape the op that made it says
(``torch_shapes``: from its recorded inputs, with ``record_shapes=True``), and so whether it carries the
batch and the sequence; one whose shape no input says stays unknown.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import functools
import math
from typing import AbstractSet, Any, Dict, FrozenSet, Iterable, List, Optional, Sequence, Set, Tuple

import orjson

from tb_modelmem.messages import first_line
from tb_modelmem.readers.allocator_replay import Event, replay
from tb_modelmem.readers.bounded import InspectError, maybe_gunzip, read_file
from tb_modelmem.readers.torch_shapes import (
    MAX_BYTES,
    allocated_shape,
    inputs_by_bytes,
    is_product,
    is_row_statistics,
    is_shape,
    tensor_shapes,
)
from tb_modelmem.rules import caching_allocator, phases, torch_optimizers
from tb_modelmem.rules.buffers import (
    Lived,
    batch_of,
    carried,
    format_shape,
    input_sequence,
    lived_categories,
    once_per_token,
    shape_dims,
    weight_shaped,
)
from tb_modelmem.rules.phases import BACKWARD_PREFIX, ITERATION_RANGE
from tb_modelmem.schema.dtypes import FLOAT_DTYPES, canonical
from tb_modelmem.schema.limits import MAX_DECODED_BYTES
from tb_modelmem.schema.names import (
    BACKWARD,
    COLLECTIVE,
    FORWARD,
    INPUT,
    MAX_OPTIMIZER_CLASSES,
    MAX_POSITION_TABLES,
    MEASURED,
    OPTIMIZER,
    TEMPORARIES_CATEGORY,
    TORCH_PROFILER_SOURCE,
    natural_key,
)
from tb_modelmem.schema.records import BufferTable, OpRecord, OpTable, OpTrace

SOURCE = TORCH_PROFILER_SOURCE
MAX_TRACE_BYTES = 8 * MAX_DECODED_BYTES  # a trace's JSON, decompressed (1 GiB)
_CPU, _CUDA = 0, 1  # a [memory] event's "Device Type"
MAX_TIME_US = 1e15  # a timestamp or duration, in microseconds (31 years)
MAX_DEVICES = 1 << 16
# Annotations open at once that place ops (a real trace's: a step, the optimizer's, a module path tens deep): past
# it, each op would scan thousands (a crafted trace nests 20,000 in 110 KB), so further ones place nothing.
MAX_OPEN_RANGES = 512
_KEYS = ("pid", "tid")  # what an event is grouped by: a str or an int, never a container
_ARG_KEYS = ("correlation", "Addr", "Device Id")


def is_trace_name(name: str) -> bool:
    """What ``torch.profiler.tensorboard_trace_handler`` names its files (``use_gzip=True``: ``.gz``)."""
    return name.endswith((".pt.trace.json", ".pt.trace.json.gz"))


def worker_of(name: str) -> Optional[str]:
    """The worker a ``tensorboard_trace_handler`` file is of (``<worker>.<time_ns>.pt.trace.json``: a rank's
    ``worker_name``, else ``<host>_<pid>``), None for a name it did not make."""
    stem = name[:-len(".gz")] if name.endswith(".gz") else name
    worker, _, stamp = stem[:-len(".pt.trace.json")].rpartition(".")
    return worker if worker and stamp.isdigit() and stem.endswith(".pt.trace.json") else None


def job_ranks(traces: List[str]) -> Dict[str, str]:
    """{worker: file} when the trace file names ``traces`` of one folder are one job's ranks: two or more, each of
    another worker; else {}. Names alone say it: two runs of a one-process script under the handler's default
    ``<host>_<pid>`` names read as two ranks too (in the tab and the CLI alike)."""
    workers = {name: worker_of(name) for name in traces}
    named = {worker for worker in workers.values() if worker}
    if len(traces) < 2 or None in workers.values() or len(named) != len(traces):
        return {}
    return {worker: name for name, worker in workers.items() if worker}


def first_rank(ranks: Dict[str, str]) -> str:
    """The worker a job's traces are read at unless one is asked for: the first as people count ("rank0" of
    ``worker_name=f"rank{rank}"``; of the handler's default ``<host>_<pid>`` names, the lowest pid's)."""
    return min(ranks, key=natural_key)


class TraceError(ValueError):
    """The file is no PyTorch trace this reader can read (said for that file alone)."""


def load(data: bytes, limit: int = MAX_TRACE_BYTES) -> Dict[str, Any]:
    """The trace's JSON object, from the file's bytes (gzipped or not), of at most ``limit`` bytes inflated."""
    try:
        data = maybe_gunzip(data, limit, "the trace")
    except InspectError as e:
        raise TraceError(str(e)) from None
    try:
        trace = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise TraceError(f"not JSON: {e}") from None
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise TraceError("no traceEvents list: not a PyTorch profiler trace")
    return trace


@dataclasses.dataclass
class _Op:
    """One top-level op call."""

    name: str
    ts: float
    end: float
    tid: Any
    layer: str = ""
    phase: str = ""
    device: str = "cpu"
    kernel_us: float = 0.0
    allocated: int = 0  # bytes it allocated
    kept: int = 0  # of them, bytes still allocated when it ended (its outputs)
    seq: Optional[int] = None
    dims: Any = None  # its inputs' shapes, as recorded ("Input Dims")
    types: Any = None  # and their types ("Input type")
    time_first: Optional[bool] = None  # a recurrent call's: its input time first (``batch_first=False``); None untold
    in_step: bool = False  # inside a train step tb_modelmem annotated
    iteration: Optional[float] = None  # start of the ProfilerStep#N range it ran in
    in_closure: bool = False  # directly inside torch's Optimizer.step (``rules.phases.in_closure``)
    row: str = ""  # the name of its row in the op table (``_name_rows``)
    nested_us: float = 0.0  # of its time, what its own-row ops took (collectives, a compiled graph's ops)
    graph: Optional["_Op"] = None  # the top-level torch.compile graph op it ran in: its layer and phase
    pid: Any = None  # its process (a job's ranks may share a trace file)
    serves: str = ""  # a collective's pass, FORWARD or BACKWARD (``phases.collective_place``), "" when untold
    moved: int = 0  # bytes a collective's message holds (``_message_bytes``), 0 when untold
    inner_seqs: List[int] = dataclasses.field(default_factory=list)  # autograd numbers of the ops inside it


def read_trace_file(path: str) -> OpTrace:
    """A trace file on disk (or remote), read capped and reduced; ``InspectError`` naming it if it is none."""
    try:
        return reduce_trace(load(read_file(path, MAX_TRACE_BYTES, "PyTorch trace")))
    except TraceError as e:
        raise InspectError(f"{path}: {first_line(e)}") from None


def holds_ops(trace: OpTrace) -> bool:
    """Whether a reduced trace ran any op: a profile closed mid-cycle writes one of its metadata alone, and what
    reads a run's newest trace reads the newest that holds ops."""
    return len(trace.ops) > 0


def reduce_trace(trace: Dict[str, Any]) -> OpTrace:
    """The per-op table, timeline and peak of a PyTorch profiler trace (see the module docstring)."""
    events, skipped = _valid_events(trace["traceEvents"])
    by_thread: Dict[Any, List[Dict[str, Any]]] = collections.defaultdict(list)
    kernels: Dict[Any, List[Dict[str, Any]]] = collections.defaultdict(list)  # correlation -> kernels
    steps = 0
    classes: Dict[str, None] = {}  # the optimizer classes the step ranges name, in order
    inputs = _RecordedInputs()
    for e in events:
        cat, ph = e.get("cat"), e.get("ph")
        if ph == "X" and cat in ("cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver"):
            if _number(e.get("ts")) and _number(e.get("dur")):
                by_thread[(e.get("pid"), e.get("tid"))].append(e)
                inputs.note(e)
                name = str(e.get("name", "")) if cat == "user_annotation" else ""
                if name.startswith(ITERATION_RANGE):
                    steps += 1
                elif name and len(classes) < MAX_OPTIMIZER_CLASSES and (named := phases.step_range_class(name)):
                    classes.setdefault(named)
        elif ph == "X" and cat in ("kernel", "gpu_memcpy", "gpu_memset") and _number(e.get("dur")):
            kernels[_args(e).get("correlation")].append(e)
        elif ph == "i" and e.get("name") == "[memory]" and "ts" in e:
            by_thread[(e.get("pid"), e.get("tid"))].append(e)
    ops: List[_Op] = []
    allocations: List[Tuple[Dict[str, Any], Optional[_Op]]] = []
    makers: Dict[int, Tuple[Dict[str, Any], ...]] = {}
    followers: Dict[int, Tuple[Dict[str, Any], _Op]] = {}
    step_annotations = 0
    for thread_events in by_thread.values():
        found, memory, annotated_steps = _walk_thread(thread_events, kernels, makers, followers)
        ops.extend(found)
        allocations.extend(memory)
        step_annotations += annotated_steps
    _place_backward(ops)
    _match_backend_work(ops)
    for op in ops:
        op.phase = phases.closure_phase(op.phase, op.in_closure, op.seq is not None or bool(op.inner_seqs))
    # before ops no range placed are given a phase (a metric after the step is none); where no optimizer's range
    # ran (an update by hand, pytorch/examples' word_language_model): the shapes autograd accumulated gradients into
    # and the parameters modules' ops took, frozen ones too (a LoRA model's base: no optimizer reads them)
    weights = (_weights(ops) or (frozenset(inputs.accumulated) if not classes else frozenset())) | frozenset(
        inputs.taken)
    if any(op.in_step for op in ops):  # steps tb_modelmem annotated: what runs between them feeds them
        for op in ops:
            if not op.in_step and not op.phase:
                op.phase = INPUT
    notes = _window_cut(ops) + _unplaced_collectives(ops)
    iterations: Dict[Optional[float], List[_Op]] = collections.defaultdict(list)
    for op in ops:
        iterations[op.iteration].append(op)
    for members in iterations.values():
        placed = phases.by_iteration([(op.ts, op.end, op.phase, bool(op.layer)) for op in members],
                                     [op.seq is not None or bool(op.inner_seqs) for op in members])
        for op, phase in zip(members, placed):
            op.phase = phase
    for op in ops:  # a compiled graph's ops ran where it ran
        if op.graph is not None:
            op.layer, op.phase = op.graph.layer, op.graph.phase
    forward = sorted((op for op in ops if op.phase == FORWARD and isinstance(op.dims, list)), key=lambda op: op.ts)
    batch, time_first = _batch(ops, forward, weights)
    seq = _sequence(forward, batch, time_first)
    windowed = steps or step_annotations or 1
    tables = _position_tables(forward, batch, seq)
    head_width = _head_width(forward, batch, seq)
    sizes = _Sizes(makers, batch, seq, weights, followers, _RECURRENT | _cells_per_token(ops, seq, windowed),
                   frozenset(tables))
    reduced = _table(ops, allocations, windowed, sizes)
    reduced.compiled_layers = sorted({op.layer for op in ops if phases.is_compiled_graph(op.name) and op.layer})
    update = [op.name for op in ops if _in_step(op)]
    reduced.optimizer_path = torch_optimizers.path_of(update) if update else ""
    reduced.optimizer_classes = list(classes)
    reduced.compute_dtype = inputs.compute_dtype()
    reduced.head_width = head_width
    reduced.allocations_note = "; ".join(filter(None, [reduced.allocations_note] + notes))
    if skipped:
        reduced.allocations_note = "; ".join(filter(None, [reduced.allocations_note, (
            f"{skipped:,} malformed events skipped (a field of the wrong type or out of any real range)")]))
    return reduced


def _valid_events(raw: Any) -> Tuple[List[Dict[str, Any]], int]:
    """The events whose fields this reader uses have the types and ranges a real trace gives them,
    and how many others were skipped (each is that event's fault alone, never the trace's)."""
    kept: List[Dict[str, Any]] = []
    for e in raw:
        if isinstance(e, dict) and _valid(e):
            kept.append(e)
    return kept, len(raw) - len(kept)


def _valid(e: Dict[str, Any]) -> bool:
    if not all(_atom(e.get(k)) for k in _KEYS) or not isinstance(e.get("name", ""), str):
        return False
    if ("ts" in e and not _time(e["ts"])) or ("dur" in e and not _time(e["dur"])):
        return False
    args = e.get("args")
    if args is None:
        return True
    if not isinstance(args, dict) or not all(_atom(args.get(k)) for k in _ARG_KEYS):
        return False
    size, total, device = args.get("Bytes"), args.get("Total Allocated"), args.get("Device Id")
    return ((device is None or (type(device) is int and -1 <= device < MAX_DEVICES))  # -1: the CPU
            and (size is None or (_number(size) and abs(size) <= MAX_BYTES))
            and (total is None or (_number(total) and 0 <= total <= MAX_BYTES)))


def _atom(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float))


def _time(value: Any) -> bool:
    return _number(value) and math.isfinite(value) and abs(value) <= MAX_TIME_US


def _walk_thread(events: List[Dict[str, Any]], kernels: Dict[Any, List[Dict[str, Any]]],
                 makers: Dict[int, Tuple[Dict[str, Any], ...]], followers: Dict[int, Tuple[Dict[str, Any], _Op]]
                 ) -> Tuple[List[_Op], List[Tuple[Dict[str, Any], Optional[_Op]]], int]:
    """One thread's top-level ops with their layer and phase, and each memory event with its op (and in
    ``makers``, by the memory event's id, the events of the ops open when it happened, innermost last: its
    inputs say the allocation's shape, ``_Sizes``; in ``followers``, where the innermost recorded no shape, the
    next top-level op, which likely reads it)."""
    # ranges before what they contain; at one instant, ranges open before memory events are placed
    ordered = sorted(events, key=lambda e: (float(e["ts"]), e.get("ph") == "i", -float(e.get("dur") or 0)))
    # Ops nest (a stack); annotations need not (Lightning's ProfilerStep#N ends inside Optimizer.step):
    # those open are every range not yet ended, in the order they began (innermost last).
    stack: List[Tuple[float, str, Any, Dict[str, Any]]] = []  # (end, "op"/"child", the op it is or is in, its event)
    ranges: List[Tuple[float, str, str, float]] = []  # (end, kind, what, start): the annotations open
    ops: List[_Op] = []
    memory: List[Tuple[Dict[str, Any], Optional[_Op]]] = []
    unshaped: List[Dict[str, Any]] = []  # memory events whose maker recorded no shape, waiting for the next op
    shapeless: Dict[int, bool] = {}  # by an op's event: it recorded no input's shape (worked out once per op)
    steps = 0
    for e in ordered:
        ts = float(e["ts"])
        instant = e.get("ph") == "i"
        while stack and (stack[-1][0] < ts if instant else stack[-1][0] <= ts):
            stack.pop()
        ranges = [r for r in ranges if (r[0] >= ts if instant else r[0] > ts)]
        op = stack[-1][2] if stack else None  # the innermost op open, in one step (a crafted trace nests 20,000)
        if instant:
            memory.append((e, op))
            if stack:  # what allocated it: the innermost op open, and the ops it runs inside
                makers[id(e)] = tuple(entry[3] for entry in stack[-_MAKER_DEPTH:])
                maker = stack[-1][3]
                if id(maker) not in shapeless:
                    shapeless[id(maker)] = not _recorded_a_shape(maker)
                if shapeless[id(maker)]:
                    unshaped.append(e)
            continue
        end = ts + float(e["dur"])
        name, cat = str(e.get("name", "")), e.get("cat")
        if cat in ("cuda_runtime", "cuda_driver"):
            launched = kernels.get(_args(e).get("correlation"), ())
            if op is not None and launched:
                op.kernel_us += sum(float(k["dur"]) for k in launched)
                op.device = f"cuda:{_args(launched[0]).get('device', 0)}"
            continue
        if phases.is_collective(name) and cat != "python_function":
            # its own row wherever it runs: DDP's all-reduce launched in a backward op (out of that op's
            # time), a backend's own work range on its thread (gloo:all_reduce), a call in the loop
            if op is not None:
                op.nested_us += end - ts
            found = _Op(name=name, ts=ts, end=end, tid=e.get("tid"), phase=COLLECTIVE, dims=_args(e).get("Input Dims"),
                        moved=_message_bytes(_args(e)), pid=e.get("pid"))
            in_backward = op is not None and (op.phase == BACKWARD or op.name.startswith("torch::autograd::"))
            found.layer, found.serves = phases.collective_place([(k, w) for _, k, w, _ in ranges], in_backward)
            ops.append(found)
            stack.append((end, "op", found, e))
            continue
        if cat == "user_annotation" or cat == "python_function":
            found_range = phases.range_of(name)
            if found_range is not None and len(ranges) < MAX_OPEN_RANGES:
                ranges.append((end, found_range[0], found_range[1], ts))
                steps += found_range[0] == "step"
            continue
        if op is not None and phases.is_compiled_graph(op.name) and name != op.name:  # its own row
            op.nested_us += end - ts
            found = _in_graph(op.graph or op, e, name, ts, end)
            ops.append(found)
            stack.append((end, "op", found, e))
            continue
        if op is not None:  # an op inside an op: its parent's (autograd may number the inner one: addmm in linear)
            child_seq = _int(_args(e).get("Sequence number"))
            if child_seq is not None and not name.startswith(BACKWARD_PREFIX):
                op.inner_seqs.append(child_seq)
            stack.append((end, "child", op, e))
            continue
        found = _top_level(e, name, ts, end, ranges)
        for waiting in unshaped:
            followers[id(waiting)] = (e, found)
        unshaped.clear()
        ops.append(found)
        stack.append((end, "op", found, e))
    return ops, memory, steps


def _top_level(e: Dict[str, Any], name: str, ts: float, end: float,
               ranges: List[Tuple[float, str, str, float]]) -> _Op:
    """A top-level op, its layer, phase and step from the annotations open around it."""
    args = _args(e)
    found = _Op(name=name[len(BACKWARD_PREFIX):] if name.startswith(BACKWARD_PREFIX) else name, ts=ts, end=end,
                tid=e.get("tid"), seq=_int(args.get("Sequence number")), dims=args.get("Input Dims"),
                types=args.get("Input type"), time_first=_time_first(name, args))
    open_ranges = [(kind, what) for _, kind, what, _ in ranges]
    found.layer, found.phase = phases.where(open_ranges, name.startswith(BACKWARD_PREFIX))
    found.in_closure = phases.in_closure(open_ranges)
    found.in_step = any(kind == "step" for _, kind, _, _ in ranges)
    found.iteration = max((start for _, kind, _, start in ranges if kind == "iteration"), default=None)
    return found


def _time_first(name: str, args: Dict[str, Any]) -> Optional[bool]:
    """Whether a recurrent call (``aten::lstm``, ``gru``, ``rnn_*`` on a padded input, ``[time, batch, features]``
    or ``[batch, time, features]``) runs time first: its last argument, ``batch_first``, as recorded (``Concrete
    Inputs``, torch 2.1 on); None for another op, a packed input (2-D, whose last argument is ``bidirectional``),
    or a trace that did not record it."""
    if name not in _RECURRENT_CALLS:
        return None
    dims, flags = args.get("Input Dims"), args.get("Concrete Inputs")
    if not (isinstance(dims, list) and dims and is_shape(dims[0]) and len(dims[0]) == 3 and isinstance(flags, list)
            and flags and flags[-1] in ("True", "False")):
        return None
    return flags[-1] == "False"


def _in_graph(graph: _Op, e: Dict[str, Any], name: str, ts: float, end: float) -> _Op:
    """An op a compiled graph ran, its own row where the graph ran; a backward pass run from inside a graph
    (a graph break at ``loss.backward()``, Keras' compiled train step) is backward, on the graph's layer."""
    args = _args(e)
    seq = _int(args.get("Sequence number"))
    if name.startswith(BACKWARD_PREFIX):
        return _Op(name=name[len(BACKWARD_PREFIX):], ts=ts, end=end, tid=e.get("tid"), layer=graph.layer,
                   phase=BACKWARD, seq=seq, dims=args.get("Input Dims"), types=args.get("Input type"))
    if seq is not None:  # autograd numbered the graph's function: the graph is numbered
        graph.inner_seqs.append(seq)
    return _Op(name=name, ts=ts, end=end, tid=e.get("tid"), seq=seq, dims=args.get("Input Dims"),
               types=args.get("Input type"), graph=graph)


def _window_cut(ops: List[_Op]) -> List[str]:
    """Whether the profiled window cut an iteration: its first iteration (``ProfilerStep#N``) begins with
    backward or optimizer work, the tail of the one before (Lightning's own profiler steps after
    ``training_step``). Said; the ops keep the phases their ranges give them."""
    iterations = [op.iteration for op in ops if op.iteration is not None]
    if not iterations:
        return []
    first = min(iterations)
    members = sorted((op for op in ops if op.iteration == first), key=lambda op: op.ts)
    forward = next((op.ts for op in members if op.phase == FORWARD and op.layer), None)
    cut = sum(1 for op in members if op.phase in (BACKWARD, OPTIMIZER) and (forward is None or op.ts < forward))
    if not cut:
        return []
    return [f"the profiled window starts inside an iteration: its first iteration begins with {cut:,} backward or "
            "optimizer ops of the one before (a profiler stepped mid-iteration, as Lightning's PyTorchProfiler does "
            "after training_step); tb_modelmem's callbacks profile whole iterations"]


def _place_backward(ops: List[_Op]) -> None:
    """A backward op is on the layer of the forward op with its autograd sequence number."""
    forward = {seq: op.layer for op in ops if op.phase != BACKWARD and op.layer
               for seq in ([op.seq] if op.seq is not None else []) + op.inner_seqs}
    for op in ops:
        if op.phase == BACKWARD and not op.layer and op.seq is not None:
            op.layer = forward.get(op.seq, "")


def _table(ops: List[_Op], allocations: List[Tuple[Dict[str, Any], Optional[_Op]]], steps: int,
           sizes: "_Sizes") -> OpTrace:
    allocations = sorted(allocations, key=lambda a: float(a[0].get("ts") or 0))  # in time order, once for all
    _charge(allocations)
    _name_rows(ops)
    rows: Dict[Tuple[str, str, str, str, str], OpRecord] = {}
    layers: List[str] = []
    for op in ops:
        key = (op.layer, op.name, op.device, op.phase, op.serves)
        row = rows.get(key)
        if row is None:
            row = rows[key] = OpRecord(name=op.row, op_type=op.name, layer=op.layer, device=op.device, calls=0,
                                       bytes_source=MEASURED, phase=op.phase)
            if op.layer and op.layer not in layers:
                layers.append(op.layer)
        row.calls += 1
        row.moved_bytes = min(row.moved_bytes + op.moved, _MAX_ELEMENTS * 2 ** 8)  # int64 whatever the file says
        row.time_us += op.kernel_us if op.device != "cpu" else op.end - op.ts - op.nested_us
        row.output_bytes += op.kept
        row.alloc_bytes += op.allocated
    events, origin, devices, carried = _allocator_events(allocations, sizes)
    headline = _headline(devices)
    replayed = replay(events, origin, headline)
    replayed.timeline.update_starts_us = _update_starts(ops, origin, replayed.timeline.t_us)
    plan = caching_allocator.plan_of(events, next(iter(headline))) if headline and len(headline) == 1 else None
    return OpTrace(source=SOURCE, ops=OpTable.by_name(rows.values()), peak_bytes=replayed.peak_bytes,
                   peak_time_us=replayed.peak_time_us, timeline=replayed.timeline, devices=sorted(devices),
                   steps=steps, counts_resident=headline is not None and "cpu" not in headline,
                   peak_buffers=BufferTable.from_rows(replayed.peak_buffers),
                   allocations="all" if events else "none",
                   allocations_note=(f"torch's CPU count held {carried:,} B when the window began (an earlier "
                                     "profile in this process: torch does not reset it): counted from the window's "
                                     "start" if carried else "") if events else
                   _no_memory_note(bool(rows)),
                   allocators=replayed.allocators, layers=layers, batch_size=sizes.batch,
                   sequence_length=sizes.seq, position_tables=[list(table) for table in sorted(sizes.tables)],
                   # a position table's rows are positions: no dimension a buffer could have for another reason
                   weight_dims=sorted({d for shape in sizes.weights
                                       for d in (shape[1:] if shape in sizes.tables else shape)}),
                   caching_plan=plan)


@dataclasses.dataclass
class _RecordedInputs:
    """What some ops' recorded inputs say of the model, gathered in the first pass over every op (nested ones too)."""

    accumulated: Set[Tuple[int, ...]] = dataclasses.field(default_factory=set)  # the shapes autograd accumulated a
    # gradient into: the trainable parameters'
    taken: Set[Tuple[int, ...]] = dataclasses.field(default_factory=set)  # the parameters modules' ops took, frozen
    # ones too
    computed: Dict[str, int] = dataclasses.field(default_factory=collections.Counter)  # matrix products' calls by the
    # floating dtype their kernel took

    def note(self, e: Dict[str, Any]) -> None:
        name = e.get("name")
        if name == _ACCUMULATE_GRAD:
            self.accumulated.update(tensor_shapes(_args(e).get("Input Dims"))[:1])
        elif name in _MATRIX_PRODUCTS:
            dtype = _first_float_type(_args(e).get("Input type"))
            if dtype:
                self.computed[dtype] += 1
        elif name in _PARAMETER_ARGUMENT:
            self.taken.update(_argument_shape(_args(e).get("Input Dims"), _PARAMETER_ARGUMENT[str(name)]))

    def compute_dtype(self) -> str:
        """The dtype most matrix products computed in (``OpTrace.compute_dtype``); "" where none said one."""
        return max(self.computed, key=self.computed.__getitem__) if self.computed else ""


def _no_memory_note(ran_ops: bool) -> str:
    """Why a trace has no allocation: profiled without memory, or (no op either) a schedule's cycle cut short."""
    if ran_ops:
        return "the trace has no [memory] events: profile with profile_memory=True"
    return ("the trace holds no op and no allocation: the profiler stopped before its schedule's active steps "
            "(a wait or warmup cut short writes such a file); the run's other traces hold the profiled steps")


def _onednn_scratch(maker: Dict[str, Any]) -> bool:
    """Whether an op on the CPU makes oneDNN's scratch through torch's allocator, which no shape fits and which
    carries no batch: a convolution's scratchpad (``_ONEDNN_CONVOLUTIONS``: ResNet's weight gradient's partial
    sums, 18,948,352 B at batch 8 and 32), a 16-bit matrix product's packed operands (a bf16 autocast MLP's
    weight gradient: 263,936 B at batch 256, 476,928 at 512, 673,536 at 1024, 2048 and 4096: capped, not
    carried)."""
    name = maker.get("name")
    return name in _ONEDNN_CONVOLUTIONS or (
        name in _MATRIX_PRODUCTS and _first_float_type(_args(maker).get("Input type")) in ("bfloat16", "float16"))


def _argument_shape(dims: Any, index: int) -> List[Tuple[int, ...]]:
    """The shape of an op's ``index``-th input where its recorded "Input Dims" hold one of two or more dimensions
    (a weight's, not a bias's), else none."""
    found: Any = dims[index] if isinstance(dims, list) and len(dims) > index else None
    return [tuple(found)] if is_shape(found) and len(found) >= 2 else []


def _first_float_type(types: Any) -> str:
    """The first input's dtype ("c10::BFloat16" -> "bfloat16") where it is a floating one, else ""."""
    first = canonical(str(types[0])) if isinstance(types, list) and types and isinstance(types[0], str) else ""
    return first if first in FLOAT_DTYPES else ""


def _in_step(op: _Op) -> bool:
    """An op inside ``Optimizer.step`` (clipping and a GradScaler run in the update's phase outside it)."""
    return op.in_closure and op.phase == OPTIMIZER


def _update_starts(ops: List[_Op], origin: float, t_us: Sequence[float]) -> List[float]:
    """When each optimizer update began on the timeline's clock (``Timeline.update_starts_us``): the ops inside
    ``Optimizer.step``, the first of each gap between the timeline's points (thousands of a for-loop step's)."""
    starts: List[float] = []
    gaps = set()
    for ts in sorted(op.ts - origin for op in ops if _in_step(op)):
        gap = bisect.bisect_right(t_us, ts)
        if gap not in gaps:
            gaps.add(gap)
            starts.append(round(ts, 6))
    return starts


def _charge(allocations: List[Tuple[Dict[str, Any], Optional[_Op]]]) -> None:
    """Each op's bytes allocated, and of them those still allocated when it ended (its outputs); ``allocations``
    in time order."""
    live: Dict[Tuple[Any, Any], Tuple[_Op, int]] = {}
    for event, op in allocations:
        args = _args(event)
        size = _int(args.get("Bytes")) or 0
        key = (_device(args), args.get("Addr"))
        if size > 0 and op is not None:
            op.allocated += size
            op.kept += size
            live[key] = (op, size)
        elif size < 0 and key in live:
            owner, held = live.pop(key)
            if owner.end >= float(event.get("ts") or 0):  # freed inside the op that made it: a temporary
                owner.kept -= held


def _allocator_events(allocations: Sequence[Tuple[Dict[str, Any], Optional[_Op]]], sizes: "_Sizes"
                      ) -> Tuple[List[Event], float, set, int]:
    """The allocator's events (``allocations`` in time order), and the bytes the CPU's count held before the
    window beyond what it shows (a second profile in one process: torch's CPU count is not reset between
    profiles, so each event's "Total Allocated" is taken from the window's start, as the first profile's are)."""
    out: List[Event] = []
    devices = set()
    origin = None
    categories = _categories(allocations)
    cpu_before = _cpu_count_before(allocations)  # the CPU's count before the window's first event
    for event, op in allocations:
        args = _args(event)
        size = _int(args.get("Bytes"))
        if not size:
            continue
        device = _device(args)
        devices.add(device)
        ts = float(event.get("ts") or 0)
        origin = ts if origin is None else min(origin, ts)
        total = args.get("Total Allocated")
        in_use = float(total) if isinstance(total, (int, float)) else None
        if in_use is not None and device == "cpu":
            in_use -= cpu_before
        shape, dtype, batch, seq = sizes.of(event, size, op.phase if op is not None else "") if size > 0 else (
            "", "", False, 0)
        rows = not batch and shape_dims(shape) in sizes.tables  # the table's own shape: its gradient, its lookup
        reserved = args.get("Total Reserved")  # the CUDA caching allocator's segments (0 on a CPU)
        out.append(Event(t_us=ts, delta=size, key=(device, args.get("Addr")),
                         op=(op_name(op) if op is not None else "") if size > 0 else "",
                         category=categories.get(id(event), ""), shape=shape, dtype=dtype, batch=batch, seq=seq,
                         rows=rows, allocator=device, in_use=in_use,
                         reserved=float(reserved) if isinstance(reserved, (int, float)) and reserved > 0 else None))
    return out, origin or 0.0, devices, int(cpu_before)


def _cpu_count_before(allocations: Sequence[Tuple[Dict[str, Any], Optional[_Op]]]) -> float:
    """What the CPU's "Total Allocated" held before the window's first event. Events of one instant come in no set
    order (two threads'), so the first is the one whose count before it no other of that instant's left."""
    first: List[Tuple[float, float, float]] = []  # (before, after, when) of the earliest instant's CPU events
    for event, _ in allocations:
        args = _args(event)
        size, total = _int(args.get("Bytes")), args.get("Total Allocated")
        if not size or _device(args) != "cpu" or not isinstance(total, (int, float)):
            continue
        if first and float(event.get("ts") or 0) != first[0][2]:
            break
        first.append((float(total) - size, float(total), float(event.get("ts") or 0)))
    after = {a for _, a, _ in first}
    # none is (the count came back within the instant: a buffer made and freed), or several: the first listed
    heads = [before for before, _, _ in first if before not in after] or [before for before, _, _ in first]
    return max(heads[0], 0.0) if heads else 0.0


def _categories(allocations: Sequence[Tuple[Dict[str, Any], Optional[_Op]]]) -> Dict[int, str]:
    """id(allocation event, in time order) -> its category, by the phase of the op that made it and when it was freed
    (``rules.buffers.lived_categories``: a memory snapshot of the same step is read with the same rule)."""
    made: List[Tuple[Dict[str, Any], str, float]] = []
    freed: Dict[int, float] = {}  # index in made -> when
    live: Dict[Tuple[Any, Any], int] = {}
    for event, op in allocations:
        args = _args(event)
        size, key, ts = _int(args.get("Bytes")) or 0, (_device(args), args.get("Addr")), float(event.get("ts") or 0)
        if size > 0:
            live[key] = len(made)
            made.append((event, op.phase if op is not None else "", ts))
        elif size < 0 and key in live:
            freed[live.pop(key)] = ts
    lived = [Lived(phase, ts, freed.get(i)) for i, (_, phase, ts) in enumerate(made)]
    # an op no range or time places (the backward pass's seed, aten::ones_like) made a temporary: the
    # unattributed row of a trace is what the allocator held before the window, and nothing else
    categories = lived_categories(lived, unplaced=TEMPORARIES_CATEGORY)
    return {id(event): category for (event, _, _), category in zip(made, categories)}


def _name_rows(ops: List[_Op]) -> None:
    """Each op's row name: its layer's path and its name; where the same op on the same layer runs in
    several phases (a DataLoader's ``aten::stack`` and gradient clipping's), a row per phase, each named
    with it, so no phase's time is counted under another's."""
    phases_of: Dict[Tuple[str, str], set] = collections.defaultdict(set)
    for op in ops:
        phases_of[(op.layer, op.name)].add(op.phase)
    for op in ops:
        base = f"{op.layer}/{op.name}" if op.layer else op.name
        base = f"{base} ({op.serves} pass)" if op.serves else base  # FSDP2 gathers a unit for each pass
        op.row = f"{base} ({op.phase or 'no phase'})" if len(phases_of[(op.layer, op.name)]) > 1 else base


def _unplaced_collectives(ops: List[_Op]) -> List[str]:
    """Why collective calls are on no module, once: no FSDP range names their unit (DDP's buckets)."""
    unplaced = sum(1 for op in ops if op.phase == COLLECTIVE and op.name.startswith(_C10D) and not op.layer)
    if not unplaced:
        return []
    return [f"{unplaced:,} collective calls are on no module: nothing in the trace names the parameters they move "
            "(a DDP bucket holds several modules' gradients; FSDP2 names its unit in its ranges)"]


def _match_backend_work(ops: List[_Op]) -> None:
    """A backend's own work range (``gloo:all_gather`` on its worker thread) does the call a ``c10d::`` op of
    its process made before it, in the order the calls were made (a process group runs its work first in,
    first out), one that names the tensor it works on: it takes that call's module, pass and message bytes
    (and gives the call its bytes where the call's tensor list said none: DDP's ``allreduce_``). A call
    whose work the window does not hold, or a range with no such call, is passed over, never paired."""
    by_process: Dict[Any, Tuple[List[_Op], List[_Op]]] = collections.defaultdict(lambda: ([], []))
    for op in ops:
        if op.phase == COLLECTIVE and op.name.startswith(_C10D):
            by_process[op.pid][0].append(op)
        elif op.phase == COLLECTIVE and op.name.startswith(_BACKEND_WORK):
            by_process[op.pid][1].append(op)
    for calls, work in by_process.values():
        waiting = collections.deque(sorted(calls, key=lambda op: op.ts))
        for done in sorted(work, key=lambda op: op.ts):
            skipped = []
            while waiting and waiting[0].ts <= done.ts and not _works_on(done, waiting[0]):
                skipped.append(waiting.popleft())  # its work is not in the window, or another's is
            if not waiting or waiting[0].ts > done.ts:
                waiting.extendleft(reversed(skipped))  # none of them is this range's call: kept for the next
                continue
            call = waiting.popleft()
            done.layer, done.serves = call.layer, call.serves
            call.moved = call.moved or done.moved
            done.moved = call.moved


def _works_on(work: _Op, call: _Op) -> bool:
    """Whether a backend's work range can be ``call``'s: the tensor it names is one the call names (an
    all-gather's input, a reduce-scatter's), or the call names no plain tensor (a tensor list)."""
    shapes = [tuple(s) for s in call.dims if _plain_shape(s)] if isinstance(call.dims, list) else []
    mine = [tuple(s) for s in work.dims if _plain_shape(s)] if isinstance(work.dims, list) else []
    return not shapes or not mine or mine[0] in shapes


_C10D = "c10d::"
_BACKEND_WORK = ("gloo:", "nccl:")
_MATCH_SLACK_US = 60e6  # a call's work starts within a minute of the call (a queue that deep is no queue)


def _message_bytes(args: Dict[str, Any]) -> int:
    """Bytes of a collective's message: ``record_param_comms``' element counts (NCCL's), else the largest
    tensor the call names (an all-gather's output, a reduce-scatter's input), by its "Input type"; 0 when
    it names none, or only figures no real tensor has (past ``_MAX_ELEMENTS``)."""
    from tb_modelmem.readers.dtypes import name_size

    counts = [int(args[key]) for key in ("In msg nelems", "Out msg nelems") if _count(args.get(key))]
    if counts and isinstance(args.get("dtype"), str):
        return max(counts) * name_size(args["dtype"])
    dims, types = args.get("Input Dims"), args.get("Input type")
    if not isinstance(dims, list) or not isinstance(types, list):
        return 0
    best = 0
    for shape, kind in zip(dims[:_MAX_TENSORS], types[:_MAX_TENSORS]):
        if _plain_shape(shape) and isinstance(kind, str):
            elements = 1
            for d in shape:
                elements *= int(d)
                if elements > _MAX_ELEMENTS:
                    break
            if elements <= _MAX_ELEMENTS:
                best = max(best, elements * name_size(kind))
    return best


_MAX_TENSORS, _MAX_RANK = 64, 64  # tensors one call names, dimensions one tensor has (a real op: a few)
_MAKER_DEPTH = 8  # the ops open at an allocation kept for its shape (a real one: aten::gru > aten::stack, a few)
# torch's recurrent layers: on the CPU one call runs a loop over the time steps, each making its own buffers
# autograd's op that adds a backward pass's gradient into a leaf's .grad: one per trainable parameter, its shape
_ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad"
_RECURRENT_CALLS = frozenset({"aten::rnn_tanh", "aten::rnn_relu", "aten::lstm", "aten::gru"})  # a module's own call
_RECURRENT = _RECURRENT_CALLS | {"aten::_cudnn_rnn", "aten::mkldnn_rnn_layer"}
# one time step of a recurrent cell (nn.GRUCell, nn.LSTMCell, nn.RNNCell), which a Python loop calls per token
_CELLS = frozenset({"aten::gru_cell", "aten::lstm_cell", "aten::rnn_tanh_cell", "aten::rnn_relu_cell"})
# the CPU's oneDNN convolutions: what they make that no shape fits is oneDNN's scratchpad, sized by the weights and
# the threads (a weight gradient's per-thread partial sums), not the batch
_ONEDNN_CONVOLUTIONS = frozenset({"aten::mkldnn_convolution", "aten::convolution_backward"})
_LINEAR = "aten::linear"  # nn.Linear's op: its output keeps its input's leading dimensions
# The ops that take a module's parameter, and at which argument: nn.Linear's weight, nn.Embedding's table, a
# convolution's kernel (each recorded where it is called, outside autocast's cast of it)
_PARAMETER_ARGUMENT = {"aten::linear": 1, "aten::embedding": 0, "aten::conv1d": 1, "aten::conv2d": 1,
                       "aten::conv3d": 1, "aten::conv_transpose1d": 1, "aten::conv_transpose2d": 1,
                       "aten::conv_transpose3d": 1}
# The ops that compute a matrix product or a convolution, innermost: their inputs are what the kernel computed in
# (autocast casts a float32 linear's inputs before its aten::addmm; the outer aten::linear records them uncast)
_MATRIX_PRODUCTS = frozenset({"aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::_convolution"})
_MAX_ELEMENTS = 2 ** 53  # elements of one tensor (8 PiB of bytes): past it, no real tensor's figure


def _count(value: Any) -> bool:
    return _number(value) and math.isfinite(value) and 0 <= value <= _MAX_ELEMENTS


def _plain_shape(shape: Any) -> bool:
    """A tensor's dimensions as the profiler records them: a short list of counts (not a tensor list's)."""
    return isinstance(shape, list) and 0 < len(shape) <= _MAX_RANK and all(_count(d) for d in shape)


def op_name(op: _Op) -> str:
    return op.row or (f"{op.layer}/{op.name}" if op.layer else op.name)


def _headline(devices: Iterable[str]) -> Optional[set]:
    """The lowest-numbered CUDA device's memory when the trace has one (never added to host memory)."""
    cuda = sorted((int(d.partition(":")[2] or 0), d) for d in devices if d.startswith("cuda"))
    return {cuda[0][1]} if cuda else ({"cpu"} if devices else None)


def _device(args: Dict[str, Any]) -> str:
    return f"cuda:{_int(args.get('Device Id')) or 0}" if args.get("Device Type") == _CUDA else "cpu"


@dataclasses.dataclass
class _Sizes:
    """What a trace says of its buffers' sizes: the step's batch and sequence length, the weights' shapes
    (what the optimizer read), and what made each allocation (``makers``, by the event's id)."""

    makers: Dict[int, Tuple[Dict[str, Any], ...]]
    batch: Optional[int]
    seq: Optional[int]
    weights: FrozenSet[Tuple[int, ...]]
    followers: Dict[int, Tuple[Dict[str, Any], _Op]]  # by the event's id: the next top-level op after a maker
    # that recorded no shape (its event and its row)
    per_step: FrozenSet[str]  # ops each of whose calls is one time step (``_per_step``)
    tables: FrozenSet[Tuple[int, ...]] = frozenset()  # the position tables' shapes (``_position_tables``)
    _shapes: Dict[Tuple[Any, ...], Any] = dataclasses.field(default_factory=dict)  # by the maker's event and size
    _input_powers: Dict[int, Optional[List[int]]] = dataclasses.field(default_factory=dict)  # by the op's event
    _inputs: Dict[int, Dict[int, Tuple[Tuple[int, ...], str]]] = dataclasses.field(default_factory=dict)  # by bytes

    def of(self, event: Dict[str, Any], size: int, phase: str) -> Tuple[str, str, bool, int]:
        """(Shape, dtype, whether it carries the batch, how many times the sequence) of the buffer ``event``
        allocated in ``phase``, as its maker's inputs say, or an op around it (``_shape``). Where no shape fits
        its size, it carries what its maker's most batch-carrying input does (a reduction kept per sample)
        unless it is a weight's size or oneDNN's scratch on the CPU (``_onednn_scratch``); where its
        maker recorded no shape (a list of over 30 tensors, which torch's profiler records as ``[]``: a
        recurrent layer's steps stacked), what the innermost op around it that recorded one does, else the
        shape the next top-level op read it as (``_read_next``).
        Inside a recurrent layer's call, or a cell a Python loop calls per token, a buffer is one time step's
        (``_per_step``). The data loader's buffers (``INPUT``) carry the batch when their bytes are a
        multiple of it; else "" and no batch."""
        chain = self.makers.get(id(event))
        if not chain:
            return "", "", False, 0
        maker = chain[-1]
        cached = _args(event).get("Device Type") == _CUDA
        recurrent = any(op.get("name") in self.per_step for op in chain)
        key = (id(maker), size, cached)  # one op's many allocations: its shapes worked out once per size
        if key not in self._shapes:
            self._shapes[key] = self._shape(chain, size, cached)
        found = self._shapes[key]
        if found is not None:
            shape = format_shape(found[0])
            carries, power = carried(shape, self.batch, self.weights, self.seq)
            if recurrent:
                carries, power = self._per_step(found[0], size, carries, power)
            return shape, found[1], carries, power
        if not self.batch or size in self.weight_bytes or (_onednn_scratch(maker) and not cached):
            return "", "", False, 0
        powers = next((recorded for recorded in map(self._powers, reversed(chain)) if recorded is not None), None)
        if powers:
            return "", "", True, max(max(powers), int(recurrent))
        read = self._read_next(event, size, phase) if powers is None and not cached else None
        if read is not None:
            shape = format_shape(read[0])
            return (shape, read[1], *carried(shape, self.batch, self.weights, self.seq))
        return "", "", phase == INPUT and size % self.batch == 0, 0

    def _shape(self, chain: Sequence[Dict[str, Any]], size: int, cached: bool) -> Optional[Tuple[Tuple[int, ...], str]]:
        """The (shape, dtype) of a buffer of ``size`` bytes the innermost op of ``chain`` made, or the op around it
        whose shape says more: a normalization's, around a factory that made its statistics flat ([512]: one per
        row of its input, [8, 64, 1]); a linear layer's, around a matrix product whose output [batch x rows,
        units] has a weight's shape (ConvNeXt's [128, 512] at batch 8 x 4 x 4, its next layer's weight: the
        linear's [8, 4, 4, 512] says it carries the batch); a stack's, around the cat it joins by (a collated batch
        of 8 pictures [3, 64, 64] is [8, 3, 64, 64], not [24, 64, 64])."""
        found = _made_shape(chain[-1], size, cached)
        if found is None:
            return None
        around: Optional[Dict[str, Any]] = None
        if chain[-1].get("name") == "aten::cat":  # torch.stack joins its members by a cat: [24, 64, 64] of 8
            around = next((op for op in reversed(chain[:-1]) if op.get("name") == "aten::stack"), None)
        elif len(found[0]) == 1:
            around = next((op for op in reversed(chain[:-1]) if is_row_statistics(str(op.get("name", "")))), None)
        elif is_product(str(chain[-1].get("name", ""))) and weight_shaped(found[0], self.weights):
            around = next((op for op in reversed(chain[:-1]) if op.get("name") == _LINEAR), None)
        outer = _made_shape(around, size, cached) if around is not None else None
        if outer is None or len(outer[0]) < 2 or weight_shaped(outer[0], self.weights):
            return found
        return outer[0], outer[1] or found[1]  # a tensor list's dtype is not recorded: the inner op's

    def _read_next(self, event: Dict[str, Any], size: int, phase: str) -> Optional[Tuple[Tuple[int, ...], str]]:
        """Where no op around an allocation recorded a shape (a top-level ``torch.stack`` of a Python loop's
        steps, over 30 of them): the shape of the next top-level op's input of exactly its bytes (torch's CPU
        count; a CUDA block is rounded), the op that likely reads it (a char-RNN's head: ``aten::linear``'s
        [batch, seq, hidden]), where that op runs in the same phase (not the next step's first op)."""
        found = self.followers.get(id(event))
        if found is None or found[1].phase != phase:
            return None
        follower = found[0]
        if id(follower) not in self._inputs:  # its inputs by their bytes, worked out once per op
            args = _args(follower)
            self._inputs[id(follower)] = inputs_by_bytes(args.get("Input Dims"), args.get("Input type"))
        return self._inputs[id(follower)].get(size)

    def _powers(self, op: Dict[str, Any]) -> Optional[List[int]]:
        """How many times each of ``op``'s batch-carrying inputs holds the sequence; None if it recorded no
        tensor's shape (``[]`` for each input: a list too long to record, and its scalars)."""
        if id(op) not in self._input_powers:
            shapes = [shape for shape in tensor_shapes(_args(op).get("Input Dims")) if shape]
            self._input_powers[id(op)] = [
                power for carries, power in (carried(format_shape(shape), self.batch, self.weights, self.seq)
                                             for shape in shapes) if carries] if shapes else None
        return self._input_powers[id(op)]

    def _per_step(self, dims: Tuple[int, ...], size: int, carries: bool, power: int) -> Tuple[bool, int]:
        """A buffer a recurrent layer's call made: it computes gates and states for every sample at every time
        step, so each buffer beyond a copy of its weights holds one step's ([batch, hidden], one per step: their
        bytes grow with the length though no shape holds it) or every step's (its outputs time first,
        [seq, batch, hidden]; oneDNN's workspace, bytes in one dimension: LSTM's at 4x the batch 3.98-3.99x, at
        2x the length 1.98x). None in a shape carries the batch where its first dimension is no multiple of
        it, so the rule is the call's, not the shape's."""
        if carries:
            return True, max(power, 1)
        weight = weight_shaped(dims, self.weights) or size in self.weight_bytes
        if not self.batch or not dims or weight:
            return False, 0
        return True, 1

    @functools.cached_property
    def weight_bytes(self) -> FrozenSet[int]:
        """The sizes a weight-shaped buffer has (in 16 and 32 bits): a weight's gradient or update."""
        return frozenset(math.prod(shape) * width for shape in self.weights for width in (2, 4))


def _made_shape(op: Dict[str, Any], size: int, cached: bool) -> Optional[Tuple[Tuple[int, ...], str]]:
    """(Shape, dtype) of a buffer of ``size`` bytes ``op`` made, as its recorded inputs say (``allocated_shape``)."""
    args = _args(op)
    return allocated_shape(str(op.get("name", "")), args.get("Input Dims"), args.get("Input type"),
                           args.get("Concrete Inputs"), size, cached)


def _recorded_a_shape(event: Dict[str, Any]) -> bool:
    """Whether an op recorded any input's shape (not ``[[], []]``: a list of over 30 tensors, and a scalar)."""
    dims = _args(event).get("Input Dims")
    return isinstance(dims, list) and any(isinstance(entry, list) and entry for entry in dims[:_MAX_TENSORS])


def _cells_per_token(ops: List[_Op], seq: Optional[int], steps: int) -> FrozenSet[str]:
    """The recurrent cells a Python loop called once per token: each's forward calls a positive multiple of
    the sequence length in each of the window's ``steps`` (a cell called once per step, an RL policy's, is not
    one; an encoder's and a decoder's cell of other lengths, one name, neither)."""
    calls = collections.Counter(op.name for op in ops if op.phase == FORWARD and op.name in _CELLS)
    return frozenset(name for name, count in calls.items() if once_per_token(count, steps, seq))


def _weights(ops: List[_Op]) -> FrozenSet[Tuple[int, ...]]:
    """The shapes the optimizer's update read (ops a range placed in it: ``Optimizer.step#``, tb_modelmem's
    phase ranges; not what runs after it, a metric on the logits): the parameters', their gradients' and
    slots' (a ``_foreach_*`` op's tensor lists, or one op per parameter), which no buffer that carries the
    batch has."""
    return frozenset(shape for op in ops if op.phase == OPTIMIZER for shape in tensor_shapes(op.dims))


def _head_width(forward: List[_Op], batch: Optional[int], seq: Optional[int]) -> Optional[int]:
    """The width of attention's heads, where the forward pass splits them: its inputs [batch, seq, heads, width]
    (queries, keys and values viewed before their transpose), the most common width; None untold."""
    if not batch or not seq:
        return None
    widths = collections.Counter(shape[3] for op in forward for shape in tensor_shapes(op.dims)  # not [b, s, s, x]:
                                 # attention scores where the heads are as many as the tokens
                                 if len(shape) == 4 and shape[0] == batch and shape[1] == seq != shape[2])
    return widths.most_common(1)[0][0] if widths else None


def _sequence(forward: List[_Op], batch: Optional[int], time_first: bool = False) -> Optional[int]:
    """Tokens per sample: the first embedding lookup's ids, else the first forward op's integer input, [batch,
    seq] (``input_sequence``); [seq, batch] where the step's input is time first (``_batch``). The lookup first: a
    step that slices its batch from the whole token stream in the forward pass (no range says it is the input's)
    reads the stream's length otherwise."""
    if not batch:
        return None
    lookup = _first_lookup(forward)
    for op in ([lookup] if lookup is not None else []) + forward:
        if not isinstance(op.types, list):
            continue
        for dims, kind in zip(op.dims, op.types):
            if not (is_shape(dims) and len(dims) == 2 and isinstance(kind, str) and len(kind) < 64):
                continue
            if dims[1 if time_first else 0] == batch:
                found = input_sequence(dims[::-1] if time_first else dims, canonical(kind))
                if found:
                    return found
    return None


def _batch(ops: List[_Op], forward: List[_Op], weights: AbstractSet[Tuple[int, ...]]) -> Tuple[Optional[int], bool]:
    """The step's batch, and whether its input is time first: where the step looks up an embedding, the first
    dimension of the first lookup's ids (``aten::embedding(weight, indices)``: the token ids; what runs before it
    may be a [1, max length] buffer of position ids, BERT's first op slicing it); else of the first forward op's
    first input that is no weight. The second, where that input's first two dimensions are those of a recurrent
    call that runs time first ([time, batch, ...]: pytorch/examples' word_language_model feeds its LSTM so).
    ``forward``: the forward pass's ops with recorded shapes, in time order."""
    lookup = _first_lookup(forward)
    if lookup is not None and batch_of(lookup.dims[1]) is not None:
        return _time_first_batch(forward, lookup.dims[1])
    for op in ops:
        if op.phase != FORWARD or not isinstance(op.dims, list):
            continue
        for dims in op.dims:
            if is_shape(dims) and len(dims) >= 2 and tuple(dims) not in weights:
                if batch_of(dims) is not None:
                    return _time_first_batch(forward, dims)
                break
    return None, False


def _position_tables(forward: List[_Op], batch: Optional[int], seq: Optional[int]) -> List[Tuple[int, ...]]:
    """The tables the forward pass looked up once per position for every sample alike, with a row per token of
    ``seq``: ``aten::embedding(table [seq, d], ids [seq])`` (or ids [1, seq] where the batch is not 1: positions
    0 .. seq - 1, broadcast over the batch). A learned position embedding sized to the length (nanoGPT's wpe,
    [block_size, d]). A token table is looked up per sample ([batch, seq] ids): a shape one such lookup reads is
    never a position table's (a vocabulary of as many characters as the length, whose rows a tied head's logits
    have)."""
    if not seq or not batch:
        return []
    positions: List[Tuple[int, ...]] = []
    per_sample = set()
    for op in forward:
        if op.name != "aten::embedding" or len(op.dims) < 2 or not is_shape(op.dims[0]) or not is_shape(op.dims[1]):
            continue
        table, ids = tuple(op.dims[0]), list(op.dims[1])
        if len(table) == 2 and table[0] == seq and (ids == [seq] or (ids == [1, seq] and batch != 1)):
            positions.append(table)
        else:
            per_sample.add(table)
    return [table for table in dict.fromkeys(positions) if table not in per_sample][:MAX_POSITION_TABLES]


def _first_lookup(forward: List[_Op]) -> Optional[_Op]:
    """The forward pass's first embedding lookup with recorded ids (``aten::embedding(weight, indices)``)."""
    return next((op for op in forward if op.name == "aten::embedding" and len(op.dims) > 1 and is_shape(op.dims[1])),
                None)


def _time_first_batch(forward: List[_Op], dims: List[int]) -> Tuple[Optional[int], bool]:
    """(The batch, time first) of the step's input of ``dims``: its first dimension, or its second where the first
    recurrent call runs time first over an input whose [time, batch] are its first two (not over one transposed
    from it: [batch, time] ids turned time first for the call keep their batch in front)."""
    call = next((op for op in forward if op.time_first is not None), None)
    if call is not None and call.time_first and list(call.dims[0][:2]) == list(dims[:2]):
        return batch_of(dims[1:] + dims[:1]), True
    return batch_of(dims), False


def _args(event: Dict[str, Any]) -> Dict[str, Any]:
    args = event.get("args")
    return args if isinstance(args, dict) else {}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _int(value: Any) -> Optional[int]:
    return int(value) if _number(value) else None
