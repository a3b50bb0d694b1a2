"""The record vocabulary shared by every stage: capture, summary, plugin.

Plain dataclasses with no TensorFlow or TensorBoard import, so the plugin
backend can decode what a training script wrote without loading TF.
Each record round-trips through ``to_dict`` / ``from_dict`` (JSON-safe). Big
per-op tables are columnar (``Table``): one JSON list per field decodes and
validates an order of magnitude faster than one object per op.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import operator
import reprlib
import typing
from typing import (
    Any, Callable, ClassVar, Dict, Generic, Iterable, Iterator, List, Optional, Tuple, Type, TypeVar, Union,
)

from tb_modelmem import columns as forms

# Variable roles. Every stored byte belongs to exactly one of these.
WEIGHT = "weight"  # trainable parameters
NON_TRAINABLE = "non_trainable"  # model state: BatchNorm moving stats, ...
OPTIMIZER_SLOT = "optimizer_slot"  # Adam m/v, momentum, accumulators, ...
OTHER = "other"  # counters, loss-scale state, learning-rate variables, ...
ROLES = (WEIGHT, NON_TRAINABLE, OPTIMIZER_SLOT, OTHER)

# Where an op's byte figure comes from.
MEASURED = "measured"  # reported by the allocator / step stats
DERIVED = "derived"  # output shape x dtype size, from the traced graph
UNKNOWN_BYTES = "unknown"  # neither: no graph, or a dimension known only at run time (never shown as 0)

# What part of a training step an op belongs to (decided by ``tb_modelmem.join``).
FORWARD = "forward"  # the model's forward pass
BACKWARD = "backward"  # gradients (tf.GradientTape / TF1 gradients/ scopes)
OPTIMIZER = "optimizer"  # applying gradients: slot and weight updates
LOSS = "loss"  # the loss and its reduction
METRICS = "metrics"  # metric state updates (accuracy, mean loss trackers)
INPUT = "input"  # the batch entering the step (iterator, feeds)
EXECUTOR = "executor"  # function call plumbing: _Arg, _Retval, NoOp, call ops
PHASES = (FORWARD, BACKWARD, OPTIMIZER, LOSS, METRICS, INPUT, EXECUTOR)

# What a byte in use at a step's peak is (the ops view's peak_by_category keys).
WEIGHTS_CATEGORY = "weights"
NON_TRAINABLE_CATEGORY = "non_trainable"
OPTIMIZER_SLOTS_CATEGORY = "optimizer_slots"
GRADIENTS = "gradients"
ACTIVATIONS = "activations"  # forward outputs still live (kept for the backward pass)
OPTIMIZER_TEMPORARIES = "optimizer_temporaries"
INPUTS = "inputs"
TEMPORARIES = "temporaries"  # scratch space, loss and metric values, executor buffers
UNATTRIBUTED = "unattributed"
PEAK_CATEGORIES = (WEIGHTS_CATEGORY, NON_TRAINABLE_CATEGORY, OPTIMIZER_SLOTS_CATEGORY, GRADIENTS, ACTIVATIONS,
                   OPTIMIZER_TEMPORARIES, INPUTS, TEMPORARIES, UNATTRIBUTED)
# Categories of buffers allocated inside a trace window; BEFORE_WINDOW: allocated before it, seen being freed.
STEP_CATEGORIES = (GRADIENTS, ACTIVATIONS, OPTIMIZER_TEMPORARIES, INPUTS, TEMPORARIES, WEIGHTS_CATEGORY,
                   OPTIMIZER_SLOTS_CATEGORY)
BEFORE_WINDOW = "before_window"

UNKNOWN_DIM = -1  # a dimension capture could not know (TF1 variable of unknown shape): no bytes claimed
MAX_NESTING = 32  # deepest free-form JSON (optimizer config, timeline point) a record accepts
MAX_STRING = 65536  # longest string a record accepts (a name, a shape, a config value)
MAX_INT = 2**63  # integers are int64, as TensorFlow's sizes are: a 10**4000 "size" is refused

# What one payload may inflate to: a 200,000-op trace is 1.9 MB stored and 13 MB of JSON
# (benchmarks/bench_serving.py), a bomb is refused, so one hostile summary costs the backend a
# bounded amount, once. Its one front-coded column (op names) expands to at most this many
# characters, and each dictionary column stands for at most this many (its rows share the strings).
MAX_DECODED_BYTES = 128 * 2**20

# A payload keeps times (an op's time, a timeline point's) to 1/TIME_PER_UNIT µs, 0.01 µs: the
# finest step the tab shows (times under 10 µs, to two decimals); the last digit of a time in ns
# cost a tenth of a ResNet50 trace's payload (README, bench_trace).
TIME_PER_UNIT = 100

T = TypeVar("T", bound="Record")
R = TypeVar("R", bound="Record")
Check = Callable[[Any], bool]


class Record:
    """Mixin: dict round-trip that tolerates unknown keys (newer writers).

    ``from_dict`` validates what it reads (types, non-negative sizes and counts, finite
    numbers) so a record that decodes is one every view can compute on.
    """

    _nested: ClassVar[Dict[str, Type["Record"]]] = {}  # field -> record type of its items (or of itself)
    _non_negative: ClassVar[Tuple[str, ...]] = ()  # int/float fields (or lists of them) that must be >= 0
    # Text columns of a Table with few distinct values (op types, dtypes, phases): decoded JSON
    # holds a new string per row, so one is kept per value (a 200,000-op trace: 149 -> 70 MiB).
    _repeated: ClassVar[Tuple[str, ...]] = ()
    # Text columns a payload stores front-coded (``columns.FRONT``); their rows are kept in that column's order.
    _front_coded: ClassVar[Tuple[str, ...]] = ()
    # Time columns a payload stores to 1/TIME_PER_UNIT µs (``columns.FIXED``).
    _times: ClassVar[Tuple[str, ...]] = ()

    def to_dict(self, compact: bool = False) -> Dict[str, Any]:
        """JSON-ready dict (no deep copy: fast enough for 200,000-op traces); ``compact``: big
        columns in the forms of ``tb_modelmem.columns``, as payloads store them."""
        out = {}
        for name in _field_hints(type(self)):
            value = getattr(self, name)
            if isinstance(value, Record):
                value = value.to_dict(compact)
            elif name in self._nested:
                value = [item.to_dict(compact) for item in value]
            elif isinstance(value, list):
                value = list(value)
            out[name] = value
        return out

    @classmethod
    def from_dict(cls: Type[T], data: Dict[str, Any]) -> T:
        """The record in ``data``; ValueError naming the first field that is not valid."""
        if not isinstance(data, dict):
            raise ValueError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
        checks = _field_checks(cls)
        kwargs = {k: v for k, v in data.items() if k in checks}
        for key, value in kwargs.items():
            nested = cls._nested.get(key)
            if nested is not None and typing.get_origin(_field_hints(cls)[key]) not in (list, List):
                kwargs[key] = _nested_record(cls, key, nested, value)
            elif nested is not None:
                if not isinstance(value, list):
                    raise ValueError(f"{cls.__name__}.{key}: expected a list")
                kwargs[key] = [_nested_item(cls, key, i, x) for i, x in enumerate(value)]
            elif not checks[key](value):
                raise ValueError(f"{cls.__name__}.{key}: {_misfit(value)} {preview(value)}")
            elif key in cls._non_negative and any(v < 0 for v in (value if isinstance(value, list) else [value])
                                                  if v is not None):
                raise ValueError(f"{cls.__name__}.{key}: must be >= 0, got {preview(value)}")
        try:
            record = cls(**kwargs)
        except TypeError as e:
            raise ValueError(f"{cls.__name__}: {e}") from None
        record._check()
        return record

    def _check(self) -> None:
        """Constraints across a field's items (beyond its type); raise ValueError."""


