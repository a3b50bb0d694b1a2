"""The record types every stage shares: capture and the readers make them, payloads store them,
the backend's views compute on them.

Plain dataclasses with no TensorFlow or TensorBoard import, so the plugin backend can decode
what a training script wrote without loading TF. Each validates itself as it decodes (``codec``);
big per-op and per-variable lists are columnar ``Table``s, which a payload stores compactly
(``compaction``).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any, ClassVar, Dict, Iterable, List, Optional, Tuple, Type, Union

from tb_modelmem.schema import compaction
from tb_modelmem.schema.codec import Record, Table, nested_record
from tb_modelmem.schema.dtypes import FLOAT_DTYPES
from tb_modelmem.schema.limits import is_number, preview
from tb_modelmem.schema.names import (
    MAX_OPTIMIZER_CLASSES,
    MAX_POSITION_TABLES,
    MEASURED,
    MOVED_STATE,
    OTHER,
    ROLES,
    UNKNOWN_DIM,
    is_class_name,
)


def bytes_by_role(variables: Iterable["VariableRecord"]) -> Dict[str, int]:
    """Bytes per role, every role present even at zero; an unknown role counts as OTHER."""
    return role_totals([(v.role, v.bytes) for v in variables])


def role_totals(role_bytes: Iterable[Tuple[str, int]]) -> Dict[str, int]:
    """``bytes_by_role`` of (role, bytes) pairs (a breakdown's columns, zipped)."""
    totals = {role: 0 for role in ROLES}
    for role, size in role_bytes:
        totals[role if role in totals else OTHER] += size
    return totals


class _Assigned(Record):
    """A record whose nested fields are converted whenever they are assigned, at construction
    and after it (``trace.timeline = [[t_us, bytes, op], ...]``), so a record changed through the
    public API is written as if it had been built so. A value the field cannot hold is refused
    there, with the field's name, not later inside ``summary.pb``."""

    def __setattr__(self, name: str, value: Any) -> None:
        kind = type(self)._nested.get(name)
        if kind is not None:
            value = _converted(f"{type(self).__name__}.{name}", kind, value)
        super().__setattr__(name, value)


@dataclasses.dataclass
class VariableRecord(Record):
    """One stored variable: what it is, where it lives, what it costs."""

    name: str
    layer: str
    shape: List[int]
    dtype: str
    bytes: int  # all replicas together: element count x dtype size x replicas
    role: str
    device: str = ""
    replicas: int = 1  # copies of each element: > 1 for variables mirrored or replicated over devices
    slot: Optional[str] = None  # optimizer slot name (m, v, momentum, ...)
    slot_of: Optional[str] = None  # name of the weight a slot belongs to
    # Bytes on each device of ``device`` (comma-separated), in its order; [] where not recorded (one
    # device, or written before tb_modelmem recorded it): then each of the ``replicas`` holds bytes / replicas.
    device_bytes: List[int] = dataclasses.field(default_factory=list)
    shards: int = 1  # distinct pieces the variable is split into (sharded over a mesh axis: > 1)

    _non_negative: ClassVar[Tuple[str, ...]] = ("bytes", "replicas", "shards", "device_bytes")

    @property
    def params(self) -> int:
        return element_count(self.shape)


def element_count(shape: List[int]) -> int:
    """A variable's element count; 0 while a dimension is unknown (a TF1 variable of unknown shape)."""
    return 0 if UNKNOWN_DIM in shape else math.prod(shape)


def element_counts(shapes: List[List[int]]) -> List[int]:
    """``element_count`` of each shape, the common case (no unknown dimension anywhere) in C."""
    if UNKNOWN_DIM in itertools.chain.from_iterable(shapes):
        return list(map(element_count, shapes))
    return list(map(math.prod, shapes))


class VariableTable(Table[VariableRecord]):
    row_type = VariableRecord

    def _check(self) -> None:
        shapes = self.columns["shape"]
        if min(itertools.chain.from_iterable(shapes), default=0) < UNKNOWN_DIM:
            index = next(i for i, s in enumerate(shapes) if s and min(s) < UNKNOWN_DIM)
            raise ValueError(f"VariableRecord.shape[{index}]: dimensions must be >= 0 ({UNKNOWN_DIM} for unknown), "
                             f"got {preview(shapes[index])}")


@dataclasses.dataclass
class LayerRecord(Record):
    """One layer and how its parameter count is derived."""

    name: str
    class_name: str
    params: int
    derivation: str = ""  # e.g. "(5*5*1+1)*32 = 832"

    _non_negative: ClassVar[Tuple[str, ...]] = ("params",)


class LayerTable(Table[LayerRecord]):
    row_type = LayerRecord


@dataclasses.dataclass
class Breakdown(_Assigned):
    """Every variable of a model/optimizer/checkpoint at one moment."""

    source: str  # "keras", "tf.Module", "tf1", "checkpoint", ...
    variables: VariableTable  # (a list of VariableRecord is taken too)
    layers: LayerTable = dataclasses.field(default_factory=LayerTable)
    model_name: str = ""
    optimizer: Optional[Dict[str, Any]] = None  # {"class_name": ..., "config": {...}}
    file_bytes: Optional[int] = None  # size on disk, for files and checkpoints
    overhead: List[Dict[str, Any]] = dataclasses.field(default_factory=list)  # [{"what", "bytes"}]

    _nested: ClassVar[Dict[str, Type[Record]]] = {"variables": VariableTable, "layers": LayerTable}
    _non_negative: ClassVar[Tuple[str, ...]] = ("file_bytes",)

    def _check(self) -> None:
        for i, line in enumerate(self.overhead):  # bytes may be negative: zip compression saves bytes
            if not (isinstance(line.get("what"), str) and isinstance(line.get("bytes"), int)
                    and not isinstance(line["bytes"], bool)):
                raise ValueError(f"Breakdown.overhead[{i}]: expected {{\"what\": str, \"bytes\": int}}, "
                                 f"got {preview(line)}")


@dataclasses.dataclass
class OpRecord(Record):
    """One op (or fused kernel) of a traced step, aggregated over its calls."""

    name: str
    op_type: str
    layer: str = ""  # the model layer the op belongs to (its path), "" when none
    device: str = ""
    calls: int = 1
    time_us: float = 0.0  # total compute time over all calls
    output_bytes: int = 0
    output_shape: str = ""  # e.g. "[1,28,28,32]"
    output_dtype: str = ""  # e.g. "float32"
    bytes_source: str = MEASURED  # MEASURED, DERIVED or UNKNOWN_BYTES (then output_bytes is not a figure)
    alloc_bytes: int = 0  # bytes the allocator handed out for this op
    fused: List[str] = dataclasses.field(default_factory=list)  # ops a fused kernel stands for
    phase: str = ""  # one of PHASES, "" if unknown
    source: str = ""  # where in the training script it was traced ("model.py:13 CNN.__call__"), "" if not kept
    moved_bytes: int = 0  # a collective's messages over its calls (what an all-gather gathers), 0 when untold

    _non_negative: ClassVar[Tuple[str, ...]] = ("calls", "time_us", "output_bytes", "alloc_bytes", "moved_bytes")
    _repeated: ClassVar[Tuple[str, ...]] = ("op_type", "layer", "device", "output_shape", "output_dtype",
                                            "bytes_source", "phase", "source")
    _front_coded: ClassVar[Tuple[str, ...]] = ("name",)
    _times: ClassVar[Tuple[str, ...]] = ("time_us",)


class OpTable(Table[OpRecord]):
    """The per-op rows of a trace, columnar."""

    row_type = OpRecord

    @classmethod
    def by_name(cls, rows: Union[Dict[str, list], Iterable[OpRecord]]) -> "OpTable":
        """The rows (columns, or records) in name order, as every trace reader makes them: stored
        names then share their scopes with the row before (``_front_coded``), and rows equal in
        the order a view asks for come in name order (its sorts are stable)."""
        table = cls(rows) if isinstance(rows, dict) else cls.from_rows(rows)
        order = sorted(range(len(table)), key=table.columns["name"].__getitem__)
        return cls({name: [values[i] for i in order] for name, values in table.columns.items()})


@dataclasses.dataclass
class BufferRecord(Record):
    """One buffer in use at the peak: who allocated it and what it is."""

    op: str  # the op that allocated it ("" if allocated before the trace)
    bytes: int  # bytes the allocator holds for it
    shape: str = ""
    dtype: str = ""
    region: str = ""  # allocator region type: output, temp, persist, ... ("" if not recorded)
    category: str = ""  # one of STEP_CATEGORIES, BEFORE_WINDOW, or MOVED_STATE (a variable's buffer it moved)
    bytes_source: str = MEASURED
    # what the op asked for (shape x dtype, rounded up to the allocator's alignment); ``bytes`` is the chunk
    # the allocator handed out (these sum to the peak). None: the profile did not record it.
    requested_bytes: Optional[int] = None
    # Whether it carries the step's batch, and its sequence length ``seq`` times, as the reduction decided
    # (``rules.buffers.carried``), and what it is under a mixed policy (``rules.buffers.under_mixed_policy``):
    # what What-if scales it by. None: not recorded (a reader that keeps no such flags, an older trace).
    batch: Optional[bool] = None
    seq: int = 0
    mixed: str = ""

    _non_negative: ClassVar[Tuple[str, ...]] = ("bytes", "requested_bytes", "seq")
    _repeated: ClassVar[Tuple[str, ...]] = ("shape", "dtype", "region", "category", "bytes_source", "mixed")


class BufferTable(Table[BufferRecord]):
    """Buffers in use at the peak, columnar."""

    row_type = BufferRecord


@dataclasses.dataclass
class Timeline(Record):
    """Bytes in use over a trace, one point per allocator event (downsampled, the peak kept).

    ``by_category`` holds, for each point, the bytes in use of buffers allocated inside the
    trace window per STEP_CATEGORIES category (and BEFORE_WINDOW); what ``bytes`` holds beyond
    their sum was allocated before the window and is still resident (weights, slots, ...). Its signed
    MOVED_STATE column is not bytes in use but how much larger the chunks of the variables' moved buffers
    are than the ones they replaced (``allocator_replay._moves``).
    """

    t_us: List[float] = dataclasses.field(default_factory=list)
    bytes: List[float] = dataclasses.field(default_factory=list)
    op: List[str] = dataclasses.field(default_factory=list)  # the op behind each event ("" if unknown)
    by_category: Dict[str, List[float]] = dataclasses.field(default_factory=dict)
    # The part of each category's bytes held by buffers that carry the step's batch dimension (what
    # grows with the batch: ``rules.projection``); empty in traces that do not know it.
    batch_by_category: Dict[str, List[float]] = dataclasses.field(default_factory=dict)
    # Of those, the part whose buffers also carry the sequence dimension once ([batch, seq, d]) and twice
    # ([batch, heads, seq, seq]: attention scores), at the trace's ``OpTrace.sequence_length``.
    seq_by_category: Dict[str, List[float]] = dataclasses.field(default_factory=dict)
    seq2_by_category: Dict[str, List[float]] = dataclasses.field(default_factory=dict)
    # The bytes of buffers shaped like a position table (``OpTrace.position_tables``: its gradient, its lookup's
    # [seq, d] output, an update's scratch of it), which grow with the sequence and carry no batch.
    rows_by_category: Dict[str, List[float]] = dataclasses.field(default_factory=dict)
    # Of the batch-carrying bytes of a float32 step, those a mixed policy leaves as traced (what Keras keeps
    # float32, integers, booleans), and the model's output, which a loss under one reads as a float32 copy; of
    # a mixed step's, those not 16-bit, and what its casts between widths made, which float32 makes none of
    # (``rules.buffers.under_mixed_policy``).
    kept_width_by_category: Dict[str, List[float]] = dataclasses.field(default_factory=dict)
    loss_copy_by_category: Dict[str, List[float]] = dataclasses.field(default_factory=dict)
    cast_copy_by_category: Dict[str, List[float]] = dataclasses.field(default_factory=dict)
    # When each traced step began (its outermost tf.function call), on the points' clock, where the trace
    # holds two or more: each step's own peak, and the spread of a projection over them (``rules.projection``).
    step_starts_us: List[float] = dataclasses.field(default_factory=list)
    # When each torch.optim update began (its first op inside ``Optimizer.step``), on the points' clock, one per
    # gap between points: the moment an update that allocates nothing (SGD's) runs at (``rules.projection``).
    update_starts_us: List[float] = dataclasses.field(default_factory=list)

    _non_negative: ClassVar[Tuple[str, ...]] = ("bytes",)

    def to_dict(self, compact: bool = False) -> Dict[str, Any]:
        """``compact``: as a payload stores it (``compaction.compact_timeline``)."""
        out = super().to_dict(compact)
        if compact:
            compaction.compact_timeline(out)
        return out

    @classmethod
    def from_dict(cls, data: Any) -> "Timeline":
        """Plain lists, or the columns as ``to_dict(compact=True)`` stores them."""
        return super().from_dict(compaction.expand_timeline(data))

    def _check(self) -> None:
        n = len(self.t_us)
        if len(self.bytes) != n or (self.op and len(self.op) != n):
            raise ValueError("Timeline: t_us, bytes and op must have the same length")
        for field in compaction.PER_CATEGORY:
            for name, values in getattr(self, field).items():
                signed = field == "by_category" and name == MOVED_STATE  # a variable's copy may have a smaller chunk
                if (not isinstance(values, list) or len(values) != n
                        or not all(is_number(v) and (signed or v >= 0) for v in values)):
                    raise ValueError(f"Timeline.{field}[{preview(name)}]: expected {n} numbers"
                                     + ("" if signed else " >= 0"))
        if not self.op:
            self.op = [""] * n

    @classmethod
    def from_points(cls, points: List[List[Any]], by_category: Optional[Dict[str, List[float]]] = None
                    ) -> "Timeline":
        """From ``[[t_us, bytes, op?], ...]`` points (schema 1 payloads stored them so)."""
        return cls([p[0] for p in points], [p[1] for p in points], [p[2] if len(p) > 2 else "" for p in points],
                   by_category or {})

    def __len__(self) -> int:
        return len(self.t_us)

    def points(self) -> List[List[Any]]:
        return [[t, b, o] for t, b, o in zip(self.t_us, self.bytes, self.op)]


@dataclasses.dataclass
class OpTrace(_Assigned):
    """Per-op table of one or more traced steps, plus memory over time and at the peak."""

    source: str  # "run_metadata", "xspace" or "memory_profile"
    ops: OpTable
    peak_bytes: int = 0  # peak bytes in use during the trace (see counts_resident)
    peak_time_us: float = 0.0
    timeline: Timeline = dataclasses.field(default_factory=Timeline)
    devices: List[str] = dataclasses.field(default_factory=list)
    steps: int = 1
    # True when the allocator's count includes memory allocated before the trace (TF2 profiler:
    # weights and slots are in peak_bytes); False when it counts from 0 at the step's start
    # (RunMetadata), so the run's weights and slots come on top.
    counts_resident: bool = False
    peak_buffers: BufferTable = dataclasses.field(default_factory=BufferTable)
    # Which allocations the trace recorded: "all", "large" (TF's default CPU allocator records only
    # large ones: set TF_CPU_ALLOCATOR_USE_BFC=true), "none", or "planned" (none recorded: XLA's buffer
    # assignment stands in, each device's plan: ``readers.xla.planned_events``); ``allocations_note`` says why.
    allocations: str = "all"
    allocations_note: str = ""
    timed: bool = True  # False when the source holds memory only (a TF 2.3-2.10 memory profile): no op times
    # Per allocator (device memory pool): {"name", "peak_bytes", "min_bytes"}; min is what stayed resident.
    allocators: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    layers: List[str] = dataclasses.field(default_factory=list)  # the model's layer paths ops joined, model order
    # Layers that ran as torch.compile graphs: their sublayers' ops ran inside, where no range names them
    compiled_layers: List[str] = dataclasses.field(default_factory=list)
    batch_size: Optional[int] = None  # the step's batch (on one device), where the trace says it
    sequence_length: Optional[int] = None  # tokens per sample, where the step's input shows them ([batch, seq])
    # Every dimension of the weights the step read, where the trace says them without a breakdown (a PyTorch
    # trace: what its optimizer read, else what autograd accumulated gradients into), but a position table's rows
    # (``position_tables``): a length that is one cannot be told apart in a buffer's shape
    weight_dims: List[int] = dataclasses.field(default_factory=list)
    # The shapes of the tables the step looked up once per position, with a row per token of the traced sequence (a
    # learned position embedding sized to it: nanoGPT's wpe, [block_size, d]); their rows are no buffer's feature,
    # and a longer sequence needs more of them (``rules.projection``). A PyTorch trace's; [] untold.
    position_tables: List[List[int]] = dataclasses.field(default_factory=list)
    # An XLA-compiled step (``readers.xla.Step.summary``): its programs, runs, whether kernels ran in
    # command buffers, how much time is tied to instructions and how; None for an op-by-op step.
    xla: Optional[Dict[str, Any]] = None
    # Bytes the step's program holds as its state before it runs, by role, where the program's
    # parameters say what they are (Keras on JAX); the breakdown, when there is one, says it instead.
    resident: Dict[str, int] = dataclasses.field(default_factory=dict)
    # A CUDA caching allocator's requests over the step, in order, for What if to replay at another setting
    # (``rules.caching_allocator.plan_of``); None where the allocator is no caching one (a CPU, TensorFlow, XLA).
    caching_plan: Optional[Dict[str, Any]] = None
    # The implementation a torch.optim step took, read from the ops inside ``Optimizer.step`` alone (gradient
    # clipping, a GradScaler and an EMA run foreach ops beside it): ``rules.torch_optimizers.path_of``; "" untold.
    optimizer_path: str = ""
    # The torch.optim classes its ``Optimizer.step#<class>.step`` ranges name, in order (["Adam", "SGD"]: a GAN's
    # two), at most MAX_OPTIMIZER_CLASSES: what a trace says of its optimizer where no breakdown names one (its
    # settings are not in it); [] untold.
    optimizer_classes: List[str] = dataclasses.field(default_factory=list)
    # The dtype most of the step's matrix products and convolutions computed in, from their innermost ops' inputs
    # (a PyTorch trace's: "bfloat16" under autocast, where the weights stay float32); "" untold.
    compute_dtype: str = ""
    # The width of attention's heads where the forward pass shows them split ([batch, seq, heads, width]): a length
    # equal to it cannot be told from it in a buffer's shape (scores [b, h, seq, seq] or queries [b, h, seq, width]).
    # A PyTorch trace's; None untold.
    head_width: Optional[int] = None

    _nested: ClassVar[Dict[str, Type[Record]]] = {"ops": OpTable, "peak_buffers": BufferTable,
                                                   "timeline": Timeline}
    _non_negative: ClassVar[Tuple[str, ...]] = ("peak_bytes", "peak_time_us", "steps", "batch_size",
                                                 "sequence_length", "head_width")

    def _check(self) -> None:
        plan = self.caching_plan
        if plan is not None and not (isinstance(plan, dict) and isinstance(plan.get("requests"), list)
                                     and len(plan["requests"]) % 3 == 0
                                     and all(type(v) is int and -(1 << 62) < v < 1 << 62 for v in plan["requests"])
                                     and all(type(plan.get(k)) is int and plan[k] >= 0
                                             for k in ("resident_bytes", "update_at"))):
            raise ValueError("OpTrace.caching_plan: expected {\"requests\": [int, ...] in triples, "
                             f"\"resident_bytes\", \"update_at\": int >= 0}}, got {preview(plan)}")
        tables = self.position_tables
        if len(tables) > MAX_POSITION_TABLES or not all(len(t) == 2 and min(t) >= 1 for t in tables):
            raise ValueError(f"OpTrace.position_tables: expected at most {MAX_POSITION_TABLES} shapes [rows, width] "
                             f"of sizes >= 1, got {preview(tables)}")
        classes = self.optimizer_classes
        if len(classes) > MAX_OPTIMIZER_CLASSES or not all(is_class_name(name) for name in classes):
            raise ValueError(f"OpTrace.optimizer_classes: expected at most {MAX_OPTIMIZER_CLASSES} Python class names, "
                             f"got {preview(classes)}")
        if self.compute_dtype and self.compute_dtype not in FLOAT_DTYPES:
            raise ValueError(f"OpTrace.compute_dtype: expected \"\" or one of {', '.join(sorted(FLOAT_DTYPES))}, "
                             f"got {preview(self.compute_dtype)}")
        for role, size in self.resident.items():
            if type(size) is not int or size < 0:  # bool is not an int here
                raise ValueError(f"OpTrace.resident[{preview(role)}]: expected bytes >= 0, got {preview(size)}")

    def to_dict(self, compact: bool = False) -> Dict[str, Any]:
        """``compact``: as a payload stores it (``compaction.compact_op_places`` too)."""
        out = super().to_dict(compact)
        if compact:
            compaction.compact_op_places(out, self.ops.column("name"))
        return out

    @classmethod
    def from_dict(cls, data: Any) -> "OpTrace":
        if isinstance(data, dict) and isinstance(data.get("timeline"), list):  # schema 1: [[t, bytes, op?], ...]
            data = dict(data, timeline=compaction.timeline_from_points(data["timeline"]))
        if compaction.has_op_places(data):
            ops = nested_record(cls, "ops", OpTable, data["ops"])
            data = dict(compaction.expand_op_places(data, ops.column("name")), ops=ops)
        return super().from_dict(data)


@dataclasses.dataclass
class Count(Record):
    """One line of a census: how many of something are alive (and their bytes, when they have any)."""

    name: str
    count: int
    bytes: Optional[int] = None

    _non_negative: ClassVar[Tuple[str, ...]] = ("count", "bytes")


@dataclasses.dataclass
class DeviceMemory(Record):
    """An accelerator's allocator, as ``tf.config.experimental.get_memory_info`` reports it."""

    name: str
    current_bytes: int
    peak_bytes: int

    _non_negative: ClassVar[Tuple[str, ...]] = ("current_bytes", "peak_bytes")


@dataclasses.dataclass
class MemorySample(_Assigned):
    """Process-wide memory at one moment: what grows across steps or model builds.

    The census fields (live variables, graph ops, models, objects) are None in a cheap
    sample, which reads only the process's RSS and the devices' allocators.
    """

    rss_bytes: Optional[int] = None
    peak_rss_bytes: Optional[int] = None
    devices: List[DeviceMemory] = dataclasses.field(default_factory=list)
    live_variables: Optional[int] = None  # tf.Variable objects alive (a Keras variable's storage counts once)
    live_variable_bytes: Optional[int] = None
    graph_ops: Optional[int] = None  # graph Operation objects alive (TF1 graphs and traced functions)
    live_models: Optional[int] = None  # keras.Model objects alive
    python_objects: Optional[int] = None  # objects the garbage collector tracks
    variables_by_owner: List[Count] = dataclasses.field(default_factory=list)  # by model/layer path
    graph_ops_by_function: List[Count] = dataclasses.field(default_factory=list)  # by graph (function) name
    models: List[Count] = dataclasses.field(default_factory=list)  # name, variables, bytes
    objects_by_type: List[Count] = dataclasses.field(default_factory=list)  # the most numerous types
    census_seconds: float = 0.0  # what taking this sample cost
    label: str = ""

    _nested: ClassVar[Dict[str, Type[Record]]] = {
        "devices": DeviceMemory, "variables_by_owner": Count, "graph_ops_by_function": Count, "models": Count,
        "objects_by_type": Count,
    }
    _non_negative: ClassVar[Tuple[str, ...]] = ("rss_bytes", "peak_rss_bytes", "live_variables",
                                                "live_variable_bytes", "graph_ops", "live_models", "python_objects",
                                                "census_seconds")


@dataclasses.dataclass
class LoadResult(Record):
    """Cost of loading one saved format in a fresh process."""

    format: str  # "savedmodel", "keras", "h5", "weights", "tflite"
    mode: str  # "compile=True", "compile=False", "config+weights", ...
    file_bytes: int = 0
    load_seconds: float = 0.0  # median over repeats
    peak_rss_bytes: int = 0  # median over repeats of the process high-water mark
    repeats: int = 0
    error: str = ""  # why this format could not be produced or loaded

    _non_negative: ClassVar[Tuple[str, ...]] = ("file_bytes", "load_seconds", "peak_rss_bytes", "repeats")


@dataclasses.dataclass
class LoadBench(_Assigned):
    """All formats of one model, side by side."""

    model_name: str
    results: List[LoadResult]

    _nested: ClassVar[Dict[str, Type[Record]]] = {"results": LoadResult}


def _converted(field: str, kind: Type[Record], value: Any) -> Any:
    """``value`` as the nested field ``field`` holds it: a ``Table``, a ``Timeline``, or a list of
    ``kind`` records; rows and items may be given as records or as their dicts."""
    if isinstance(value, kind):
        return value
    if kind is Timeline:
        return _timeline(field, value)
    if issubclass(kind, Table):
        row = kind.row_type
        return kind.from_rows(_items(field, row, value, f"a list of {row.__name__} (or {_a(kind)})"))
    return _items(field, kind, value, f"a list of {kind.__name__}")


def _a(kind: type) -> str:
    return f"{'an' if kind.__name__[0] in 'AEIOU' else 'a'} {kind.__name__}"


def _items(field: str, kind: Type[Record], value: Any, expected: str) -> List[Any]:
    """The records of an iterable of ``kind`` records or their dicts (converted with ``from_dict``)."""
    if isinstance(value, (str, bytes, dict, Record)) or not isinstance(value, Iterable):
        raise TypeError(f"{field}: expected {expected}, got {type(value).__name__}")
    items = list(value)
    for i, item in enumerate(items):
        if isinstance(item, dict):
            try:
                items[i] = kind.from_dict(item)
            except ValueError as e:
                raise ValueError(f"{field}[{i}]: {e}") from None
        elif not isinstance(item, kind):
            raise TypeError(f"{field}[{i}]: expected {_a(kind)} (or its dict), got {type(item).__name__}")
    return items


def _timeline(field: str, value: Any) -> "Timeline":
    """A ``Timeline`` from its dict (``to_dict``'s columns) or from ``[[t_us, bytes, op?], ...]`` points."""
    if isinstance(value, dict):
        try:
            return Timeline.from_dict(value)
        except ValueError as e:
            raise ValueError(f"{field}: {e}") from None
    if isinstance(value, (str, bytes, Record)) or not isinstance(value, Iterable):
        raise TypeError(f"{field}: expected a Timeline or a list of [t_us, bytes, op] points, "
                        f"got {type(value).__name__}")
    points = list(value)
    for i, point in enumerate(points):
        if (not isinstance(point, (list, tuple)) or len(point) not in (2, 3) or not all(map(is_number, point[:2]))
                or (len(point) == 3 and not isinstance(point[2], str))):
            raise TypeError(f"{field}[{i}]: expected a [t_us, bytes, op] point, got {preview(point)}")
    return Timeline.from_points([list(p) for p in points])


@dataclasses.dataclass
class OomReport(_Assigned):
    """A step that ran out of memory: what the error said (``readers.oom.parse``) and what was in use
    then. Written before the error goes on up; the tab shows it with the run's What if."""

    error_type: str
    message: str  # the error's text, bounded
    requested_bytes: Optional[int] = None  # the allocation that failed (None: the message does not say)
    shape: str = ""
    dtype: str = ""
    device: str = ""
    allocator: str = ""
    op: str = ""  # the op (TF node, XLA op) whose allocation failed
    batch_size: Optional[int] = None  # of the failing step, when the caller knows it
    rss_bytes: Optional[int] = None
    devices: List[DeviceMemory] = dataclasses.field(default_factory=list)  # each allocator's bytes then
    bytes_limit: Optional[int] = None  # what the device may hold (JAX's memory_stats), None if not known
    where: str = ""  # what was running: "model.fit step 3", "trace('ops')"

    _nested: ClassVar[Dict[str, Type[Record]]] = {"devices": DeviceMemory}
    _non_negative: ClassVar[Tuple[str, ...]] = ("requested_bytes", "batch_size", "rss_bytes", "bytes_limit")
