"""The record vocabulary shared by every stage: capture, summary, plugin.

Plain dataclasses with no TensorFlow or TensorBoard import, so the plugin
backend can decode what a training script wrote without loading TF.
Each record round-trips through ``to_dict`` / ``from_dict`` (JSON-safe).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import reprlib
import typing
from typing import Any, ClassVar, Dict, Iterable, List, Optional, Tuple, Type, TypeVar

# Variable roles. Every stored byte belongs to exactly one of these.
WEIGHT = "weight"  # trainable parameters
NON_TRAINABLE = "non_trainable"  # model state: BatchNorm moving stats, ...
OPTIMIZER_SLOT = "optimizer_slot"  # Adam m/v, momentum, accumulators, ...
OTHER = "other"  # counters, loss-scale state, learning-rate variables, ...
ROLES = (WEIGHT, NON_TRAINABLE, OPTIMIZER_SLOT, OTHER)

# Where an op's byte figure comes from.
MEASURED = "measured"  # reported by the allocator / step stats
DERIVED = "derived"  # output shape x dtype size, from the traced graph

UNKNOWN_DIM = -1  # a dimension capture could not know (TF1 variable of unknown shape): no bytes claimed
MAX_NESTING = 32  # deepest free-form JSON (optimizer config, timeline point) a record accepts

T = TypeVar("T", bound="Record")


class Record:
    """Mixin: dict round-trip that tolerates unknown keys (newer writers).

    ``from_dict`` validates what it reads (types, non-negative sizes and counts, finite
    numbers) so a record that decodes is one every view can compute on.
    """

    _nested: ClassVar[Dict[str, Type["Record"]]] = {}
    _non_negative: ClassVar[Tuple[str, ...]] = ()  # int/float fields (or lists of them) that must be >= 0

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready dict (no deep copy: fast enough for 20,000-op traces)."""
        out = {}
        for name in _field_hints(type(self)):
            value = getattr(self, name)
            if name in self._nested:
                value = [item.to_dict() for item in value]
            elif isinstance(value, list):
                value = list(value)
            out[name] = value
        return out

    @classmethod
    def from_dict(cls: Type[T], data: Dict[str, Any]) -> T:
        """The record in ``data``; ValueError naming the first field that is not valid."""
        if not isinstance(data, dict):
            raise ValueError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
        hints = _field_hints(cls)
        kwargs = {k: v for k, v in data.items() if k in hints}
        for key, value in kwargs.items():
            if key in cls._nested:
                if not isinstance(value, list):
                    raise ValueError(f"{cls.__name__}.{key}: expected a list")
                kwargs[key] = [_nested_item(cls, key, i, x) for i, x in enumerate(value)]
            elif not _fits(value, hints[key]):
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


def _nested_item(cls: type, key: str, index: int, data: Any) -> "Record":
    """One item of a nested list; its error says which one ("OpTrace.ops[17]: ...")."""
    try:
        return cls._nested[key].from_dict(data)
    except ValueError as e:
        raise ValueError(f"{cls.__name__}.{key}[{index}]: {e}") from None


@functools.lru_cache(maxsize=None)
def _field_hints(cls: type) -> Dict[str, Any]:
    """Each dataclass field's resolved annotation (resolving is slow: once per class)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def bytes_by_role(variables: Iterable["VariableRecord"]) -> Dict[str, int]:
    """Bytes per role, every role present even at zero; an unknown role counts as OTHER."""
    totals = {role: 0 for role in ROLES}
    for v in variables:
        totals[v.role if v.role in totals else OTHER] += v.bytes
    return totals


def _misfit(value: Any) -> str:
    """Why a value that does not fit its field was refused, in a few words."""
    if isinstance(value, float) and not math.isfinite(value):
        return "not a finite number"
    if _nesting(value) > MAX_NESTING:
        return f"nested deeper than {MAX_NESTING} levels"
    return "unexpected value"


_PREVIEW = reprlib.Repr()  # bounded depth and length: repr() of decoded JSON could recurse past the limit
_PREVIEW.maxlevel, _PREVIEW.maxstring, _PREVIEW.maxother = 4, 60, 60


def preview(value: Any) -> str:
    """A short repr of a value from untrusted JSON, for error messages (at most 60 characters)."""
    text = _PREVIEW.repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _fits(value: Any, hint: Any) -> bool:
    """Type check of decoded JSON against a field's annotation; numbers must be finite and
    free-form values (``Any``, dicts) at most MAX_NESTING deep."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:
        return any(_fits(value, a) for a in args)
    if hint is type(None):
        return value is None
    if origin in (list, List):
        return isinstance(value, list) and all(_fits(v, args[0]) for v in value) if args else isinstance(value, list)
    if origin in (dict, Dict):
        return isinstance(value, dict) and _nesting(value) <= MAX_NESTING
    if hint is float:
        return is_number(value)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is Any:
        return _nesting(value) <= MAX_NESTING
    return isinstance(value, hint)