class Table(Record, Generic[R]):
    """Rows of one record type stored column by column: ``{field: [value per row]}``.

    Iterating yields row records (built on demand); views that scan a column use
    ``column(name)`` and never build a row object. Rows missing a column (older
    writers) take the field's default.
    """

    row_type: ClassVar[Type[Record]]

    def __init__(self, columns: Optional[Dict[str, list]] = None) -> None:
        columns = dict(columns or {})
        lengths = {len(v) for v in columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"{type(self).__name__}: columns of different lengths {sorted(lengths)}")
        self._length = lengths.pop() if lengths else 0
        for name, default in _row_defaults(self.row_type).items():
            if name not in columns:
                if default is dataclasses.MISSING:
                    if self._length:
                        raise ValueError(f"{type(self).__name__}: missing column {name!r}")
                    columns[name] = []
                else:
                    columns[name] = [default() if callable(default) else default] * self._length
        self.columns = {name: columns[name] for name in _field_hints(self.row_type)}

    @classmethod
    def from_rows(cls, rows: Iterable[R]) -> "Table[R]":
        if isinstance(rows, cls):
            return rows
        rows = list(rows)
        return cls({name: [getattr(r, name) for r in rows] for name in _field_hints(cls.row_type)})

    def column(self, name: str) -> list:
        return self.columns[name]

    def records(self) -> List[R]:
        """Every row as its record, made without a constructor call each (10,000 rows in a few ms)."""
        fields = list(self.columns)
        row_type, new = self.row_type, object.__new__
        rows = []
        for values in zip(*self.columns.values()):
            row = new(row_type)
            row.__dict__.update(zip(fields, values))
            rows.append(row)
        return rows

    def row(self, index: int) -> R:
        return self.row_type(**{name: values[index] for name, values in self.columns.items()})  # type: ignore

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[R]:
        return iter(self.records())

    def __getitem__(self, index: int) -> R:
        return self.row(range(self._length)[index])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list):  # a record made in memory with a list of rows
            return self.records() == other
        return isinstance(other, Table) and type(other) is type(self) and other.columns == self.columns

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._length} rows)"

    def to_dict(self, compact: bool = False) -> Dict[str, Any]:
        out = {}
        for name, values in self.columns.items():
            form = _form(self.row_type, name) if compact else None
            per_unit = TIME_PER_UNIT if form == forms.FIXED else None
            out[name] = forms.encode(values, form, per_unit) if form else list(values)
        return out

    @classmethod
    def from_dict(cls, data: Any) -> "Table[R]":
        """Columns (``{field: [...]}``), or a list of row objects as older payloads stored them."""
        if isinstance(data, list):
            table = cls.from_rows(_list_item(cls.row_type, i, x) for i, x in enumerate(data))
            table._check()
            return table
        if not isinstance(data, dict):
            raise ValueError(f"{cls.__name__}: expected columns (an object of lists), got {type(data).__name__}")
        row = cls.row_type
        checks = _field_checks(row)
        # what the columns that say their length say (a run-length column must agree with it)
        rows = next((n for n in (forms.length(v) for k, v in data.items() if k in checks) if n is not None), None)
        columns = {}
        for name, stored in data.items():
            if name not in checks:
                continue
            form = _form(row, name)
            values = _column(row, name, stored, form, rows=rows) if form else stored
            if not isinstance(values, list):
                raise ValueError(f"{cls.__name__}.{name}: expected a list")
            # a dictionary column is checked by its distinct values, not row by row (its rows share them)
            distinct = forms.dictionary_values(stored) if form == forms.DICTIONARY else None
            shared = distinct is not None
            checked, label = (distinct, f"{name}.values") if shared else (values, name)
            non_negative = name in row._non_negative
            if not _column_fits(checked, _field_hints(row)[name], 0 if non_negative else -MAX_INT):
                # value by value, only to name the first that fails (the whole-column check is in C)
                bad = _first_misfit(checked, checks[name])
                if bad is not None:
                    raise ValueError(f"{row.__name__}.{label}[{bad}]: {_misfit(checked[bad])} {preview(checked[bad])}")
                if non_negative and checked and _has_negative(checked):
                    index = next(i for i, v in enumerate(checked) if _negative(v))
                    raise ValueError(f"{row.__name__}.{label}[{index}]: must be >= 0, got {preview(checked[index])}")
            columns[name] = _shared(values) if name in row._repeated and not shared else values
        try:
            table = cls(columns)
        except ValueError as e:
            raise ValueError(str(e)) from None
        table._check()
        return table


