"""Every byte in use at a traced step's peak, by category, and the same over the step's timeline: the
one rule for the split that the Ops and Timeline answers show and What-if starts from. No TF.

The resident state (the run's variables on the traced device) is ``resident_state``; the split of the
peak (``peak_by_category``), what a part of it is in words (``peak_notes``) and the resident bands at
every timeline point (``stacks``) all read it.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from tb_modelmem.rules import devices, roles
from tb_modelmem.rules.join import Vocabulary, makes_a_variable
from tb_modelmem.schema.names import (
    BEFORE_TRACE_CATEGORIES,
    BEFORE_WINDOW,
    EARLIER_STEPS_CATEGORY,
    HELD_CATEGORY,
    MOVED_STATE,
    OPTIMIZER,
    OPTIMIZER_SLOT,
    OPTIMIZER_SLOTS_CATEGORY,
    OTHER_STATE_CATEGORY,
    PEAK_CATEGORIES,
    PLACED_BY_RANGES,
    RESIDENT_CATEGORIES,
    STEP_CATEGORIES,
    STEP_ONLY_CATEGORIES,
    TORCH_BREAKDOWN_SOURCES,
    TORCH_PROFILER_SOURCE,
    UNATTRIBUTED_CATEGORY,
    WEIGHTS_CATEGORY,
)
from tb_modelmem.schema.records import Breakdown, OpTrace

# A PyTorch breakdown that names no optimizer: a weights-only file (safetensors, a model's state_dict alone), or a
# profile given none. Its state is not 0: it is not in the file.
NO_OPTIMIZER = ("the run's breakdown holds no optimizer (a weights-only file, such as a safetensors one or a "
                "model's state_dict alone): its state is not known; save the optimizer's state_dict beside it "
                "(torch.save({'model': ..., 'optimizer': optimizer.state_dict()})), or ask for an optimizer")
# A step whose update ran in no torch.optim step as the trace records them (torch.optim opens an ``Optimizer.step#``
# range for every one): updated by hand, as pytorch/examples' word_language_model does, or by a step that records
# no range; whatever state such an update keeps, no record has.
BY_HAND = ("the trace records no torch.optim step (no Optimizer.step range) and the run's breakdown names no "
           "optimizer: the parameters look updated by hand (or by a step that records no range), and the state that "
           "update keeps is not known (none for plain SGD, p.data.add_(p.grad, alpha=-lr)); ask for an optimizer to "
           "see one's")


def is_torch_run(trace: OpTrace, breakdown: Optional[Breakdown]) -> bool:
    """A PyTorch training run (``torch.optim``, autocast): its breakdown says so where there is one (Keras 3 on
    the torch backend writes a torch trace and a Keras breakdown), else its trace (a torch profiler's or
    snapshot's)."""
    if breakdown is not None:
        return breakdown.source in TORCH_BREAKDOWN_SOURCES
    return trace.source in PLACED_BY_RANGES


def state_not_held(trace: OpTrace, breakdown: Optional[Breakdown]) -> Dict[str, str]:
    """The resident categories a run's breakdown cannot give, with the reason: a PyTorch breakdown that names
    no optimizer and holds no slot, of a step that ran one (ops in its optimizer phase: an inference step's
    state is its weights), leaves the optimizer's state unknown, never 0 (a Keras or JAX breakdown holds the
    optimizer its writer was given; a JAX program's parameters count the rest, unattributed)."""
    if breakdown is None or not is_torch_run(trace, breakdown) or breakdown.optimizer:
        return {}
    if OPTIMIZER not in trace.ops.column("phase"):
        return {}
    if OPTIMIZER_SLOT in breakdown.variables.column("role"):
        return {}
    by_hand = trace.source == TORCH_PROFILER_SOURCE and not trace.optimizer_classes
    return dict.fromkeys((OPTIMIZER_SLOTS_CATEGORY, OTHER_STATE_CATEGORY), BY_HAND if by_hand else NO_OPTIMIZER)


def resident_state(trace: OpTrace, breakdown: Optional[Breakdown],
                   owned: Optional[Mapping[str, str]] = None, whole: bool = False) -> Optional[Dict[str, int]]:
    """Bytes of the step's resident state on the traced device, by peak category: the breakdown's
    variables, else what the trace's program says its parameters hold (an XLA step's), else None
    (unknown). The variables count as the busiest device holds them (``rules.devices``: one copy of a
    mirrored variable, its piece of a sharded one): the trace's peak is one device's count
    (``allocator_replay.headline_allocators``; XLA's plan is each device's).
    ``owned``: the breakdown's ``Vocabulary.variable_layer``, when the caller has it already. ``whole``:
    every variable counted once at its global size instead (``rules.devices.logical_bytes``: what a
    sharding of the state divides)."""
    state: Iterable[Tuple[str, int, bool]]  # (role, bytes on one device, owned by a layer)
    if breakdown is not None:
        if owned is None:
            owned = Vocabulary.from_breakdown(breakdown).variable_layer
        columns = breakdown.variables.columns
        if whole:
            held = devices.logical_bytes(columns)
        else:
            held = devices.on_device(columns, devices.busiest(columns) if devices.spread(columns) else None)
        slot_of = columns.get("slot_of") or [""] * len(held)  # an optimizer's counter is no layer's own state
        state = ((role, size, bool(owned.get(name)) and not of) for name, role, size, of in zip(
            columns["name"], columns["role"], held, slot_of))
    elif trace.resident:
        state = ((role, size, False) for role, size in trace.resident.items())
    else:
        return None
    out = dict.fromkeys(RESIDENT_CATEGORIES, 0)
    for role, size, layer_state in state:
        out[roles.peak_category(role, layer_state)] += size
    return out


def no_allocations_reason(trace: OpTrace) -> str:
    """Why a trace with no allocation event says nothing of its peak: its reader's note (which allocator records
    none, and what to set), else that plain fact."""
    return trace.allocations_note or "the trace recorded no allocation events"


def peak_by_category(trace: OpTrace, state: Optional[Dict[str, int]],
                     not_held: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """Every byte in use at the peak in one category, summing to ``total``. Buffers allocated during the
    trace take their category from the op that allocated them. What was allocated before the window is the
    run's resident ``state`` (``resident_state``: its weights, non-trainable state and optimizer slots) as far
    as it goes, the rest split by what the trace saw of it (``before_the_trace``: earlier steps', held all
    through, unattributed). A TF2 profile's count includes that resident memory; RunMetadata counts only the
    step's own allocations, so the breakdown's bytes come on top of its peak. A profile of large allocations
    only (``_state_whole``) counts none of the small variables: the breakdown's are there whole, the total past
    the count where it must be. A part the data cannot give is None, with the reason in ``unknown``:
    ``not_held`` (``state_not_held``) names the state the breakdown does not hold (the total: what is known)."""
    if trace.allocations == "none":  # no allocator event: nothing about the peak is known
        reason = no_allocations_reason(trace)
        return {**{c: None for c in PEAK_CATEGORIES}, "total": None, "step_peak_bytes": None,
                "unknown": {c: reason for c in PEAK_CATEGORIES}}
    step = {c: 0 for c in STEP_CATEGORIES}
    seen = 0
    for size, category in zip(trace.peak_buffers.column("bytes"), trace.peak_buffers.column("category")):
        if category in step:
            step[category] += size
            seen += size
    parts: Dict[str, Any] = {c: 0 for c in PEAK_CATEGORIES}
    for category in STEP_ONLY_CATEGORIES:
        parts[category] = step[category]
    unknown: Dict[str, str] = {}
    resident_parts = state
    in_window_state = {c: step[c] for c in (WEIGHTS_CATEGORY, OPTIMIZER_SLOTS_CATEGORY)}
    if trace.counts_resident:
        # The buffers live at the peak can add up past the allocator's own count only when a profile's
        # events are inconsistent (sizes missing, an allocator not counted): then they are the floor.
        total = max(trace.peak_bytes, seen)
        resident = total - seen
        if resident_parts is None:
            for category in RESIDENT_CATEGORIES:
                parts[category] = None
                unknown[category] = "no variable breakdown in this run: record one to split the resident memory"
            parts.update({k: v for k, v in in_window_state.items() if v})
            parts[UNATTRIBUTED_CATEGORY] = resident
        elif _state_whole(trace):
            # The allocator's count misses the small variables (TensorFlow's default CPU allocator):
            # the breakdown's state is resident whole, on top of what the count says it holds.
            for category in RESIDENT_CATEGORIES:
                parts[category] = resident_parts[category] + in_window_state.get(category, 0)
            parts[UNATTRIBUTED_CATEGORY] = max(resident - sum(resident_parts.values()), 0)
            total = seen + sum(resident_parts.values()) + parts[UNATTRIBUTED_CATEGORY]
        else:
            left = resident
            for category in RESIDENT_CATEGORIES:
                share = min(resident_parts[category], left)
                parts[category] = share + in_window_state.get(category, 0)
                left -= share
            freed = sum(size for size, category in zip(trace.peak_buffers.column("bytes"),
                                                       trace.peak_buffers.column("category"))
                        if category == BEFORE_WINDOW)
            held = held_through(trace, sum(resident_parts.values()))
            at_peak = held[max(range(len(held)), key=trace.timeline.bytes.__getitem__)] if held else 0.0
            earlier, kept, _ = _split_left(left, freed, at_peak)
            earlier, kept = int(round(earlier)), int(round(kept))  # whole bytes, and the parts still sum to total
            parts.update(zip(BEFORE_TRACE_CATEGORIES, (earlier, kept, left - earlier - kept)))
    else:
        step_total = max(trace.peak_bytes, seen)
        parts[UNATTRIBUTED_CATEGORY] = step_total - seen
        if resident_parts is None:
            for category in RESIDENT_CATEGORIES:
                parts[category] = in_window_state.get(category) or None
                if not parts[category]:
                    unknown[category] = ("not in this trace (it counts only what the traced step allocated) "
                                         "and the run has no variable breakdown")
            total = step_total
        else:
            for category in RESIDENT_CATEGORIES:
                parts[category] = resident_parts[category] + in_window_state.get(category, 0)
            total = step_total + sum(resident_parts.values())
    if state is not None:
        _not_held(parts, unknown, not_held or {}, trace.counts_resident)
    parts["total"] = total
    parts["unknown"] = unknown
    parts["step_peak_bytes"] = trace.peak_bytes if not trace.counts_resident else None
    return parts

def _not_held(parts: Dict[str, Any], unknown: Dict[str, str], not_held: Mapping[str, str], counted: bool) -> None:
    """The state the breakdown does not hold (``state_not_held``), none made in the window: unknown, not 0."""
    for category, reason in not_held.items():
        if not parts[category]:
            parts[category] = None
            unknown[category] = reason + ("; in use before the trace, counted with what was held then" if counted
                                          else "")


WINDOW_NOTE = "window"  # peak_notes' key for what the trace's window holds


def peak_notes(trace: OpTrace, state: Optional[Dict[str, int]], peak: Dict[str, Any]) -> Dict[str, str]:
    """What a part of the peak is, in words, where its category alone does not say: ``{category: text}``
    (the answers' ``peak_notes``, beside ``peak_by_category``)."""
    notes = {}
    made = [name for name in trace.ops.column("name") if makes_a_variable(name)]
    if made:
        notes[WINDOW_NOTE] = (
            f"This trace ran {len(made):,} variable initializer{'s' if len(made) > 1 else ''} ({made[0]}"
            f"{', ...' if len(made) > 1 else ''}): it holds a step that made state, an optimizer's first step "
            "(its slots are made then, and a variable first written is copied). State made inside the trace is "
            "counted with the step's own buffers, not as weights and slots, and the peak may be that step's, "
            "not the steady one's. Profile a later step for that (MemoryCallback(profile_steps=(3, 3)))")
    if trace.counts_resident and state is not None:
        if peak.get(HELD_CATEGORY):
            notes[HELD_CATEGORY] = _held_before(trace, f"{peak[HELD_CATEGORY]:,} B allocated before the trace "
                                                "and in use all through it", sum(state.values()))
        if peak.get(EARLIER_STEPS_CATEGORY):
            notes[EARLIER_STEPS_CATEGORY] = (
                f"{peak[EARLIER_STEPS_CATEGORY]:,} B allocated before the trace and freed during it: what earlier "
                "steps left for this one (their last buffers, a batch fetched ahead of its step); the trace saw "
                "them freed, not made. Profile one step earlier to see which ops made them")
        if peak.get(UNATTRIBUTED_CATEGORY):
            notes[UNATTRIBUTED_CATEGORY] = (
                f"{peak[UNATTRIBUTED_CATEGORY]:,} B in use at the peak that no allocation in the trace names, "
                "beyond what was held all through it" if _splits_before(trace) else
                _held_before(trace, f"{peak[UNATTRIBUTED_CATEGORY]:,} B in use at the peak that no allocation in the "
                             "trace names: held since before it", sum(state.values())))
    return notes


def handed_out(buffers: Any) -> Optional[Dict[str, int]]:
    """Of the buffers at the peak whose request the profile recorded: what they asked for, what the
    allocator handed out for them (its bins' rounding, chunks it did not split), and how many; None
    when it recorded no request."""
    pairs = [(b, r) for b, r in zip(buffers.column("bytes"), buffers.column("requested_bytes")) if r is not None]
    if not pairs:
        return None
    return {"buffers": len(pairs), "requested_bytes": sum(r for _, r in pairs), "bytes": sum(b for b, _ in pairs)}


def _held_before(trace: OpTrace, lead: str, state: int) -> str:
    """Why a profile's count holds bytes no allocation in it made (``lead``: how many, and what is known of
    them), with the figures it has: they were allocated before the window, past the variables' own sizes."""
    counted = [a for a in trace.allocators or () if a.get("counted", True) and a.get("min_bytes") is not None]
    low = sum(int(a["min_bytes"]) for a in counted)
    given = handed_out(trace.peak_buffers)
    asked, handed = (given["requested_bytes"], given["bytes"]) if given else (0, 0)
    text = lead + ", beyond the run's variables"
    if counted:
        text += f" ({state:,} B; the allocator never held less than {low:,} B during the trace)"
    extra = 100 * (handed - asked) / asked if asked else 0.0
    share = "under 1%" if 0 < extra < 1 else f"{extra:.0f}%"
    more = f" (it handed this trace's buffers {share} more than they asked)" if asked else ""
    return (text + ": the chunks the allocator handed the variables beyond their own size" + more
            + ", and buffers the runtime keeps between steps (an input pipeline's)")


def _state_whole(trace: OpTrace) -> bool:
    """Whether the resident state counts whole, whatever the allocator's count: a profile that
    recorded only large allocations (TensorFlow's default CPU allocator) counts no small variable,
    so its count is no bound on the variables a breakdown says are there (they never change)."""
    return trace.counts_resident and trace.allocations == "large"


def stacks(trace: OpTrace, peak: Dict[str, Any]) -> Dict[str, List[float]]:
    """Each category's bytes in use at every timeline point; they add up to the point's total
    (RunMetadata: the step's bytes plus the breakdown's, constant). Where only large allocations
    were recorded, the variables are constant at the breakdown's bytes and the bands add up to
    at least the allocator's count (``_state_whole``)."""
    t = trace.timeline
    n = len(t.t_us)
    by_category: Dict[str, List[float]] = {}
    if peak["total"] is None:
        return by_category
    in_window = {c: t.by_category.get(c, [0.0] * n) for c in STEP_CATEGORIES}
    constants = {c: float(peak[c] or 0) for c in RESIDENT_CATEGORIES}
    for c in (WEIGHTS_CATEGORY, OPTIMIZER_SLOTS_CATEGORY):
        constants[c] = max(constants[c] - (in_window[c][-1] if n else 0.0), 0.0)  # in-window part varies below
    rest = []
    whole = _state_whole(trace) and not set(RESIDENT_CATEGORIES) & set(peak["unknown"])
    beyond = beyond_the_step(trace)
    split = _splits_before(trace) and not set(RESIDENT_CATEGORIES) & set(peak["unknown"])
    before = before_the_trace(trace, sum(constants.values()), beyond=beyond) if split else {}
    for i in range(n):
        if whole:  # the state is resident whole (``peak_by_category``): constant, past the allocator's count
            for c in RESIDENT_CATEGORIES:
                by_category.setdefault(c, []).append(constants[c] + (in_window[c][i] if c in in_window else 0.0))
            rest.append(max(beyond[i] - sum(constants.values()), 0.0))
        elif trace.counts_resident:
            left = beyond[i]
            for c in RESIDENT_CATEGORIES:
                share = min(constants[c], left)
                by_category.setdefault(c, []).append(share + (in_window[c][i] if c in in_window else 0.0))
                left -= share
            for c in (EARLIER_STEPS_CATEGORY, HELD_CATEGORY) if before else ():  # left is the state's rest here too
                by_category.setdefault(c, []).append(before[c][i])
            rest.append(before[UNATTRIBUTED_CATEGORY][i] if before else left)
        else:
            for c in RESIDENT_CATEGORIES:
                by_category.setdefault(c, []).append(constants[c] + (in_window[c][i] if c in in_window else 0.0))
            rest.append(beyond[i])
    for c in STEP_ONLY_CATEGORIES:
        by_category[c] = list(in_window[c])
    by_category[UNATTRIBUTED_CATEGORY] = rest
    return {c: v for c, v in by_category.items() if any(v)}


def before_the_trace(trace: OpTrace, state_total: float, state_known: bool = True,
                     beyond: Optional[List[float]] = None) -> Dict[str, List[float]]:
    """Each timeline point's bytes in the count beyond the step's own buffers and the variables
    (``state_total``), by ``BEFORE_TRACE_CATEGORIES``: buffers allocated before the trace that it frees (an
    earlier step's), what stays in use all through it (``held_through``), and the rest, unattributed. Where
    the count misses small buffers (``_state_whole``) or the state is not known, all of it is unattributed.
    What-if starts from these; ``beyond``: ``beyond_the_step``'s, when the caller has it."""
    beyond = beyond if beyond is not None else beyond_the_step(trace)
    rest = [max(b - state_total, 0.0) for b in beyond]
    if not state_known or not _splits_before(trace):
        return {UNATTRIBUTED_CATEGORY: rest}
    freed = trace.timeline.by_category.get(BEFORE_WINDOW) or [0.0] * len(rest)
    parts = [_split_left(r, f, h) for r, f, h in zip(rest, freed, held_through(trace, state_total, beyond))]
    return {category: [p[i] for p in parts] for i, category in enumerate(BEFORE_TRACE_CATEGORIES)}


def held_through(trace: OpTrace, state_total: float, beyond: Optional[List[float]] = None) -> List[float]:
    """At each point, the bytes the count holds beyond the variables, the step's own buffers and what earlier
    steps left for it to free: allocated before the trace and never freed in it. On BFC these are the chunks
    it handed the variables past their size (it rounds, and leaves a chunk under twice the request unsplit:
    seed 002's LeNet, 7,971,376 B on its Adam slots and kernels, measured from the allocator's own events
    while they were made), and buffers the runtime keeps. Constant but where a variable moved to a copy
    with a chunk of another size (``allocator_replay._moves``: the Timeline's MOVED_STATE column)."""
    t = trace.timeline
    n = len(t.t_us)
    beyond = beyond if beyond is not None else beyond_the_step(trace)
    freed = t.by_category.get(BEFORE_WINDOW) or [0.0] * n
    moved = t.by_category.get(MOVED_STATE) or [0.0] * n
    base = max(min((b - state_total - f - m for b, f, m in zip(beyond, freed, moved)), default=0.0), 0.0)
    return [max(base + m, 0.0) for m in moved]


def _split_left(left: float, freed: float, held: float) -> Tuple[float, float, float]:
    """``left`` (beyond the state at one moment) as (earlier steps', held all through, unattributed)."""
    earlier = min(freed, left)
    kept = min(held, left - earlier)
    return earlier, kept, left - earlier - kept


def _splits_before(trace: OpTrace) -> bool:
    """Whether the count holds memory from before the trace, every allocation of it counted: only then is
    what stays in use all through the trace a figure (``held_through``)."""
    return trace.counts_resident and not _state_whole(trace)


def beyond_the_step(trace: OpTrace) -> List[float]:
    """Each timeline point's bytes in the count beyond the step's own categorised buffers: what was
    resident where the count holds the state (``counts_resident``), else the step's uncategorised
    bytes. The timeline's bands (``stacks``) and What-if's replay (``rules.projection``) both start here."""
    t = trace.timeline
    n = len(t.t_us)
    in_window = [t.by_category.get(c, [0.0] * n) for c in STEP_CATEGORIES]
    return [max(t.bytes[i] - sum(v[i] for v in in_window), 0.0) for i in range(n)]
