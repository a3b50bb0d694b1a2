"""What a traced step's memory would be at another batch size, optimizer, precision or replica count,
projected from what the trace measured. No TF.

From the trace: bytes in use over the step by category, and the part of each held by buffers that
carry the batch dimension (``Timeline.batch_by_category``). From the run's breakdown: every variable's
role, shape and dtype. The state is recomputed (the weights, and the slots the asked optimizer's
``build()`` makes for them: ``roles.keras_optimizer_variables``); the step's batch-carrying bytes are
scaled to the asked batch, the rest kept; the projected peak is the maximum over the replayed timeline,
so a peak that moves to another moment is found, not assumed. Each figure says how it was made
(measured, scaled, computed, kept) and what the data cannot give is unknown, with the reason.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from tb_modelmem.rules import roles
from tb_modelmem.schema.names import (
    ACTIVATIONS,
    BEFORE_WINDOW,
    GRADIENTS,
    NON_TRAINABLE,
    NON_TRAINABLE_CATEGORY,
    OPTIMIZER_SLOT,
    OPTIMIZER_SLOTS_CATEGORY,
    OPTIMIZER_TEMPORARIES,
    OTHER,
    OTHER_STATE_CATEGORY,
    RESIDENT_CATEGORIES,
    STEP_CATEGORIES,
    STEP_ONLY_CATEGORIES,
    TEMPORARIES,
    UNATTRIBUTED,
    WEIGHT,
    WEIGHTS_CATEGORY,
)
from tb_modelmem.schema.records import Breakdown, OpTrace

# Keras' mixed-precision policies: bytes of one element in the compute dtype (variables stay float32).
POLICIES = {"float32": 4, "mixed_float16": 2, "mixed_bfloat16": 2}
# Categories whose batch-carrying buffers are values in the compute dtype (inputs keep the data's).
_COMPUTED = (ACTIVATIONS, GRADIENTS, TEMPORARIES)
# What ``build()`` gives a counter or rate whose dtype Keras decides at run time: int64 counters,
# float32 rates and scales (TensorFlow's backend; JAX's default makes counters int32).
_STATE_BYTES = {"iteration": 8, "step_counter": 8}
_SCALAR_BYTES = 4
_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1, "int16": 2,
                "int32": 4, "int64": 8, "bool": 1, "complex64": 8, "complex128": 16}


@dataclasses.dataclass
class WhatIf:
    """What to change; None keeps what the trace ran with."""

    batch: Optional[int] = None  # the global batch (split over ``replicas``)
    optimizer: Optional[str] = None  # a Keras 3 optimizer class ("Adam", "SGD", "AdamW"...), "momentum": SGD with it
    policy: Optional[str] = None  # one of POLICIES
    replicas: int = 1  # data-parallel devices (MirroredStrategy): each holds the whole state

    def check(self) -> None:
        """ValueError naming what is wrong, before anything is projected."""
        if self.batch is not None and (not isinstance(self.batch, int) or self.batch < 1):
            raise ValueError(f"batch must be a positive integer, got {self.batch!r}")
        if not isinstance(self.replicas, int) or self.replicas < 1:
            raise ValueError(f"replicas must be a positive integer, got {self.replicas!r}")
        if self.policy is not None and self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        if self.optimizer is not None:
            _optimizer_class(self.optimizer)


def project(trace: OpTrace, breakdown: Optional[Breakdown], what: WhatIf) -> Dict[str, Any]:
    """The projected peak of one device: ``{"peak_bytes", "by_category", "basis": [lines], "unknown":
    {category: reason}, "traced": {...}, "peak_moved", "batch_per_replica"}`` (bytes None: unknown)."""
    what.check()
    state = _State.of(breakdown)
    unknown: Dict[str, str] = {}
    basis: List[Dict[str, Any]] = []
    traced_batch = trace.batch_size
    per_replica = math.ceil((what.batch or (traced_batch or 0) * what.replicas) / what.replicas) or None
    scale = None
    if traced_batch and per_replica:
        scale = per_replica / traced_batch
    elif what.batch is not None or what.replicas > 1:
        unknown.update(dict.fromkeys(STEP_ONLY_CATEGORIES, "the trace does not say its batch size (or which of "
                                     "its buffers carry it): trace the step again with this tb_modelmem"))
    traced_size = _traced_compute_bytes(trace)
    size = POLICIES[what.policy] if what.policy else traced_size
    dtype_factor = size / traced_size
    projected_state = state.projected(what, basis, unknown)
    series = _step_series(trace, scale, dtype_factor, state, projected_state, basis, unknown)
    if trace.allocations == "none" or not trace.timeline.t_us:
        reason = trace.allocations_note or "the trace recorded no allocation events"
        return _unknown_peak(reason, basis, projected_state)
    totals = [sum(values[i] for values in series.values()) for i in range(len(trace.timeline.t_us))]
    peak_index = max(range(len(totals)), key=totals.__getitem__)
    traced_index = max(range(len(trace.timeline.bytes)), key=trace.timeline.bytes.__getitem__)
    by_category: Dict[str, Optional[int]] = {c: int(round(v[peak_index])) for c, v in series.items()}
    by_category.update(dict.fromkeys(unknown))  # what cannot be projected is unknown, never its traced figure
    peak = None if None in by_category.values() else int(round(totals[peak_index]))
    return {"peak_bytes": peak, "by_category": by_category, "basis": basis, "unknown": unknown,
            "peak_moved": peak_index != traced_index, "peak_time_us": trace.timeline.t_us[peak_index],
            "batch_per_replica": per_replica, "replicas": what.replicas,
            "traced": {"batch": traced_batch, "peak_bytes": trace.peak_bytes, "policy": _policy_name(traced_size),
                       "optimizer": state.optimizer}}


def largest_batch(trace: OpTrace, breakdown: Optional[Breakdown], what: WhatIf, budget_bytes: int,
                  most: int = 1 << 20) -> Optional[int]:
    """The largest global batch whose projected peak on each device fits ``budget_bytes`` (a multiple
    of ``replicas``), 0 if not even one sample per device does, None if the peak cannot be projected."""
    def fits(per_replica: int) -> Optional[bool]:
        peak = project(trace, breakdown, dataclasses.replace(what, batch=per_replica * what.replicas))["peak_bytes"]
        return None if peak is None else peak <= budget_bytes

    first = fits(1)
    if first is None:
        return None
    if not first:
        return 0
    low, high = 1, 2
    while high <= most and fits(high):
        low, high = high, high * 2
    high = min(high, most + 1)
    while high - low > 1:  # the peak grows with the batch: the last size that fits
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low * what.replicas


def parse_size(text: Union[int, str]) -> int:
    """Bytes of a size: an int, or text such as "16GiB", "512 MB", "2e9" (ValueError otherwise)."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        found = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-z]*)\s*", str(text).lower())
        if found is None or found.group(2) not in _UNITS:
            raise ValueError(f"not a size: {str(text)[:40]!r} (say 16GiB, 512MB or a number of bytes)")
        value = int(float(found.group(1)) * _UNITS[found.group(2)])
    if value <= 0:
        raise ValueError(f"a budget must be positive, got {str(text)[:40]!r}")
    return value