def _form(row: Type[Record], name: str) -> Optional[str]:
    """The compact form a payload stores a row type's column in (``tb_modelmem.columns``), None: plain."""
    if name in row._front_coded:
        return forms.FRONT
    if name in row._times:
        return forms.FIXED
    return forms.DICTIONARY if name in row._repeated else None


def _column(cls: type, name: str, stored: Any, form: str, base: Optional[list] = None,
            rows: Optional[int] = None) -> list:
    """A stored column as its plain list (``tb_modelmem.columns.decode``); its error names the field."""
    try:
        return forms.decode(stored, form, MAX_DECODED_BYTES, base, rows)
    except ValueError as e:
        raise ValueError(f"{cls.__name__}.{name}: {e}") from None


def _shared(values: list) -> list:
    """The column with one object per distinct value (they are equal, so nothing else changes)."""
    try:
        memo: Dict[Any, Any] = {}
        return list(map(memo.setdefault, values, values))
    except TypeError:  # unhashable values (lists): kept as they are
        return values


def _nested_item(cls: type, key: str, index: int, data: Any) -> "Record":
    """One item of a nested list; its error says which one ("LoadBench.results[17]: ...")."""
    try:
        return _list_item(cls._nested[key], index, data)
    except ValueError as e:
        raise ValueError(f"{cls.__name__}.{key}{e}") from None