def is_number(value: Any) -> bool:
    """A finite JSON number (not a bool, not NaN or Infinity)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


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

    def _check(self) -> None:
        if any(d < UNKNOWN_DIM for d in self.shape):
            raise ValueError(f"VariableRecord.shape: dimensions must be >= 0 ({UNKNOWN_DIM} for unknown), "
                             f"got {preview(self.shape)}")

    @property
    def params(self) -> int:
        """Element count; 0 while a dimension is unknown (a TF1 variable of unknown shape)."""
        if any(d < 0 for d in self.shape):
            return 0
        return math.prod(self.shape)


@dataclasses.dataclass
class LayerRecord(Record):
    """One layer and how its parameter count is derived."""

    name: str
    class_name: str
    params: int
    derivation: str = ""  # e.g. "(5*5*1+1)*32 = 832"

    _non_negative: ClassVar[Tuple[str, ...]] = ("params",)


@dataclasses.dataclass
class Breakdown(Record):
    """Every variable of a model/optimizer/checkpoint at one moment."""

    source: str  # "keras", "tf.Module", "tf1", "checkpoint", ...
    variables: List[VariableRecord]
    layers: List[LayerRecord] = dataclasses.field(default_factory=list)
    model_name: str = ""
    optimizer: Optional[Dict[str, Any]] = None  # {"class_name": ..., "config": {...}}
    file_bytes: Optional[int] = None  # size on disk, for files and checkpoints
    overhead: List[Dict[str, Any]] = dataclasses.field(default_factory=list)  # [{"what", "bytes"}]

    _nested: ClassVar[Dict[str, Type[Record]]] = {
        "variables": VariableRecord,
        "layers": LayerRecord,
    }
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
    layer: str = ""
    device: str = ""
    calls: int = 1
    time_us: float = 0.0  # total compute time over all calls
    output_bytes: int = 0
    output_shape: str = ""  # e.g. "[1,28,28,32]"
    output_dtype: str = ""  # e.g. "float32"
    bytes_source: str = MEASURED  # MEASURED or DERIVED
    alloc_bytes: int = 0  # bytes the allocator handed out for this op
    fused: List[str] = dataclasses.field(default_factory=list)  # ops a fused kernel stands for

    _non_negative: ClassVar[Tuple[str, ...]] = ("calls", "time_us", "output_bytes", "alloc_bytes")


@dataclasses.dataclass
class OpTrace(Record):
    """Per-op table of one or more traced steps, plus memory over time."""

    source: str  # "run_metadata" or "xspace"
    ops: List[OpRecord]
    peak_bytes: int = 0  # allocator's peak bytes in use during the trace
    peak_time_us: float = 0.0
    timeline: List[List[Any]] = dataclasses.field(default_factory=list)  # [[t_us, bytes_in_use, op_name?]]
    devices: List[str] = dataclasses.field(default_factory=list)
    steps: int = 1

    _nested: ClassVar[Dict[str, Type[Record]]] = {"ops": OpRecord}
    _non_negative: ClassVar[Tuple[str, ...]] = ("peak_bytes", "peak_time_us", "steps")

    def _check(self) -> None:
        for i, point in enumerate(self.timeline):
            if not (2 <= len(point) <= 3 and is_number(point[0]) and is_number(point[1])
                    and (len(point) == 2 or isinstance(point[2], str))):
                raise ValueError(f"OpTrace.timeline[{i}]: expected [t_us, bytes_in_use, op_name?], "
                                 f"got {preview(point)}")


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