_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9, "t": 10**12,
          "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


# --- the state ----------------------------------------------------------------------------------

@dataclasses.dataclass
class _State:
    """The run's variables as the breakdown has them, by peak category."""

    bytes: Dict[str, int]
    trainable: List[roles.Weight]  # (name, shape, dtype) of each trainable weight, in the breakdown's order
    optimizer: str  # the traced optimizer's class ("" if the breakdown does not name one)
    known: bool

    @classmethod
    def of(cls, breakdown: Optional[Breakdown]) -> "_State":
        if breakdown is None:
            return cls(dict.fromkeys(RESIDENT_CATEGORIES, 0), [], "", False)
        columns = breakdown.variables.columns
        owned = set(breakdown.layers.column("name")) if len(breakdown.layers) else set()
        totals = dict.fromkeys(RESIDENT_CATEGORIES, 0)
        trainable: List[roles.Weight] = []
        for name, layer, shape, dtype, size, role in zip(columns["name"], columns["layer"], columns["shape"],
                                                         columns["dtype"], columns["bytes"], columns["role"]):
            if role == WEIGHT:
                totals[WEIGHTS_CATEGORY] += size
                trainable.append((name, shape, dtype))
            elif role == NON_TRAINABLE or (role == OTHER and layer in owned):
                totals[NON_TRAINABLE_CATEGORY] += size
            elif role == OPTIMIZER_SLOT:
                totals[OPTIMIZER_SLOTS_CATEGORY] += size
            else:
                totals[OTHER_STATE_CATEGORY] += size
        optimizer = (breakdown.optimizer or {}).get("class_name", "") if isinstance(breakdown.optimizer, dict) else ""
        return cls(totals, trainable, optimizer if isinstance(optimizer, str) else "", True)

    def projected(self, what: WhatIf, basis: List[Dict[str, Any]], unknown: Dict[str, str]) -> Dict[str, Optional[int]]:
        """The state's bytes on one device after the change, each with its line in ``basis``."""
        out: Dict[str, Optional[int]] = dict(self.bytes)
        if not self.known:
            for category in RESIDENT_CATEGORIES:
                out[category] = None
                unknown[category] = "no variable breakdown in this run: record one (summary.variables) to project it"
            return out
        for category in (WEIGHTS_CATEGORY, NON_TRAINABLE_CATEGORY):
            basis.append(_line(category, self.bytes[category], self.bytes[category], "measured",
                               "the run's variables (kept float32 under every Keras policy)"))
        wrapper = "LossScaleOptimizer" if what.policy == "mixed_float16" else ""
        if what.optimizer is None and not wrapper:
            for category in (OPTIMIZER_SLOTS_CATEGORY, OTHER_STATE_CATEGORY):
                basis.append(_line(category, self.bytes[category], self.bytes[category], "measured",
                                   f"the run's {self.optimizer or 'optimizer'} variables"))
            return out
        name = what.optimizer or self.optimizer
        try:
            cls, flags = _optimizer_class(name)
        except ValueError as e:
            for category in (OPTIMIZER_SLOTS_CATEGORY, OTHER_STATE_CATEGORY):
                out[category] = None
                unknown[category] = f"{e}: its slots are not known"
            return out
        made = roles.keras_optimizer_variables(cls, self.trainable, flags, wrapper)
        slots = sum(_bytes(shape, dtype) for role, _, shape, dtype in made if role == OPTIMIZER_SLOT)
        counters = [name for role, name, _, _ in made if role == OTHER]
        state = len(counters)
        other = sum(_STATE_BYTES.get(name, _SCALAR_BYTES) for name in counters)
        out[OPTIMIZER_SLOTS_CATEGORY], out[OTHER_STATE_CATEGORY] = slots, other
        label = f"{cls}{'(' + ', '.join(flags) + ')' if flags else ''}" + (f" in {wrapper}" if wrapper else "")
        per_weight = slots / self.bytes[WEIGHTS_CATEGORY] if self.bytes[WEIGHTS_CATEGORY] else 0
        basis.append(_line(OPTIMIZER_SLOTS_CATEGORY, self.bytes[OPTIMIZER_SLOTS_CATEGORY], slots, "computed",
                           f"{label}'s build() on the {len(self.trainable)} trainable weights: {per_weight:g}x "
                           f"their {_mib(self.bytes[WEIGHTS_CATEGORY])}"))
        basis.append(_line(OTHER_STATE_CATEGORY, self.bytes[OTHER_STATE_CATEGORY], other, "computed",
                           f"{state} counters and rates of {label} ({', '.join(counters)}; int64 counters, float32 "
                           "rates: TensorFlow's dtypes)"))
        return out