def _list_item(item_type: Type[Record], index: int, data: Any) -> Record:
    try:
        return item_type.from_dict(data)
    except ValueError as e:
        raise ValueError(f"[{index}]: {e}") from None


def _nested_record(cls: type, key: str, record_type: Type[Record], data: Any) -> Record:
    """A field holding one record (a Table, a Timeline); its error names the field. A record
    already decoded (``OpTrace`` decodes its ops first) is taken as it is."""
    if type(data) is record_type:
        return data
    try:
        return record_type.from_dict(data)
    except ValueError as e:
        text = str(e)
        raise ValueError(f"{cls.__name__}.{key}{'' if text.startswith('[') else ': '}{text}") from None


@functools.lru_cache(maxsize=None)
def _field_hints(cls: type) -> Dict[str, Any]:
    """Each dataclass field's resolved annotation (resolving is slow: once per class)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


@functools.lru_cache(maxsize=None)
def _row_defaults(cls: type) -> Dict[str, Any]:
    """Each field's default value or factory (MISSING when required)."""
    return {f.name: f.default_factory if f.default_factory is not dataclasses.MISSING else f.default
            for f in dataclasses.fields(cls)}


@functools.lru_cache(maxsize=None)
def _field_checks(cls: type) -> Dict[str, Check]:
    """One compiled type check per field (built once per class: per-value typing calls are slow)."""
    return {name: _compile_check(hint) for name, hint in _field_hints(cls).items()}


def _compile_check(hint: Any) -> Check:
    """A predicate for decoded JSON against a type annotation; numbers finite, free-form values
    (``Any``, dicts) at most MAX_NESTING deep."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Union:
        parts = [_compile_check(a) for a in args]
        return lambda v: any(p(v) for p in parts)
    if hint is type(None):
        return lambda v: v is None
    if origin in (list, List):
        if not args:
            return lambda v: isinstance(v, list)
        item = _compile_check(args[0])
        return lambda v: isinstance(v, list) and all(map(item, v))
    if origin in (dict, Dict):
        return lambda v: isinstance(v, dict) and _free_form(v)
    if hint is float:
        return is_number
    if hint is int:
        return lambda v: type(v) is int and -MAX_INT <= v < MAX_INT  # noqa: E721 (bool is not an int here)
    if hint is bool:
        return lambda v: type(v) is bool  # noqa: E721
    if hint is str:
        return lambda v: type(v) is str and len(v) <= MAX_STRING  # noqa: E721
    if hint is Any:
        return _free_form
    if isinstance(hint, type) and issubclass(hint, Record):
        return lambda v: isinstance(v, dict)
    return lambda v: isinstance(v, hint)


def _first_misfit(values: list, check: Check) -> Optional[int]:
    """Index of the first value of a column that fails its field's check, else None."""
    for i, value in enumerate(values):
        if not check(value):
            return i
    return None


