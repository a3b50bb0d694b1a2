"""The record vocabulary shared by every stage: capture, summary, plugin.

Plain dataclasses with no TensorFlow or TensorBoard import, so the plugin
backend can decode what a training script wrote without loading TF.
Each record round-trips through ``to_dict`` / ``from_dict`` (JSON-safe).
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from typing import Any, ClassVar, Dict, List, Optional, Type, TypeVar

# Variable roles. Every stored byte belongs to exactly one of these.
WEIGHT = "weight"  # trainable parameters
NON_TRAINABLE = "non_trainable"  # model state: BatchNorm moving stats, ...
OPTIMIZER_SLOT = "optimizer_slot"  # Adam m/v, momentum, accumulators, ...
OTHER = "other"  # counters, loss-scale state, learning-rate variables, ...
ROLES = (WEIGHT, NON_TRAINABLE, OPTIMIZER_SLOT, OTHER)

# Where an op's byte figure comes from.
MEASURED = "measured"  # reported by the allocator / step stats
DERIVED = "derived"  # output shape x dtype size, from the traced graph

T = TypeVar("T", bound="Record")


class Record:
    """Mixin: dict round-trip that tolerates unknown keys (newer writers)."""

    _nested: ClassVar[Dict[str, Type["Record"]]] = {}

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
        if not isinstance(data, dict):
            raise ValueError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
        hints = _field_hints(cls)
        kwargs = {k: v for k, v in data.items() if k in hints}
        for key, value in kwargs.items():
            if key in cls._nested:
                if not isinstance(value, list):
                    raise ValueError(f"{cls.__name__}.{key}: expected a list")
                kwargs[key] = [cls._nested[key].from_dict(x) for x in value]
            elif not _fits(value, hints[key]):
                raise ValueError(f"{cls.__name__}.{key}: unexpected value {value!r:.60}")
        try:
            return cls(**kwargs)
        except TypeError as e:
            raise ValueError(f"{cls.__name__}: {e}") from None


@functools.lru_cache(maxsize=None)
def _field_hints(cls: type) -> Dict[str, Any]:
    """Each dataclass field's resolved annotation (resolving is slow: once per class)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _fits(value: Any, hint: Any) -> bool:
    """Shallow type check of decoded JSON against a field's annotation."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:
        return any(_fits(value, a) for a in args)
    if hint is type(None):
        return value is None
    if origin in (list, List):
        return isinstance(value, list) and all(_fits(v, args[0]) for v in value) if args else isinstance(value, list)
    if origin in (dict, Dict):
        return isinstance(value, dict)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is Any:
        return True
    return isinstance(value, hint)


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

    @property
    def params(self) -> int:
        n = 1
        for d in self.shape:
            n *= int(d)
        return n


@dataclasses.dataclass
class LayerRecord(Record):
    """One layer and how its parameter count is derived."""

    name: str
    class_name: str
    params: int
    derivation: str = ""  # e.g. "(5*5*1+1)*32 = 832"


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


@dataclasses.dataclass
class LoadBench(Record):
    """All formats of one model, side by side."""

    model_name: str
    results: List[LoadResult]

    _nested: ClassVar[Dict[str, Type[Record]]] = {"results": LoadResult}