# --- the step -----------------------------------------------------------------------------------

def _step_series(trace: OpTrace, scale: Optional[float], dtype_factor: float, state: _State,
                 projected_state: Dict[str, Optional[int]], basis: List[Dict[str, Any]],
                 unknown: Dict[str, str]) -> Dict[str, List[float]]:
    """Each category's projected bytes at every timeline point (the state constant at its projection)."""
    timeline = trace.timeline
    n = len(timeline.t_us)
    in_window = {c: timeline.by_category.get(c, [0.0] * n) for c in STEP_CATEGORIES + (BEFORE_WINDOW,)}
    batch = {c: timeline.batch_by_category.get(c, [0.0] * n) for c in in_window}
    traced_index = max(range(n), key=timeline.bytes.__getitem__) if n else 0
    series: Dict[str, List[float]] = {}
    state_traced = sum(state.bytes.values())
    slot_ratio = _slot_ratio(state, projected_state)
    for category in STEP_ONLY_CATEGORIES:
        factor = (scale if scale is not None else 1.0) * (dtype_factor if category in _COMPUTED else 1.0)
        fixed_factor = slot_ratio if category == OPTIMIZER_TEMPORARIES else 1.0
        values, scaled = in_window[category], batch[category]
        series[category] = [(v - s) * fixed_factor + s * factor for v, s in zip(values, scaled)]
        if n:
            at, carries = values[traced_index], scaled[traced_index]
            formula = (f"{_mib(carries)} carry the batch x {factor:.3g}" if carries else "none carries the batch")
            formula += f"; {_mib(at - carries)} do not" + (f", x {fixed_factor:.3g} (slots)" if fixed_factor != 1.0
                                                              else ", kept")
            basis.append(_line(category, at, series[category][traced_index],
                               "scaled" if carries or fixed_factor != 1.0 else "kept", formula))
    # What the allocator held besides the step's buffers: the state, and what else was resident.
    counted = [sum(in_window[c][i] for c in STEP_CATEGORIES) for i in range(n)]
    resident = ([max(timeline.bytes[i] - counted[i], 0.0) for i in range(n)] if trace.counts_resident
                else [0.0] * n)
    in_window_state = {c: in_window[c] for c in (WEIGHTS_CATEGORY, OPTIMIZER_SLOTS_CATEGORY)}
    rest = [max(resident[i] - (state_traced if state.known else 0.0), 0.0) for i in range(n)]
    series[UNATTRIBUTED] = rest
    for category in RESIDENT_CATEGORIES:
        value = projected_state.get(category)
        made = in_window_state.get(category, [0.0] * n)
        series[category] = [float(value or 0) + made[i] for i in range(n)]
    if not state.known and trace.counts_resident:
        series[UNATTRIBUTED] = resident  # the state is in there, not split
    if n:
        basis.append(_line(UNATTRIBUTED, rest[traced_index], rest[traced_index], "kept",
                           "in use before the step, and not one of the run's variables"))
    return series