def _column_fits(values: list, hint: Any, low: int = -MAX_INT) -> bool:
    """True when every value surely fits ``hint`` and numbers are >= ``low`` (False: look value
    by value). Sets of types, min and max: the whole column in C, one pass each."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    kinds = set(map(type, values))
    if origin is Union and type(None) in args and len(args) == 2:
        if type(None) in kinds:
            values = list(itertools.compress(values, map(operator.is_not, values, itertools.repeat(None))))
        hint = args[0] if args[1] is type(None) else args[1]
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        kinds.discard(type(None))
    if origin in (list, List) and args and args[0] in (str, int):
        return kinds <= {list} and _column_fits(list(itertools.chain.from_iterable(values)), args[0], low)
    if hint is str:
        return kinds <= {str} and max(map(len, values), default=0) <= MAX_STRING
    if hint is int:
        return kinds <= {int} and low <= min(values, default=0) and max(values, default=0) < MAX_INT
    if hint is float:
        try:  # a NaN or an infinity makes the sum one; so may finite values past 1e308 (then value by value)
            return kinds <= {int, float} and math.isfinite(sum(values)) and min(values, default=0) >= low
        except OverflowError:  # an integer past a float's range
            return False
    return False


def _negative(value: Any) -> bool:
    return isinstance(value, (int, float)) and value < 0


def _has_negative(values: list) -> bool:
    try:
        return min(values) < 0
    except TypeError:  # a column of lists or mixed values: check one by one
        return any(map(_negative, values))


def bytes_by_role(variables: Iterable["VariableRecord"]) -> Dict[str, int]:
    """Bytes per role, every role present even at zero; an unknown role counts as OTHER."""
    return role_totals([(v.role, v.bytes) for v in variables])


def role_totals(role_bytes: Iterable[Tuple[str, int]]) -> Dict[str, int]:
    """``bytes_by_role`` of (role, bytes) pairs (a breakdown's columns, zipped)."""
    totals = {role: 0 for role in ROLES}
    for role, size in role_bytes:
        totals[role if role in totals else OTHER] += size
    return totals


def _misfit(value: Any) -> str:
    """Why a value that does not fit its field was refused, in a few words."""
    if isinstance(value, float) and not math.isfinite(value):
        return "not a finite number"
    if isinstance(value, list):
        for i, item in enumerate(value[:100_000]):
            if isinstance(item, float) and not math.isfinite(item):
                return f"item {i} is not a finite number"
    if isinstance(value, int) and not isinstance(value, bool) and not -MAX_INT <= value < MAX_INT:
        return "an integer out of the int64 range"
    if isinstance(value, str) and len(value) > MAX_STRING:
        return f"a string of {len(value):,} characters (at most {MAX_STRING:,})"
    if _nesting(value) > MAX_NESTING:
        return f"nested deeper than {MAX_NESTING} levels"
    if not _free_form(value):
        return "holds a string too long or an integer out of range"
    return "unexpected value"


def _free_form(value: Any) -> bool:
    """Free-form JSON (an optimizer config) a view can serialise again: at most MAX_NESTING
    deep, strings at most MAX_STRING long, integers within int64."""
    if _nesting(value) > MAX_NESTING:
        return False
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, str):
            if len(item) > MAX_STRING:
                return False
        elif isinstance(item, int) and not isinstance(item, bool) and not -MAX_INT <= item < MAX_INT:
            return False
    return True


_PREVIEW = reprlib.Repr()  # bounded depth and length: repr() of decoded JSON could recurse past the limit
_PREVIEW.maxlevel, _PREVIEW.maxstring, _PREVIEW.maxother = 4, 60, 60