def _slot_ratio(state: _State, projected: Dict[str, Optional[int]]) -> float:
    """How an update's scratch grows with the optimizer's state: it reads each weight and its slots."""
    before = state.bytes[WEIGHTS_CATEGORY] + state.bytes[OPTIMIZER_SLOTS_CATEGORY]
    after = state.bytes[WEIGHTS_CATEGORY] + (projected.get(OPTIMIZER_SLOTS_CATEGORY) or 0)
    return after / before if before else 1.0


def _traced_compute_bytes(trace: OpTrace) -> int:
    """Bytes of an activation's element in the traced step (float32 unless its activations say otherwise)."""
    buffers = trace.peak_buffers
    dtypes = {dtype for dtype, category in zip(buffers.column("dtype"), buffers.column("category"))
              if category == ACTIVATIONS and dtype}
    for half in ("float16", "bfloat16"):
        if half in dtypes and "float32" not in dtypes:
            return 2
    return 4


def _policy_name(size: int) -> str:
    return "float32" if size == 4 else "mixed (16-bit activations)"


def _optimizer_class(name: str) -> Tuple[str, Tuple[str, ...]]:
    """(Keras class, flags) of an optimizer name: a class ("Adam", "adamw"), or "momentum" (SGD with it)."""
    if name.lower() == "momentum":
        return "SGD", ("momentum",)
    known = {cls.lower(): cls for cls in roles.optimizer_classes()}
    cls = known.get(name.lower().replace("_", ""))
    if cls is None:
        raise ValueError(f"no built-in Keras optimizer {name!r} (known: momentum, {', '.join(sorted(known.values()))})")
    return cls, ()


def _bytes(shape: Sequence[int], dtype: Optional[str]) -> int:
    return math.prod(shape) * _DTYPE_BYTES.get(dtype or "float32", _SCALAR_BYTES)


def _line(category: str, traced: float, projected: Optional[float], how: str, formula: str) -> Dict[str, Any]:
    return {"category": category, "traced_bytes": int(round(traced)),
            "projected_bytes": None if projected is None else int(round(projected)), "how": how, "formula": formula}


def _mib(size: float) -> str:
    return f"{size / 2**20:.2f} MiB"


def _unknown_peak(reason: str, basis: List[Dict[str, Any]], state: Dict[str, Optional[int]]) -> Dict[str, Any]:
    by_category: Dict[str, Optional[int]] = {c: None for c in STEP_ONLY_CATEGORIES + (UNATTRIBUTED,)}
    by_category.update(state)
    return {"peak_bytes": None, "by_category": by_category, "basis": basis,
            "unknown": {c: reason for c in STEP_ONLY_CATEGORIES + (UNATTRIBUTED,)}, "peak_moved": False,
            "peak_time_us": None, "batch_per_replica": None, "replicas": 1, "traced": {}}