def preview(value: Any) -> str:
    """A short repr of a value from untrusted JSON, for error messages (at most 60 characters)."""
    text = _PREVIEW.repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def is_number(value: Any) -> bool:
    """A finite JSON number (not a bool, not NaN or Infinity, not an integer past a float's range)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _nesting(value: Any) -> int:
    """How deep lists and dicts nest in ``value`` (0 for a scalar); stops counting past MAX_NESTING."""
    depth, level = 0, [value]
    while depth <= MAX_NESTING:
        containers = [item for item in level if isinstance(item, (list, dict))]
        if not containers:
            break
        depth += 1
        level = [v for c in containers for v in (c.values() if isinstance(c, dict) else c)]
    return depth


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
    replicas: int = 1  # > 1 for variables mirrored over several devices
    slot: Optional[str] = None  # optimizer slot name (m, v, momentum, ...)
    slot_of: Optional[str] = None  # name of the weight a slot belongs to

    _non_negative: ClassVar[Tuple[str, ...]] = ("bytes", "replicas")

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
class Breakdown(Record):
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

    def __post_init__(self) -> None:
        self.variables = VariableTable.from_rows(self.variables)
        self.layers = LayerTable.from_rows(self.layers)

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

    _non_negative: ClassVar[Tuple[str, ...]] = ("calls", "time_us", "output_bytes", "alloc_bytes")
    _repeated: ClassVar[Tuple[str, ...]] = ("op_type", "layer", "device", "output_shape", "output_dtype",
                                            "bytes_source", "phase")
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
    category: str = ""  # one of STEP_CATEGORIES, or BEFORE_WINDOW
    bytes_source: str = MEASURED

    _non_negative: ClassVar[Tuple[str, ...]] = ("bytes",)
    _repeated: ClassVar[Tuple[str, ...]] = ("shape", "dtype", "region", "category", "bytes_source")


class BufferTable(Table[BufferRecord]):
    """Buffers in use at the peak, columnar."""

    row_type = BufferRecord


@dataclasses.dataclass
class Timeline(Record):
    """Bytes in use over a trace, one point per allocator event (downsampled, the peak kept).

    ``by_category`` holds, for each point, the bytes in use of buffers allocated inside the
    trace window per STEP_CATEGORIES category (and BEFORE_WINDOW); what ``bytes`` holds beyond
    their sum was allocated before the window and is still resident (weights, slots, ...).
    """

    t_us: List[float] = dataclasses.field(default_factory=list)
    bytes: List[float] = dataclasses.field(default_factory=list)
    op: List[str] = dataclasses.field(default_factory=list)  # the op behind each event ("" if unknown)
    by_category: Dict[str, List[float]] = dataclasses.field(default_factory=dict)

    _non_negative: ClassVar[Tuple[str, ...]] = ("bytes",)

    def to_dict(self, compact: bool = False) -> Dict[str, Any]:
        """``compact``: times and bytes in use as steps from the point before (they climb and fall
        in steps), times to 1/TIME_PER_UNIT µs."""
        out = super().to_dict(compact)
        if compact:
            out["t_us"] = forms.encode(self.t_us, forms.DELTA, TIME_PER_UNIT)
            out["bytes"] = forms.encode(self.bytes, forms.DELTA)
            out["by_category"] = {k: forms.encode(v, forms.DELTA) for k, v in self.by_category.items()}
        return out

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Timeline":
        """Plain lists, or ``t_us``, ``bytes`` and ``by_category`` as ``to_dict(compact=True)`` stores them."""
        if isinstance(data, dict) and "t_us" in data:
            data = dict(data, t_us=_column(cls, "t_us", data["t_us"], forms.DELTA))
        if isinstance(data, dict) and "bytes" in data:
            data = dict(data, bytes=_column(cls, "bytes", data["bytes"], forms.DELTA))
        if isinstance(data, dict) and isinstance(data.get("by_category"), dict):
            data = dict(data, by_category={k: _column(cls, f"by_category[{preview(k)}]", v, forms.DELTA)
                                           for k, v in data["by_category"].items()})
        return super().from_dict(data)  # type: ignore[return-value]

    def _check(self) -> None:
        n = len(self.t_us)
        if len(self.bytes) != n or (self.op and len(self.op) != n):
            raise ValueError("Timeline: t_us, bytes and op must have the same length")
        for name, values in self.by_category.items():
            if (not isinstance(values, list) or len(values) != n
                    or not all(is_number(v) and v >= 0 for v in values)):
                raise ValueError(f"Timeline.by_category[{preview(name)}]: expected {n} numbers >= 0")
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
class OpTrace(Record):
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
    # large ones: set TF_CPU_ALLOCATOR_USE_BFC=true), or "none"; ``allocations_note`` says why.
    allocations: str = "all"
    allocations_note: str = ""
    timed: bool = True  # False when the source holds memory only (a TF 2.3-2.10 memory profile): no op times
    # Per allocator (device memory pool): {"name", "peak_bytes", "min_bytes"}; min is what stayed resident.
    allocators: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    layers: List[str] = dataclasses.field(default_factory=list)  # the model's layer paths ops joined, model order

    _nested: ClassVar[Dict[str, Type[Record]]] = {"ops": OpTable, "peak_buffers": BufferTable,
                                                   "timeline": Timeline}
    _non_negative: ClassVar[Tuple[str, ...]] = ("peak_bytes", "peak_time_us", "steps")

    def __post_init__(self) -> None:
        if not isinstance(self.ops, OpTable):
            self.ops = OpTable.from_rows(self.ops)
        if not isinstance(self.peak_buffers, BufferTable):
            self.peak_buffers = BufferTable.from_rows(self.peak_buffers)
        if isinstance(self.timeline, list):
            self.timeline = Timeline.from_points(self.timeline)

    def to_dict(self, compact: bool = False) -> Dict[str, Any]:
        """``compact``: the op names of the timeline and of the peak's buffers as places in the op
        table (``columns.EXTENDS``): they name its ops, already stored."""
        out = super().to_dict(compact)
        if compact:
            names = self.ops.column("name")
            out["timeline"]["op"] = forms.encode(self.timeline.op, forms.EXTENDS, base=names)
            out["peak_buffers"]["op"] = forms.encode(self.peak_buffers.column("op"), forms.EXTENDS, base=names)
        return out

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "OpTrace":
        if isinstance(data, dict) and isinstance(data.get("timeline"), list):  # schema 1: [[t, bytes, op?], ...]
            data = dict(data, timeline=_timeline_from_points(data["timeline"]))
        if isinstance(data, dict) and "ops" in data and any(
                isinstance(data.get(part), dict) and isinstance(data[part].get("op"), dict)
                for part in ("timeline", "peak_buffers")):
            data = _with_op_places(data, _nested_record(cls, "ops", OpTable, data["ops"]))
        return super().from_dict(data)  # type: ignore[return-value]


def _with_op_places(data: Dict[str, Any], ops: "OpTable") -> Dict[str, Any]:
    """``data`` with its ops decoded and the ``op`` columns stored as places in them read as names."""
    data = dict(data, ops=ops)
    names = ops.column("name")
    for part, owner in (("timeline", Timeline), ("peak_buffers", BufferRecord)):
        stored = data.get(part)
        if isinstance(stored, dict) and isinstance(stored.get("op"), dict):
            data[part] = dict(stored, op=_column(owner, "op", stored["op"], forms.EXTENDS, names))
    return data


def _timeline_from_points(points: List[Any]) -> Dict[str, Any]:
    for i, point in enumerate(points):
        if not (isinstance(point, list) and 2 <= len(point) <= 3 and is_number(point[0]) and is_number(point[1])
                and (len(point) == 2 or isinstance(point[2], str))):
            raise ValueError(f"OpTrace.timeline[{i}]: expected [t_us, bytes_in_use, op_name?], got {preview(point)}")
    return Timeline.from_points(points).to_dict()


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
class MemorySample(Record):
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
class LoadBench(Record):
    """All formats of one model, side by side."""

    model_name: str
    results: List[LoadResult]

    _nested: ClassVar[Dict[str, Type[Record]]] = {"results": LoadResult}
