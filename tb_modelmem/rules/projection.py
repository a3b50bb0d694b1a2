"""What a traced step's memory would be at another batch size, sequence length, optimizer, precision or
replica count, projected from what the trace measured. No TF.

From the trace: bytes in use over the step by category, and the part of each held by buffers that
carry the batch dimension (``Timeline.batch_by_category``). From the run's breakdown: every variable's
role, shape and dtype. The state is recomputed (the weights, and the slots the asked optimizer's
``build()`` makes for them: ``roles.keras_optimizer_variables``); the step's batch-carrying bytes are
scaled to the asked batch, the rest kept; the projected peak is the maximum over the replayed timeline,
so a peak that moves to another moment is found, not assumed. Each figure says how it was made
(measured, scaled, computed, kept) and what the data cannot give is unknown, with the reason.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import re
from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union

from tb_modelmem.rules import caching_allocator, torch_optimizers
from tb_modelmem.rules.buffers import KEEPS_WIDTH, LOSS_COPY, carried, forward_bytes_by_width, mixed_step
from tb_modelmem.rules.join import phase_by_name
from tb_modelmem.rules.peak import before_the_trace, no_allocations_reason
from tb_modelmem.rules.projection_state import (
    MOST_ASKED,
    POLICIES,
    ParamGroups,
    State,
    WhatIf,
    basis_line,
    optimizer_class,
    optimizer_label_of,
    size_text,
    state_sizes,
    tensor_bytes,
)
from tb_modelmem.schema.dtypes import item_bytes
from tb_modelmem.schema.names import (
    ACTIVATIONS_CATEGORY,
    BEFORE_TRACE_CATEGORIES,
    BEFORE_WINDOW,
    CHUNKING_CATEGORY,
    EARLIER_STEPS_CATEGORY,
    GRADIENTS_CATEGORY,
    HELD_CATEGORY,
    INPUTS_CATEGORY,
    NON_TRAINABLE,
    OPTIMIZER,
    OPTIMIZER_SLOT,
    OPTIMIZER_SLOTS_CATEGORY,
    OPTIMIZER_TEMPORARIES_CATEGORY,
    PLACED_BY_RANGES,
    PLANNED_OUTPUTS,
    RESIDENT_CATEGORIES,
    STEP_CATEGORIES,
    STEP_ONLY_CATEGORIES,
    TEMPORARIES_CATEGORY,
    TORCH_PROFILER_SOURCE,
    UNATTRIBUTED_CATEGORY,
    WEIGHT,
    WEIGHTS_CATEGORY,
)
from tb_modelmem.schema.records import Breakdown, OpTrace

# Categories whose batch-carrying buffers are values in the compute dtype (inputs keep the data's).
_COMPUTED = (ACTIVATIONS_CATEGORY, GRADIENTS_CATEGORY, TEMPORARIES_CATEGORY)
# An optimizer whose update assigns each slot a new tensor (Keras' SGD with momentum: ``self.assign(m, ...)``):
# TensorFlow's AssignVariableOp keeps that tensor's buffer, so the slots move each step. Measured on BFC: what
# AdamW's or Adam's trace held past the variables' sizes (7.6-16 MiB on the causal LM, 4.4 MiB on LeNet) is
# 0 B in every momentum run (causal LM 5 of 5, LeNet 1 of 1); plain SGD (assign_sub in place) keeps it.
_REASSIGNS_SLOTS = ("SGD", ("momentum",))
# how an asked optimizer's update holds memory unlike the traced one's (``_asked_update``)
_REASSIGNS, _IN_PLACE, _NO_SCRATCH_TRACED = "reassigns", "in place", "no scratch traced"
# A basis line's ``how`` for a category not scaled whose figure is another moment's than the traced peak's (the
# projected peak moved): what the trace held then, not what it held at its own peak ("kept")
_MOVED = "moved"
_MOST_CHUNK_SLACK = 128 << 20  # BFC splits a free chunk this much larger than a request (its default)
_SAYS_SEQUENCE = frozenset({TORCH_PROFILER_SOURCE, "xspace"})  # the readers that record a step's length
# What the cautious largest batch keeps within a budget too, by ``budget_answer``'s "cautious_by"
CAUTIOUS_WORDS = {"band": "the allocator band's high end", "reserved": "what the caching allocator reserves"}
_TF_EXECUTOR = ("xspace", "run_metadata", "memory_profile")  # traces of TensorFlow (an XLA step's: ``xla``)
# Why another precision is not projected, by what ran the step (``precision_unknown``): measured, not guessed.
# PyTorch: autocast picks each op's dtype (matrix products 16-bit, reductions and losses float32, the rest as
# their inputs) and caches 16-bit copies of the weights, which a float32 trace does not show
# (tests/integration/test_projection_torch.py). XLA: another precision is another program, whose buffers its
# compiler picks anew (tests/integration/test_flax.py). Keras 3 on torch: Keras' policy casts each layer, and
# torch's kernels make their own scratch for 16-bit work (tests/integration/test_keras_backends.py).
_PRECISION_UNKNOWN = {
    "torch": ("another precision under torch.autocast is not projected from this trace: autocast keeps part of "
              "the step float32 and adds 16-bit copies of the weights (a Trainer GPT-2 under bf16 peaked 0.77x its "
              "float32 step, where halving its activations reads 0.50x); trace the step under autocast to see it",
              "as traced (autocast sets it)"),
    "xla": ("another precision is not projected from an XLA step: XLA compiles another program for it, whose "
            "buffers its compiler picks anew (on a CPU, a flax CNN's bfloat16 step planned 0.87x its float32 "
            "peak, where halving its activations reads 0.54x, and a Keras-on-JAX LM's 1.18x); compile and trace the "
            "step under that precision to see it",
            "as traced (XLA compiles it)"),
    "keras_torch": ("another precision is not projected from a step torch ran: Keras casts each layer's inputs, "
                    "and torch's kernels make their own scratch for 16-bit work (Keras 3 on torch, a convnet's "
                    "mixed_bfloat16 step on a CPU counted 1.04x its float32 step, where halving its activations "
                    "reads 0.51x); trace the step under that policy to see it",
                    "as traced (torch's kernels decide)"),
}


def precision_unknown(trace: OpTrace, torch: bool) -> Optional[Tuple[str, str]]:
    """(Why another precision is not projected for this step, the policy menu's face) where it is not: a
    PyTorch step's (autocast), an XLA program's, Keras 3 on torch's; None where a Keras policy is projected
    (TensorFlow's executor: measured in docs/WHAT_IF.md)."""
    if torch:
        return _PRECISION_UNKNOWN["torch"]
    if trace.xla:
        return _PRECISION_UNKNOWN["xla"]
    return _PRECISION_UNKNOWN["keras_torch"] if trace.source in PLACED_BY_RANGES else None


def project(trace: OpTrace, breakdown: Optional[Breakdown], what: WhatIf, reserved: bool = True) -> Dict[str, Any]:
    """The projected peak of one device: ``{"peak_bytes", "by_category", "basis": [lines], "unknown": {category:
    reason}, "steps", "band", "peak_moved", "peak_time_us", "batch_per_replica", "replicas", "devices", "shard",
    "seq", "caveat", "reserved" (None unless ``reserved``), "traced"}`` (None: unknown; ``_unknown_peak``'s too)."""
    what.check()
    state = State.of(breakdown, trace)
    unknown: Dict[str, str] = {}
    unsplit: List[str] = []  # categories unknown apart, their bytes counted whole in "unattributed"
    basis: List[Dict[str, Any]] = []
    traced_batch = trace.batch_size
    per_replica = math.ceil((what.batch or (traced_batch or 0) * what.replicas) / what.replicas) or None
    traced_size = _traced_compute_bytes(trace)
    dtype_factor = (POLICIES[what.policy] if what.policy else traced_size) / traced_size
    scale = per_replica / traced_batch if traced_batch and per_replica else None
    seq_ratio, seq_unknown = _sequence_ratio(trace, breakdown, what)
    changes_step = what.batch is not None or what.replicas > 1 or dtype_factor != 1.0 or seq_ratio != 1.0
    no_events_reason = (no_allocations_reason(trace) if trace.allocations == "none" or not trace.timeline.t_us
                        else None)  # the root cause, said first
    why_not = no_events_reason or seq_unknown or _step_unknown(trace, state, changes_step, dtype_factor != 1.0,
                                                               scale is not None)
    if why_not:
        unknown.update(dict.fromkeys(STEP_ONLY_CATEGORIES, why_not))
    projected_state = state.projected(what, basis, unknown, unsplit)
    table_growth = (state.grow_tables(breakdown, trace.position_tables, what, projected_state, basis)
                    if seq_ratio > 1.0 and not seq_unknown else {})
    if what.shard is not None and state.source:
        state.sharded(projected_state, what, basis)
    if OPTIMIZER_SLOTS_CATEGORY in unknown and OPTIMIZER_SLOTS_CATEGORY not in unsplit:
        unknown.setdefault(OPTIMIZER_TEMPORARIES_CATEGORY,
                           "an update's scratch grows with the optimizer's slots, unknown here")
    if no_events_reason:
        return _unknown_peak(no_events_reason, basis, projected_state, unknown, what)
    update = _asked_update(trace, state, what)
    scratch = _torch_scratch(state, what, update)
    if update.kind == _NO_SCRATCH_TRACED and not (scratch and update.moments):
        unknown.setdefault(OPTIMIZER_TEMPORARIES_CATEGORY, _no_scratch_traced(state, update, scratch is not None))
    step = _Step(trace, scale or 1.0, dtype_factor, state, projected_state, update,
                 1 / what.replicas if what.shard in ("gradients", "weights") else 1.0, seq_ratio,
                 _ddp_buckets(trace, state, projected_state, what, unknown), scratch, table_growth)
    series = step.series
    totals = [sum(values[i] for values in series.values()) for i in range(len(trace.timeline.t_us))]
    peak_index = max(range(len(totals)), key=totals.__getitem__)
    traced_index = step.traced_index
    step.explain(peak_index, basis)  # each figure's basis taken at the moment its projected figure is
    by_category: Dict[str, Optional[int]] = {c: int(round(v[peak_index])) for c, v in series.items()}
    by_category.update(dict.fromkeys(unknown))  # what cannot be projected is unknown, never its traced figure
    for line in basis:  # and its basis says so, with why, rather than the arithmetic of a figure not shown
        if line["category"] in unknown and line["category"] not in unsplit:
            line.update(projected_bytes=None, how="unknown", formula=unknown[line["category"]])
    peak = None if set(unknown) - set(unsplit) else int(round(totals[peak_index]))
    steps = _each_step(trace.timeline, totals) if peak is not None else []
    # the band is the traced peak's buffers': where the figure is another moment's, it does not say
    band = (_chunk_band(trace, breakdown, peak, step)
            if peak is not None and peak_index == traced_index else None)
    # another setting's chunks are not in the trace: the band's middle
    middle = (band["low_bytes"] + band["high_bytes"]) // 2 if band is not None and step.changes else None
    synced = _gradient_sync(trace, state, what, by_category, unknown)
    if synced is not None and peak is not None and sum(synced.values()) > (peak if middle is None else middle):
        peak, peak_index = sum(synced.values()), _gradients_high(trace)
        _at_the_all_reduce(synced, what, state, by_category, basis)  # a moment the rule makes, not the trace's:
        steps, band = [], None  # not one of the traced steps' own, and no line's traced bytes then are known
    elif middle is not None and peak is not None:
        # every axis asked grows (no less batch, sequence or width, the state as traced): nothing can need less
        grows = ((scale or 1.0) >= 1.0 and seq_ratio >= 1.0 and dtype_factor >= 1.0 and what.replicas == 1
                 and not step.changes_state)
        peak, steps = _at_the_band(peak, middle, _traced_peak(trace, state) if grows else None, steps,
                                   by_category, basis)
    return {"peak_bytes": peak, "by_category": by_category, "basis": basis, "unknown": unknown, "steps": steps,
            "optimizer": optimizer_label_of(update.asked, update.flags, "") if update.asked else what.optimizer,
            "band": band, "peak_moved": peak_index != traced_index, "peak_time_us": trace.timeline.t_us[peak_index],
            "batch_per_replica": per_replica, "replicas": what.replicas, "devices": what.replicas,
            "shard": what.shard, "seq": what.seq or trace.sequence_length, "caveat": _caveat(trace),
            "reserved": _reserved(trace, breakdown, what, (scale, seq_ratio), unknown) if reserved else None,
            "traced": {"batch": traced_batch, "seq": trace.sequence_length, "peak_bytes": _traced_peak(trace, state),
                       "policy": _precision_name(trace, state, traced_size),
                       "optimizer": _traced_label(trace, state), "peak_time_us": trace.timeline.t_us[traced_index]}}


def _traced_label(trace: OpTrace, state: State) -> str:
    """The traced optimizer as the tab says it, a torch step's implementation with it where not one parameter
    at a time ("AdamW fused"); where no breakdown names one, the classes a torch trace's step ranges name."""
    named = trace.optimizer_classes
    if not state.optimizer[0] and not state.named and named:
        return f"{', '.join(named)} (named by the trace; {'its' if len(named) == 1 else 'their'} settings not recorded)"
    path = _traced_path(trace) if state.torch and state.optimizer[0] else torch_optimizers.FOR_LOOP
    return state.optimizer_label(path if path != torch_optimizers.FOR_LOOP else "")


def _each_step(timeline: Any, totals: List[float]) -> List[Dict[str, int]]:
    """Each traced step's own peak and what it projects to, where the trace holds two or more steps
    (``Timeline.step_starts_us``): one trace's steps differ as the executor orders their ops differently, and
    their spread is how far one projection from one of them can be trusted (``project`` moves each by the
    chunking row, where it has one). A point before the second step's start is the first step's."""
    starts = timeline.step_starts_us
    if len(starts) < 2 or not totals:
        return []
    peaks = [[0.0, 0.0] for _ in starts]
    for t, traced, projected in zip(timeline.t_us, timeline.bytes, totals):
        step = peaks[bisect.bisect_right(starts, t, 1) - 1]
        step[0], step[1] = max(step[0], traced), max(step[1], projected)
    return [{"traced_peak_bytes": int(round(traced)), "peak_bytes": int(round(projected))}
            for traced, projected in peaks if traced or projected]


def _chunk_band(trace: OpTrace, breakdown: Optional[Breakdown], peak: int, step: "_Step") -> Optional[Dict[str, Any]]:
    """How far a BFC allocator's chunking alone can move the projected peak: it hands a request a free chunk
    whole when the chunk is under twice the request and less than 128 MiB over it (it splits the others), so a
    buffer holds from its request to the lesser of twice it and 128 MiB more, and which it gets depends on what
    earlier steps left free: runs of one setting differ by it (the causal LM at batch 32: 418 and 528 MiB, its
    125 MiB logits handed almost twice that). Low: every step buffer at the traced peak handed just its request
    at the asked size, scaled as ``step`` scales it (what the traced chunks scaled count beyond that is
    ``slack_bytes``); high: its largest handed the most BFC would hand it (``most_bytes``). ``peak`` is the
    traced chunks scaled; at another size the figure is the band's middle (``_chunking``).
    ``{"low_bytes", "high_bytes", "slack_bytes", "op", "shape", "requested_bytes", "counted_bytes",
    "most_bytes", "copy"}`` (the largest's request, what the chunks scaled count for it, the most it may be handed;
    ``copy``: it is the loss's float32 copy of that buffer, under a mixed policy).
    None where no BFC allocator counted the trace, it recorded no request, or the step is XLA's (its program
    asks for its buffers in one allocation, which the trace splits by buffer)."""
    if trace.xla or not any("bfc" in str(a.get("name", "")).lower() and a.get("counted", True)
                            for a in trace.allocators or ()):
        return None
    buffers = trace.peak_buffers
    weights = frozenset(tuple(s) for s in breakdown.variables.column("shape")) if breakdown is not None else frozenset()
    rows = []  # (asked, counted, op, shape, whether it is the loss's float32 copy of it) at the asked size
    for requested, handed, op, shape, category, dtype, batch, seq, mixed in zip(
            buffers.column("requested_bytes"), buffers.column("bytes"), buffers.column("op"), buffers.column("shape"),
            buffers.column("category"), buffers.column("dtype"), buffers.column("batch"), buffers.column("seq"),
            buffers.column("mixed")):
        if not requested or category not in STEP_ONLY_CATEGORIES:
            continue
        carries, power = (batch, seq) if batch is not None else carried(  # an older trace: its shape says
            shape, trace.batch_size, weights, trace.sequence_length)
        factor, copy = step.buffer_factors(category, dtype, carries, power, mixed)
        if copy:
            rows.append((requested * copy, handed * copy, op, shape, True))
        rows.append((requested * factor, handed * factor, op, shape, False))
    if not rows:
        return None
    slack = sum(max(counted - asked, 0.0) for asked, counted, *_ in rows)
    asked, counted, op, shape, copy = max(rows, key=lambda row: row[0])
    most = asked + min(asked, _MOST_CHUNK_SLACK)
    return {"low_bytes": int(round(peak - slack)), "high_bytes": int(round(peak + max(most - counted, 0.0))),
            "slack_bytes": int(round(slack)), "op": op, "shape": shape, "requested_bytes": int(round(asked)),
            "counted_bytes": int(round(counted)), "most_bytes": int(round(most)), "copy": copy}


def _at_the_band(scaled: int, middle: int, floor: Optional[int], steps: List[Dict[str, int]],
                 by_category: Dict[str, Optional[int]],
                 basis: List[Dict[str, Any]]) -> Tuple[int, List[Dict[str, int]]]:
    """(The figure, each step's) at the band's ``middle`` rather than the traced chunks ``scaled``: each step
    moved alike, and where every axis asked grows (``floor``, the traced peak: not None) none below its own
    traced peak."""
    _chunking(scaled, middle, by_category, basis, floor or 0)
    figure = max(middle, floor or 0)
    return figure, [dict(s, peak_bytes=max(s["peak_bytes"] + figure - scaled,
                                           s["traced_peak_bytes"] if floor is not None else 0)) for s in steps]


def _chunking(scaled: int, middle: int, by_category: Dict[str, Optional[int]], basis: List[Dict[str, Any]],
              floor: int = 0) -> None:
    """The figure where the asked setting changes it: the allocator band's ``middle``, with how far that is
    from the traced chunks ``scaled`` as its own signed row. Which free chunk BFC hands a buffer depends on
    what earlier steps left free, so a trace's chunks say little of another setting's: real runs at 2-4x the
    size hand their largest buffers 1.2-1.9x their requests where most traced steps had them at 1.0x. The
    middle read within 5% of the median of three real runs in 21, 22, 24, 20 and 19 of 30 cases on five sets
    of traces (a transformer LM and KerasHub's Llama: batch, sequence, policy, optimizer), the chunks scaled
    in 16, 15, 16, 15 and 16 (docs/WHAT_IF.md's table)."""
    figure = max(middle, floor)  # where every axis grows, no less than the traced peak (``project``)
    said = (f"the traced peak, {size_text(floor)} (the band's middle, {size_text(middle)}, is less)" if floor > middle
            else f"the band's middle, {size_text(middle)}")
    by_category[CHUNKING_CATEGORY] = figure - scaled
    basis.append(basis_line(CHUNKING_CATEGORY, 0, figure - scaled, "computed",  # short: the tab's Basis cell
                            f"{size_text(figure - scaled)}: {said}, less the chunks scaled"))


def _sequence_ratio(trace: OpTrace, breakdown: Optional[Breakdown], what: WhatIf) -> Tuple[float, str]:
    """(How much longer the asked sequence is than the traced one, why it cannot be projected: "" if it can).
    A length that is also the batch, 1, the heads' width, or a weight's dimension (itself, or times the batch: a
    flattened [batch x seq, d]) cannot be told apart from it in a buffer's shape: said, not guessed."""
    traced, batch = trace.sequence_length, trace.batch_size
    if what.seq is None or what.seq == traced:
        return 1.0, ""
    if not traced:
        if trace.source not in _SAYS_SEQUENCE:
            return 1.0, "the trace does not say its sequence length: its reader records none (TF1 step stats)"
        return 1.0, ("the trace does not say its sequence length: it is read from the step's input where that is "
                     "token ids [batch, seq] or vectors [batch, seq, features], and this one's is neither (a picture "
                     "has none), or an older tb_modelmem stored the trace")
    if not batch:
        return 1.0, "the trace does not say its batch size: which buffers carry the sequence cannot be told"
    if traced == 1 or traced == batch:
        return 1.0, (f"the traced sequence length {traced} is {'a unit dimension' if traced == 1 else 'also the batch'}"
                     ": which buffers carry it cannot be told; trace at another length")
    if trace.head_width == traced:
        return 1.0, (f"the traced sequence length, {traced}, is also the width of the attention heads (the forward "
                     f"pass splits them as [{batch}, {traced}, heads, {traced}]): attention scores [batch, heads, seq, "
                     "seq] cannot be told from its queries, keys and values; trace at another length")
    # batch x length ([batch x seq, d] flattened) may be a weight's dimension too: no buffer shaped like a weight
    # carries the batch (``carries_batch``), so only the length itself is ambiguous
    if breakdown is not None:
        weights = list(zip(breakdown.variables.column("name"), map(list, breakdown.variables.column("shape"))))
    elif trace.weight_dims:
        weights = [("a weight the step read", trace.weight_dims)]
    else:
        return 1.0, ("no breakdown of the run's variables: whether the sequence length is also a weight's "
                     "dimension cannot be checked")
    for name, shape in weights:
        if traced in shape and not _position_rows(trace, breakdown, shape):
            dims = f" {shape}" if breakdown is not None else ""
            return 1.0, (f"the traced sequence length, {traced}, is also a dimension of {name}{dims}: which buffers "
                         "carry the sequence cannot be told; trace at a length no weight has")
    if not any(any(v) for field in (trace.timeline.seq_by_category, trace.timeline.seq2_by_category)
               for v in field.values()):
        return 1.0, "no buffer of this trace is known to carry the sequence (its reader records none)"
    return what.seq / traced, ""


def _position_rows(trace: OpTrace, breakdown: Optional[Breakdown], shape: List[int]) -> bool:
    """Whether the traced length in a weight's ``shape`` is a position table's rows alone (``OpTrace.position_tables``):
    no buffer's feature, so no ambiguity. Not where the length is its width too ([T, T]), nor where another weight of
    the breakdown has that shape (a ``Linear(d, T)``, whose outputs do hold T as a feature)."""
    if not (shape in trace.position_tables and shape[0] == trace.sequence_length
            and trace.sequence_length not in shape[1:]):
        return False
    if breakdown is None:
        return True
    held = [s for s, role in zip(breakdown.variables.column("shape"), breakdown.variables.column("role"))
            if role in (WEIGHT, NON_TRAINABLE) and list(s) == shape]
    return len(held) == 1


class _Update(NamedTuple):
    """How the asked optimizer's update holds memory unlike the traced one's (``_asked_update``), the asked
    class, and the ``torch.optim`` implementation its step and the traced one take (``torch_optimizers``)."""

    kind: str = ""
    asked: str = ""  # the asked class, "" where the run's framework has none of that name
    flags: Tuple[str, ...] = ()  # its flags (``optimizer_class``'s), its implementation's name among them
    path: str = torch_optimizers.FOR_LOOP
    traced_path: str = torch_optimizers.FOR_LOOP
    # the timeline's points inside the traced update, where a step traced updating in place gets the asked
    # class's scratch added (``_NO_SCRATCH_TRACED``): ``_update_moments``
    moments: Tuple[int, ...] = ()

    def labels(self, traced: str) -> Tuple[str, str]:
        """(The asked class, the ``traced`` one), each with its implementation where either step's is not one
        parameter at a time ("AdamW foreach", "Adam fused"), as the tab's menu names them."""
        if torch_optimizers.FOR_LOOP == self.path == self.traced_path:
            return self.asked, traced
        return optimizer_label_of(self.asked, (self.path,), ""), optimizer_label_of(traced, (self.traced_path,), "")


def _asked_update(trace: OpTrace, state: State, what: WhatIf) -> _Update:
    """``_Update.kind``: ``_REASSIGNS`` (Keras' SGD with momentum, whose assign keeps each new slot's buffer),
    ``_IN_PLACE`` (a torch.optim step with no scratch: SGD's, with momentum or not, adds into the weights and
    buffers; a fused kernel's), ``_NO_SCRATCH_TRACED`` (a torch optimizer with scratch where the traced one
    updated in place: none to scale) or "" (as the traced, scaled; also for a name the run's framework has no
    class of: ``State.projected`` says its state is unknown). A torch step's implementation is the traced one's
    (``torch_optimizers.path_of`` its update's ops), or its device's default where the asked class lacks it."""
    if what.optimizer is None:
        return _Update()
    try:
        asked = state.asked_optimizer(what.optimizer) if state.torch else optimizer_class(what.optimizer, None)
    except ValueError:
        return _Update()
    if state.torch:
        traced_path = _traced_path(trace)
        path = torch_optimizers.asked_path(*asked, traced_path, any(d.startswith("cuda") for d in trace.devices))
        if _in_place(asked[0], state.update_groups(what.optimizer), path):
            return _Update(_IN_PLACE, *asked, path, traced_path)
        if not _in_place(state.optimizer[0], state.update_groups(None), traced_path):
            return _Update("", *asked, path, traced_path)
        return _Update(_NO_SCRATCH_TRACED, *asked, path, traced_path, _update_moments(trace))
    return _Update(_REASSIGNS if asked == _REASSIGNS_SLOTS and state.optimizer[:2] != _REASSIGNS_SLOTS else "",
                   *asked)


def _in_place(cls: str, groups: ParamGroups, path: str) -> bool:
    """Whether ``cls``'s step updates every param group of ``groups`` (``State.update_groups``) in place."""
    return all(torch_optimizers.in_place(cls, flags, path) for flags, _ in groups)


def _kept_or_moved(how: str, projected: float, traced: float) -> str:
    """``how`` of a basis line, "kept" made ``_MOVED`` where its figure is not the traced peak's (its formula then
    says what the traced peak held: ``_at_the_traced_peak``)."""
    return _MOVED if how == "kept" and round(projected) != round(traced) else how


def _at_the_traced_peak(traced: float) -> str:
    return f"; at the traced peak {size_text(traced)}"


def _traced_path(trace: OpTrace) -> str:
    """The implementation the traced torch.optim step took (``OpTrace.optimizer_path``; a trace read before the
    reader recorded it, or naming one this version does not know: its update phase's ops)."""
    if trace.optimizer_path in torch_optimizers.PATHS:
        return trace.optimizer_path
    return torch_optimizers.path_of([op.name for op in trace.ops if op.phase == OPTIMIZER])


def _update_moments(trace: OpTrace) -> Tuple[int, ...]:
    """The timeline's points inside the traced update: its allocator events, and the point each update began
    after (``Timeline.update_starts_us``: what was in use while an update that allocates nothing ran)."""
    timeline = trace.timeline
    phases = {op.name: op.phase for op in trace.ops}
    inside = {i for i, op in enumerate(timeline.op) if phases.get(op) == OPTIMIZER}
    before = {bisect.bisect_right(timeline.t_us, start) - 1 for start in timeline.update_starts_us}
    return tuple(sorted(inside | {i for i in before if i >= 0}))


def _no_scratch_traced(state: State, update: _Update, known: bool) -> str:
    """Why the asked class's scratch is unknown on a step traced updating in place: its update allocated
    nothing, so no moment of it is in the trace (``known``: the scratch itself is), or it is not measured."""
    traced = f"{state.optimizer[0]}{' (fused)' if update.traced_path == torch_optimizers.FUSED else ''}"
    why = (f"allocates nothing there, so its trace holds no moment of the update to add {update.asked}'s scratch "
           "to" if known else f"its trace has no update scratch to scale: {update.asked}'s is not in it")
    return f"the traced {traced} updates in place and {why}; trace a step under {update.asked}"


def _torch_scratch(state: State, what: WhatIf, update: _Update) -> Optional[Tuple[int, int]]:
    """The most the asked and the traced ``torch.optim`` class's step holds at once over the run's trainable
    parameters on the paths they take, a param group at a time (``torch_optimizers.scratch_peak``); None but on
    a PyTorch step asked another class that makes scratch (``_asked_update``'s "", or ``_NO_SCRATCH_TRACED``: 0
    traced) with its state whole on each device (no ``shard``), and on the foreach path parameters of at most two
    dtypes in each group (``torch_optimizers.scratch_peak``): else the weights + slots ratio."""
    if not (state.torch and update.asked and update.kind in ("", _NO_SCRATCH_TRACED)) or what.shard not in (
            None, "replicated"):
        return None
    sizes = [tensor_bytes(shape, dtype) for _, shape, dtype in state.trainable]
    dtypes = [dtype for _, _, dtype in state.trainable]

    def most(cls: str, groups: ParamGroups, path: str) -> Optional[int]:
        """The most over the param groups, which ``step()`` updates one after another, each with its settings."""
        each = [torch_optimizers.scratch_peak(cls, flags, [sizes[i] for i in places], path, [dtypes[i] for i in places])
                for flags, places in groups]
        known = [peak for peak in each if peak is not None]
        return max(known, default=0) if len(known) == len(each) else None

    asked = most(update.asked, state.update_groups(what.optimizer), update.path)
    traced = most(state.optimizer[0], state.update_groups(None), update.traced_path)
    return None if asked is None or traced is None else (asked, traced)


def _ddp_buckets(trace: OpTrace, state: State, projected_state: Dict[str, Optional[int]], what: WhatIf,
                 unknown: Dict[str, str]) -> Optional[float]:
    """The bytes ``DistributedDataParallel`` holds all step on each device of a PyTorch step asked for
    replicas, its gradients whole (no sharding, or the optimizer state's: ``ZeroRedundancyOptimizer`` in DDP):
    its Reducer's gradient buckets, made at construction, one flat copy of every trainable gradient (none where
    ``gradient_as_bucket_view=True`` makes the gradients views into them, not its default, nor Lightning's or
    accelerate's; a checkpoint's breakdown does not say which weights are frozen, so a frozen one counts).
    Measured on 2 gloo ranks: each rank's step peaked the weights' size above the same step in one process
    (``tests/integration/test_projection_torch.py``). 0: not such a step; None: the buckets are in no figure of
    this trace, as the weights they are made with are not (a count from 0 in the window, no breakdown)."""
    if not state.torch or what.replicas < 2 or what.shard in ("gradients", "weights"):
        return 0.0
    weights = projected_state.get(WEIGHTS_CATEGORY)
    if state.source and weights is not None:
        return float(weights)
    if not state.source and not trace.counts_resident:
        return None
    unknown.setdefault(GRADIENTS_CATEGORY, "DDP's gradient buckets hold a copy of every gradient, the trainable "
                       "weights' size, unknown without the run's variables")
    return 0.0


def _gradient_sync(trace: OpTrace, state: "State", what: WhatIf, by_category: Dict[str, Optional[int]],
                   unknown: Dict[str, str]) -> Optional[Dict[str, int]]:
    """A data-parallel step on several devices that was traced on one: after the backward pass every
    gradient is live at once, and the all-reduce's result beside it (XLA's plan of Keras on 8 devices
    holds 2x the weights there: measured, docs/ARCHITECTURE.md); a reduce-scatter (ZeRO-2/3) leaves each
    device its shard of the result. That moment's bytes by category (None: not such a step, or a figure
    it needs is unknown; or a PyTorch step's, whose all-reduce fills the buckets its step holds throughout:
    ``_ddp_buckets``)."""
    traced_on = {d for d in trace.devices if d.startswith("/device:")}  # a TF trace lists its host's ops too
    if what.replicas < 2 or len(traced_on) > 1 or not state.whole or unknown:
        return None
    if state.torch and what.shard not in ("gradients", "weights"):  # DDP's buckets, in its step's series
        return None
    weights = state.whole.get(WEIGHTS_CATEGORY, 0)
    reduced = math.ceil(weights / what.replicas) if what.shard in ("gradients", "weights") else weights
    at_sync = {c: int(by_category.get(c) or 0) for c in RESIDENT_CATEGORIES}
    at_sync.update({c: 0 for c in STEP_ONLY_CATEGORIES}, inputs=int(by_category.get(INPUTS_CATEGORY) or 0),
                   gradients=weights + reduced)
    at_sync.update({c: int(by_category.get(c) or 0) for c in BEFORE_TRACE_CATEGORIES if c in by_category})
    return at_sync


def _at_the_all_reduce(at_sync: Dict[str, int], what: WhatIf, state: "State", by_category: Dict[str, Optional[int]],
                       basis: List[Dict[str, Any]]) -> None:
    """Say the all-reduce's moment in ``by_category`` and in the step categories' basis lines."""
    weights = state.whole.get(WEIGHTS_CATEGORY, 0)
    scattered = what.shard in ("gradients", "weights")
    by_category.update(at_sync)
    for line in basis:
        line["traced_then_bytes"] = None
    how = (f"the gradients' all-reduce over {what.replicas} devices: all of them at once ({size_text(weights)}, the "
           f"weights' size) + the {'reduce-scatter' if scattered else 'all-reduce'}'s result "
           f"({size_text(at_sync[GRADIENTS_CATEGORY] - weights)})")
    for line in basis:
        if line["category"] in STEP_ONLY_CATEGORIES:
            formula = how if line["category"] == GRADIENTS_CATEGORY else (
                "the batch, still held at the all-reduce" if line["category"] == INPUTS_CATEGORY
                else "none in use at the all-reduce, after the backward pass")
            line.update(projected_bytes=at_sync[line["category"]], how="computed", formula=formula)


def _reserved(trace: OpTrace, breakdown: Optional[Breakdown], what: WhatIf,
              factors: Tuple[Optional[float], float], unknown: Dict[str, str]) -> Optional[Dict[str, Any]]:
    """What a CUDA step's caching allocator would reserve (``rules.caching_allocator``: its requests replayed at
    the asked batch and length; ``factors``: the batch's and the sequence's), beside what it reserved in the
    trace and what the replay reads at the traced setting; None where the allocator is no caching one."""
    traced = next((a.get("max_reserved_bytes") for a in trace.allocators or () if a.get("counted")), None)
    if not trace.caching_plan or not traced:
        return None
    out: Dict[str, Any] = {"bytes": None, "allocated_bytes": None, "traced_bytes": traced,
                           "replayed_traced_bytes": None}
    try:
        at_traced = _replayed(trace, breakdown, 1.0, 1.0)
    except (ValueError, ArithmeticError) as e:
        return dict(out, how=f"not replayed: {e}")
    out["replayed_traced_bytes"] = at_traced.reserved
    if not _replays(what):
        return dict(out, how="not replayed: another optimizer, precision or device count changes the step's "
                             "requests in ways its trace does not record; the batch and the sequence length are")
    if any(category in unknown for category in STEP_ONLY_CATEGORIES):
        return dict(out, how="not replayed: the step's own buffers cannot be projected (see why beside them)")
    scale, seq_ratio = factors[0] or 1.0, factors[1]
    if seq_ratio > 1.0 and trace.position_tables:
        return dict(out, how="not replayed: a position table's rows grow with the length, and the requests of its "
                             "weight, state and gradient at that size are in no trace")
    asked = at_traced if scale == seq_ratio == 1.0 else _replayed(trace, breakdown, scale, seq_ratio)
    held = ("the run's variables each a block, the optimizer's state made at the first update" if breakdown else
            "what the window held throughout as one block (no breakdown in this run: with one, each variable is a "
            "block and the optimizer's state is made at the first update)")
    paired = (f"; {asked.unpaired:,} buffers the window left or found were paired with no buffer of their size"
              if asked.unpaired else "")
    return dict(out, allocated_bytes=asked.allocated, bytes=asked.reserved, how=(
        f"its requests replayed through a model of the CUDA caching allocator (512 B rounding, 2 MiB and 20 MiB "
        f"segments, best fit, splitting and merging) from a cold start, {held}: at the traced setting it reads "
        f"{size_text(at_traced.reserved)} against the {size_text(traced)} the trace reserved "
        f"({(at_traced.reserved - traced) / traced:+.1%}){paired}"))


def _replays(what: WhatIf) -> bool:
    """Whether the caching allocator's requests are replayed for this question: the batch and the length only."""
    return what.optimizer is None and what.policy is None and what.replicas == 1 and what.shard is None


def _reserves(trace: OpTrace, what: WhatIf) -> bool:
    """Whether a budget's cautious batch is the one whose replayed caching allocator fits it."""
    plan = trace.caching_plan
    return (plan is not None and bool(trace.batch_size) and _replays(what)
            and caching_allocator.requests_in(plan) <= caching_allocator.MAX_REQUESTS)


def _replayed(trace: OpTrace, breakdown: Optional[Breakdown], batch: float, seq_ratio: float,
             limit: Optional[int] = None) -> caching_allocator.Replayed:
    """The trace's caching allocator, its requests replayed with those carrying the batch scaled by ``batch`` and
    the sequence by ``seq_ratio``, on a device of ``limit`` bytes where given (ValueError: too many requests)."""
    plan = trace.caching_plan or {}
    resident, at_update = _resident_blocks(plan, breakdown)

    def size_of(size: int, carries: int) -> int:
        return int(round(size * (batch if carries & 1 else 1.0) * seq_ratio ** min(carries >> 1, 2)))

    return caching_allocator.replay(plan, size_of, resident, at_update, limit)


def _resident_blocks(plan: Dict[str, Any], breakdown: Optional[Breakdown]) -> Tuple[List[int], List[int]]:
    """(What the replay holds from the start, what it makes at the first update): the breakdown's variables, each
    a block, and its optimizer slots; the rest of what the window held throughout one block beside them."""
    held = int(plan["resident_bytes"])
    if breakdown is None:
        return [held], []
    columns = breakdown.variables.columns
    resident = [size for size, role in zip(columns["bytes"], columns["role"]) if size and role != OPTIMIZER_SLOT]
    slots = [size for size, role in zip(columns["bytes"], columns["role"]) if size and role == OPTIMIZER_SLOT]
    rest = held - sum(map(caching_allocator.round_size, resident + slots))
    return resident + ([rest] if rest > 0 else []), slots


def _gradients_high(trace: OpTrace) -> int:
    """The timeline point where the traced step held the most gradient bytes (where its all-reduce would be)."""
    held = trace.timeline.by_category.get(GRADIENTS_CATEGORY) or [0.0]
    return max(range(len(held)), key=held.__getitem__)


def _caveat(trace: OpTrace) -> str:
    """How far a figure from this trace can be trusted, as measured against real runs (docs/WHAT_IF.md): by
    the allocator that counted it (Keras on torch is counted by torch's, as a PyTorch step is)."""
    if trace.source == TORCH_PROFILER_SOURCE and all(device == "cpu" for device in trace.devices):
        return ("torch counts a CPU step's bytes exactly, so runs of one setting agree: float32 steps of plain "
                "loops (transformers, vision models, recurrent layers), Trainer, Lightning, DDP and torch.compile "
                "read within 0.3% of real runs, a step under autocast within 4.4%; docs/WHAT_IF.md has each")
    if trace.source in PLACED_BY_RANGES:
        caching = next((a for a in trace.allocators or () if a.get("reserved_at_peak_bytes")), None)
        held = ("" if caching is None else f" (the traced step's held "
                f"{size_text(caching['reserved_at_peak_bytes'] - caching['peak_bytes'])} of them at its peak)")
        return (f"a CUDA step's tensors, scaled; the cached blocks its caching allocator reserves besides "
                f"them{held}, which an out-of-memory error counts too, are in the reserved figure, its requests "
                "replayed; no GPU run at another setting has checked either yet")
    if trace.allocations == "planned":
        return ("XLA's plan of the traced program, scaled: at another setting XLA compiles another program, whose "
                "fusions may keep more or fewer buffers (a flax MLP planned 68 B of temp at batch 64 and 6.3 MB at "
                "1024, where this read -28%; flax and Keras-on-JAX steps at 2-4x read within 7%); the asked "
                "step's own jit(...).lower(...).compile().memory_analysis() says it exactly")
    if trace.xla:  # XLA's code, each allocation counted: TensorFlow's jit_compile or auto-clustering, JAX on a GPU
        return ("XLA-compiled code, traced and scaled: at another setting XLA compiles it again, and its scratch need "
                "not scale as the traced buffers do (TensorFlow's auto-clustering on a CPU: the CNN tutorial read "
                "within 2.7% at 2-8x the batch, a CNN into a Dense 128 -19% to -33%, its cluster's scratch 17.0 MB "
                "at batch 32 and 90.0 MB at 128); trace a step at the asked setting to be sure")
    return ("a traced step, replayed: runs of the same step differ (the executor's order, the allocator's chunks), "
            "so read it as within about 5-15% (CNNs at 2-8x the batch read up to 26% off: at the larger batch the "
            "executor ran other ops side by side); trace two steps to see how far they differ here, and the "
            "allocator band, where shown, says how far chunking alone moves it; docs/WHAT_IF.md has the errors "
            "measured against real runs")


def _traced_peak(trace: OpTrace, state: "State") -> int:
    """The traced step's peak as the Ops view gives it: a count that starts at 0 in the window (TF1 step
    stats, torch on a CPU) has the run's variables on top."""
    return trace.peak_bytes + (0 if trace.counts_resident else sum(state.bytes.values()))


def largest_batch(trace: OpTrace, breakdown: Optional[Breakdown], what: WhatIf, budget_bytes: int,
                  most: int = 1 << 20, cautious: bool = False,
                  answers: Optional[Dict[int, Dict[str, Any]]] = None) -> Tuple[Optional[int], str]:
    """(The largest global batch whose projected peak on each device fits ``budget_bytes``, a multiple
    of ``replicas``; why, where there is none): 0 if not even one sample per device fits, None if the
    peak cannot be projected or does not grow with the batch up to ``most`` per device. ``cautious``:
    what a CUDA caching allocator would reserve must fit too where it is replayed, else the allocator band's
    high end where the answer has a band. ``answers``: the projections already made, by batch per device
    (another search's), filled in as this one goes."""
    made = {} if answers is None else answers
    most = max(1, min(most, MOST_ASKED // what.replicas))  # the largest global batch a question may ask
    reserves = cautious and _reserves(trace, what)
    seq_ratio = _sequence_ratio(trace, breakdown, what)[0]

    def fits(per_replica: int) -> Tuple[Optional[bool], Dict[str, Any]]:
        if per_replica not in made:
            made[per_replica] = project(trace, breakdown, dataclasses.replace(what, batch=per_replica * what.replicas),
                                        reserved=False)
        result = made[per_replica]
        if result["peak_bytes"] is None:
            return None, result
        high = result["band"]["high_bytes"] if cautious and result.get("band") else result["peak_bytes"]
        if reserves and _replayed(trace, breakdown, per_replica / (trace.batch_size or 1), seq_ratio,
                                  limit=budget_bytes).out_of_memory:
            return False, result  # the caching allocator, even with its cache emptied, would pass the budget
        return max(high, result["peak_bytes"]) <= budget_bytes, result

    first, result = fits(1)
    if first is None:
        reasons = sorted(set(result["unknown"].values()))
        return None, "the peak cannot be projected: " + "; ".join(reasons)
    if not first:
        one = result["peak_bytes"]
        return 0, f"even one sample per device projects to {size_text(one)} ({one:,} B)"
    low, high = 1, 2
    while high <= most and fits(high)[0]:
        low, high = high, high * 2
    if high > most:
        return None, f"no bound: the projected peak still fits at {low * what.replicas:,} samples"
    while high - low > 1:  # the peak grows with the batch: the last size that fits
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle)[0] else (low, middle)
    return low * what.replicas, ""


def budget_answer(trace: OpTrace, breakdown: Optional[Breakdown], what: WhatIf, budget_bytes: int) -> Dict[str, Any]:
    """What a budget question gets (the API, the CLI and the tab alike): ``{"largest_batch", "note",
    "cautious_batch", "cautious_by", "largest_batch_peak_bytes"}`` (the projected peak at the largest batch): the
    largest batch whose allocator band fits too (None without a batch), or
    on a CUDA trace whose caching allocator is replayed, what it reserves (``cautious_by``: "band", "reserved")."""
    answers: Dict[int, Dict[str, Any]] = {}  # each batch projected once for both searches
    found, note = largest_batch(trace, breakdown, what, budget_bytes, answers=answers)
    by = "reserved" if _reserves(trace, what) else "band"
    cautious = largest_batch(trace, breakdown, what, budget_bytes, cautious=True, answers=answers)[0] if found else None
    at = answers.get(found // what.replicas) if found else None
    return {"largest_batch": found, "note": note, "cautious_batch": cautious, "cautious_by": by,
            "largest_batch_peak_bytes": at["peak_bytes"] if at else None}


def parse_size(text: Union[int, str]) -> int:
    """Bytes of a size: an int, or text such as "16GiB", "512 MB", "2e9" (ValueError otherwise)."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        found = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-z]*)\s*", str(text).lower())
        if found is None or found.group(2) not in _UNITS:
            raise ValueError(f"not a size: {str(text)[:40]!r} (say 16GiB, 512MB or a number of bytes)")
        digits, unit = found.group(1), found.group(2)
        if not unit and float(digits) < 2**20:  # "--budget 16" meant 16 GiB, not 16 bytes
            raise ValueError(f"a budget of {digits} bytes is less than any model: say its unit (16GiB, 512MB)")
        number = int(digits) * _UNITS[unit] if digits.isdigit() else float(digits) * _UNITS[unit]
        if not number < _MOST_BUDGET:  # 1e400 is inf as a float
            raise ValueError(f"a budget must be under 8 EiB, got {str(text)[:40]!r}")
        value = int(number)
    if value <= 0:
        raise ValueError(f"a budget must be positive, got {str(text)[:40]!r}")
    if value >= _MOST_BUDGET:
        raise ValueError(f"a budget must be under 8 EiB, got {str(text)[:40]!r}")
    return value


_MOST_BUDGET = 2**63  # a byte count a signed 64-bit integer holds, as every allocator counts


_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9, "t": 10**12,
          "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


# --- the step -----------------------------------------------------------------------------------

class _Step:
    """Each category's projected bytes at every timeline point (the state constant at its projection),
    and how each was made, kept apart so that a figure's basis can be said at any moment of the step."""

    def __init__(self, trace: OpTrace, scale: float, dtype_factor: float, state: State,
                 projected_state: Dict[str, Optional[int]], update: _Update = _Update(), gradient_share: float = 1.0,
                 seq_ratio: float = 1.0, buckets: Optional[float] = 0.0,
                 scratch: Optional[Tuple[int, int]] = None, table_growth: Optional[Dict[str, int]] = None) -> None:
        timeline = trace.timeline
        n = len(timeline.t_us)
        self.t_us = timeline.t_us
        self.scale, self.dtype_factor = scale, dtype_factor
        in_window = {c: timeline.by_category.get(c, [0.0] * n) for c in STEP_CATEGORIES + (BEFORE_WINDOW,)}
        self.batch = {c: timeline.batch_by_category.get(c, [0.0] * n) for c in in_window}
        self.seq_ratio = seq_ratio
        self.seq = {c: (timeline.seq_by_category.get(c, [0.0] * n), timeline.seq2_by_category.get(c, [0.0] * n))
                    for c in in_window}
        # what carries the batch at the asked sequence length: its sequence part x ratio, its square part x ratio^2
        self.grown = {c: [b + s1 * (seq_ratio - 1) + s2 * (seq_ratio ** 2 - 1)
                          for b, s1, s2 in zip(self.batch[c], *self.seq[c])] for c in in_window}
        # what is shaped like a position table grows with a longer sequence, the batch whatever it is; a shorter one
        # runs on the table as traced (``State.grow_tables``)
        self.rows = {c: [r * (max(seq_ratio, 1.0) - 1) for r in timeline.rows_by_category.get(c, [0.0] * n)]
                     for c in in_window}
        self.in_window = in_window
        self.traced_index = max(range(n), key=timeline.bytes.__getitem__)
        self.state = state
        self.factor: Dict[str, float] = {}  # a category's batch-carrying bytes are multiplied by it
        self.fixed_factor: Dict[str, float] = {}  # and the rest by this
        self.series: Dict[str, List[float]] = {}
        # the weights and slots (after the change, as traced): an update's scratch reads each weight and its
        # slots; but every Keras update makes at least lr x gradient, one buffer of its weight's size
        # a position table's growth (``State.grow_tables``) is not the asked state's: its update's scratch is the
        # table's rows, grown as they are (``rows``), and every axis still grows
        before = {c: v - (table_growth or {}).get(c, 0) if v is not None else None
                  for c, v in projected_state.items()}
        self.state_sizes = state_sizes(state, before)
        now, was = self.state_sizes
        self.update = update
        self.in_place = update.kind == _IN_PLACE
        # the most a torch.optim class's step holds at once, asked and traced (``torch_optimizers.scratch_peak``)
        self.scratch_bytes = scratch if scratch is not None and scratch[1] else None
        # the asked class's scratch added at the traced update's moments, where the traced one made none
        self.added_scratch = float(scratch[0]) if scratch and update.kind == _NO_SCRATCH_TRACED else 0.0
        slot_ratio = (0.0 if self.in_place else self.scratch_bytes[0] / self.scratch_bytes[1]
                      if self.scratch_bytes else 1.0 if self.added_scratch else now / was if was else 1.0)
        self.largest_update = 0 if state.torch else (  # torch's foreach updates make no lr x grad buffer
            max((tensor_bytes(shape, dtype) for _, shape, dtype in state.trainable), default=0) * gradient_share)
        # SGD with momentum's m x momentum reads no gradient, so TensorFlow's executor makes it for every slot
        # as the step starts and holds each until its weight's gradient arrives: one buffer per slot, as many
        # bytes as the slots (every momentum run's peak held them all: causal LM 15.14 MiB, Llama 20.91)
        self.early_update = (float(projected_state.get(OPTIMIZER_SLOTS_CATEGORY) or 0.0)
                             if update.kind == _REASSIGNS and trace.source in _TF_EXECUTOR and not trace.xla else 0.0)
        # the asked setting changes a known part of the state; or that, or the step's buffers' sizes
        self.changes_state = any(v is not None and v != state.bytes.get(c) for c, v in before.items())
        self.changes = (scale != 1.0 or dtype_factor != 1.0 or seq_ratio != 1.0 or gradient_share != 1.0
                        or bool(buckets) or self.changes_state)
        self.wide = self._wide(timeline, scale, dtype_factor)
        for category in STEP_ONLY_CATEGORIES:
            factor = scale * (dtype_factor if category in _COMPUTED else 1.0)
            fixed_factor = {OPTIMIZER_TEMPORARIES_CATEGORY: slot_ratio, GRADIENTS_CATEGORY: gradient_share}.get(
                category, 1.0)
            self.factor[category], self.fixed_factor[category] = factor, fixed_factor
            wide = self.wide.get(category, [0.0] * n)
            self.series[category] = [(v - b + r) * self.fixed_at(category, v - b) + g * factor + w for v, b, r, g, w
                                     in zip(in_window[category], self.batch[category], self.rows[category],
                                            self.grown[category], wide)]
        # an XLA step that donates none of its state returns a new copy of all of it: its outputs change with it
        self.state_copy = _new_state_copy(trace, state, projected_state)
        self.series[TEMPORARIES_CATEGORY] = [v + d for v, d in zip(self.series[TEMPORARIES_CATEGORY],
                                                                   self.state_copy)]
        self.buckets = buckets  # DDP's, beside the gradients all step (``_ddp_buckets``; None: in no figure here)
        self.series[GRADIENTS_CATEGORY] = [v + (buckets or 0.0) for v in self.series[GRADIENTS_CATEGORY]]
        self.scratch = self.series[OPTIMIZER_TEMPORARIES_CATEGORY]  # the traced update scratch, scaled
        if self.early_update:
            self.series[OPTIMIZER_TEMPORARIES_CATEGORY] = [max(v, self.early_update) for v in self.scratch]
        if self.added_scratch:
            moments = set(update.moments)
            self.series[OPTIMIZER_TEMPORARIES_CATEGORY] = [v + self.added_scratch * (i in moments)
                                                           for i, v in enumerate(self.scratch)]
        self._state_series(trace, projected_state)

    def _state_series(self, trace: OpTrace, projected_state: Dict[str, Optional[int]]) -> None:
        """What the allocator held besides the step's buffers: the state, and what else was resident (kept as
        traced: LeNet's held part read 4.37 MiB under Adam, 4.25 under SGD), but none where the asked optimizer
        assigns its slots whole each step (``_REASSIGNS_SLOTS``)."""
        n = len(self.t_us)
        self.held_traced: List[float] = []
        if trace.counts_resident:  # the state, when unknown, stays in it
            self.series.update(before_the_trace(trace, sum(self.state.bytes.values()), bool(self.state.source)))
            if self.update.kind == _REASSIGNS and HELD_CATEGORY in self.series:
                self.held_traced = self.series[HELD_CATEGORY]
                self.series[HELD_CATEGORY] = [0.0] * n
        else:
            self.series[UNATTRIBUTED_CATEGORY] = [0.0] * n
        self.made = {c: self.in_window[c] for c in (WEIGHTS_CATEGORY, OPTIMIZER_SLOTS_CATEGORY)}  # by the step
        for category in RESIDENT_CATEGORIES:
            value = projected_state.get(category)
            made = self.made.get(category, [0.0] * n)
            self.series[category] = [float(value or 0) + made[i] for i in range(n)]

    def traced_then(self, category: str, at: int, traced_bytes: float) -> float:
        """What ``category`` held in the traced step at timeline point ``at``, its basis line saying
        ``traced_bytes`` at the traced peak: so a figure of another moment reads against the traced bytes
        it was made from."""
        if category in self.in_window and category not in self.made:
            return self.in_window[category][at]
        if category == HELD_CATEGORY and self.held_traced:
            return self.held_traced[at]
        if category in BEFORE_TRACE_CATEGORIES:
            return self.series[category][at] if category in self.series else traced_bytes
        made = self.made.get(category)  # the state as the breakdown holds it, and what the step made of it
        return traced_bytes - made[self.traced_index] + made[at] if made else traced_bytes

    def fixed_at(self, category: str, rest: float) -> float:
        """What ``rest`` bytes of ``category`` that carry no batch are multiplied by: its fixed factor, but an
        optimizer's update scratch keeps at least one buffer of the largest weight's size where the trace had
        that much (SGD's lr x gradient: LeNet's fc1, 12.25 MiB, where Adam's update held 19.75)."""
        factor = self.fixed_factor[category]
        if category != OPTIMIZER_TEMPORARIES_CATEGORY or factor >= 1.0 or rest <= 0:
            return factor
        return max(factor, min(1.0, self.largest_update / rest))

    def buffer_factors(self, category: str, dtype: str, carries: bool, power: int, mixed: str) -> Tuple[float, float]:
        """What one step buffer of ``category`` is multiplied by, as its category's bytes are (what carries no
        batch at the traced peak's factor; what a policy keeps wide keeps its width), and what the loss's
        float32 copy of it is, where a mixed policy makes one (0: none)."""
        if category not in STEP_ONLY_CATEGORIES:
            return 1.0, 0.0
        if not carries:
            return self.rest_factor(category, self.traced_index), 0.0
        wide = mixed == KEEPS_WIDTH or not dtype.startswith(("float", "bfloat", "half"))
        grown = self.seq_ratio ** power
        factor = (self.scale if wide else self.factor[category]) * grown
        return factor, self.scale * grown if mixed == LOSS_COPY and self.dtype_factor < 1.0 else 0.0

    def rest_factor(self, category: str, at: int) -> float:
        """``fixed_at`` for what of ``category`` carries no batch at timeline point ``at``."""
        return self.fixed_at(category, self.in_window[category][at] - self.batch[category][at])

    def _wide(self, timeline: Any, scale: float, dtype_factor: float) -> Dict[str, List[float]]:
        """What a change of precision policy leaves wider than ``dtype_factor`` makes it, per computed category
        at each point (``rules.buffers.under_mixed_policy``): the batch-carrying bytes it leaves as traced
        (float32 Keras keeps, integers, booleans: x 1 - dtype_factor more; none when the policy stays), and,
        from float32 to a mixed policy, the loss's float32 copy of the model's output (x 1 more). Both grown
        with the batch and the sequence as their category's batch-carrying bytes are at that point. From a mixed
        step to float32, what its casts made is not made (x 0)."""
        if dtype_factor == 1.0:
            return {}
        out: Dict[str, List[float]] = {}
        for category in _COMPUTED:
            kept = timeline.kept_width_by_category.get(category)
            copied = timeline.loss_copy_by_category.get(category) if dtype_factor < 1.0 else None
            cast = timeline.cast_copy_by_category.get(category) if dtype_factor > 1.0 else None
            if not kept and not copied and not cast:
                continue
            n = len(timeline.t_us)
            kept, copied, cast = kept or [0.0] * n, copied or [0.0] * n, cast or [0.0] * n
            out[category] = [scale * (g / b if b else 1.0) * (k * (1.0 - dtype_factor) + c - x * dtype_factor)
                             for b, g, k, c, x in zip(self.batch[category], self.grown[category], kept, copied, cast)]
        return out

    def _carried(self, category: str, at: int) -> str:
        """The bytes that carry the batch at timeline point ``at``, at the asked sequence length: those that
        carry the sequence times its ratio, those that carry it twice (attention scores) times the ratio
        squared, plus the rest ("3.00 MiB x 4 (seq) + 1.50 MiB x 16 (seq²) + 80.00 KiB")."""
        ratio = self.seq_ratio
        s1, s2 = (part[at] for part in self.seq[category])
        carries = self.batch[category][at]
        if ratio == 1.0 or not (s1 or s2):
            return size_text(carries)
        terms = [f"{size_text(s1)} x {_times(ratio)} (seq)"] if s1 else []
        terms += [f"{size_text(s2)} x {_times(ratio ** 2)} (seq²)"] if s2 else []
        terms += [size_text(carries - s1 - s2)] if carries - s1 - s2 >= 0.5 else []
        return " + ".join(terms)

    def explain(self, at: int, basis: List[Dict[str, Any]]) -> None:
        """Append each step category's basis line, its arithmetic taken at timeline point ``at`` (where the
        projected peak falls: the answer's ``peak_time_us`` says when), and add to the state's lines what the
        step itself made there. A line's ``traced_bytes`` is the category at the traced peak; its
        ``projected_bytes`` what its formula gives; where ``at`` is another moment, its ``traced_then_bytes``
        what the traced step held there (``traced_then``)."""
        traced = self.traced_index
        for category in STEP_ONLY_CATEGORIES:
            carries, grown = self.batch[category][at], self.grown[category][at]
            rest = self.in_window[category][at] - carries
            factor, fixed_factor = self.factor[category], self.fixed_factor[category]
            kept = self.fixed_at(category, rest)  # the fixed factor, or the update-scratch floor's
            if carries:
                # under another policy the factor is the dtype's, or the batch's times it: said (short: the tab's cell)
                which = ("" if self.dtype_factor == 1.0 or category not in _COMPUTED
                         else " (dtype)" if self.scale == 1.0 else " (batch x dtype)")
                times = f" x {_times(factor)}{which}" if factor != 1.0 else ""  # a length asked alone: no "x 1"
                formula = f"{self._carried(category, at)} carry the batch{times} = {size_text(grown * factor)}"
            elif not rest:
                formula = "none in use at this moment"
            else:
                formula = "none carries the batch"
            formula += ", all of it" if not rest and carries else self._rest_note(category, rest, kept) if rest else ""
            how = "scaled" if carries or (fixed_factor != 1.0 and rest) else "kept"
            added, computed = self._added_parts(category, at, kept)
            formula, how = formula + added, "computed" if computed else how
            if category == OPTIMIZER_TEMPORARIES_CATEGORY and self.series[category][at] > self.scratch[at]:
                how = "computed"  # short: the tab's Basis cell (README and ``early_update`` say why)
                formula = (f"{size_text(self.early_update)}: m x momentum per slot, from the step's start to its grad"
                           if self.early_update else self._added_note(self.scratch[at]))
            elif category == OPTIMIZER_TEMPORARIES_CATEGORY and self.added_scratch:  # said, not at this moment
                formula += (f"; {self.update.labels('')[0]}'s scratch at the update, {size_text(self.added_scratch)},"
                            " is not at this peak")
            if category == TEMPORARIES_CATEGORY and self.state_copy[at]:
                copy = self.state_copy[at]
                formula += f"; {'+' if copy > 0 else '-'} {size_text(abs(copy))}: its outputs' new state (not donated)"
                how = "computed"
            how = _kept_or_moved(how, self.series[category][at], self.in_window[category][traced])
            formula += _at_the_traced_peak(self.in_window[category][traced]) if how == _MOVED else ""
            wide = self.wide.get(category, ())
            if wide and abs(wide[at]) >= 0.5:  # short enough for the tab's Basis cell (README names the parts)
                formula += (f"; + {size_text(wide[at])} kept wide (norms, loss, ints, its copy)" if wide[at] > 0
                            else f"; - {size_text(-wide[at])} wide already (norms, loss, ints; casts not made)")
            basis.append(basis_line(category, self.in_window[category][traced], self.series[category][at], how,
                                    formula))
        for category in BEFORE_TRACE_CATEGORIES:
            held = self.series.get(category)
            if held is None:  # a row with no line reads "unknown" in the tab: a 0 B one is said too
                continue
            what, how = f"{size_text(held[at])}: {_BEFORE_TRACE_BASIS[category]}", "kept"
            traced_bytes = held[traced]
            if category == HELD_CATEGORY and self.held_traced:
                traced_bytes, how = self.held_traced[traced], "computed"
                what = "0 B: momentum's assign keeps each new value's buffer: none held past the variables"
            if category == UNATTRIBUTED_CATEGORY and not self.state.source:
                what = (f"{size_text(held[at])}: in use before the step (the run's weights and optimizer state "
                        "among it, not split)" if self.state.counted else "0 B: this trace's count starts at 0 in the "
                        "window: what was in use before it (the run's weights and optimizer state) is in no figure "
                        "here")
            if held[at] != held[traced]:  # said whatever the line's how ("computed": the rule's own figure)
                what += _at_the_traced_peak(traced_bytes)
                how = _kept_or_moved(how, held[at], traced_bytes)
            basis.append(basis_line(category, traced_bytes, held[at], how, what))
        lines = {line["category"]: line for line in basis}
        for category, made in self.made.items():  # a state the traced step itself created (its first step)
            line = lines.get(category)
            if line is None or not (made[at] or made[traced]) or line["projected_bytes"] is None:
                continue
            state, why = line["formula"].split(": ", 1)  # "12.49 MiB: the run's variables ..."
            line["traced_bytes"] += int(round(made[traced]))
            line["projected_bytes"] = int(round(self.series[category][at]))
            line["formula"] = (f"{size_text(self.series[category][at])}: {state}, {why}; "
                               f"+ {size_text(made[at])} the step itself created, in use at the peak")
        if at != traced:  # what the traced step held then: what each line's figure is made from
            for line in basis:
                line["traced_then_bytes"] = int(round(self.traced_then(line["category"], at, line["traced_bytes"])))


    def _added_parts(self, category: str, at: int, kept: float) -> Tuple[str, bool]:
        """What a step category's line adds past its batch-carrying and other bytes at timeline point ``at``: DDP's
        gradient buckets, and the growth of what is shaped like a position table (``rows``, times ``kept``, the
        factor of what carries no batch); and whether either is in its figure."""
        said, computed = "", False
        if category == GRADIENTS_CATEGORY and self.buckets:
            said, computed = f"; + {size_text(self.buckets)} DDP's gradient buckets, held all step", True
        elif category == GRADIENTS_CATEGORY and self.buckets is None:
            said = "; DDP's gradient buckets are made before the window, with the weights: in no figure here"
        grown = self.rows[category][at] * kept
        if grown:
            said += f"; + {size_text(grown)} shaped like the position table, a row per asked token"
            computed = True
        return said, computed

    def _added_note(self, traced: float) -> str:
        """The basis of the asked class's scratch added at the update of a step traced updating in place."""
        asked, was = self.update.labels(self.state.optimizer[0])
        return f"{size_text(self.added_scratch)}: {asked}'s scratch at the update, most at once (traced {was}: " \
            f"{size_text(traced)})"

    def _rest_note(self, category: str, rest: float, kept: float) -> str:
        """What a basis line says of the ``rest`` bytes of ``category`` that carry no batch, ``kept`` being
        their factor (``fixed_at``)."""
        fixed_factor = self.fixed_factor[category]
        scaled = f"; {size_text(rest)} do not, x {_times(fixed_factor)} = {size_text(rest * fixed_factor)}"
        if fixed_factor != 1.0 and category == GRADIENTS_CATEGORY:
            return f"{scaled} (each device keeps its shard of the gradients)"
        if kept != fixed_factor:
            return (f"; {size_text(rest)} do not, x {_times(kept)} = {size_text(rest * kept)} (kept up to the "
                    "largest weight's lr x grad)")  # short: the tab's Basis cell
        if self.in_place and category == OPTIMIZER_TEMPORARIES_CATEGORY:
            return f"; {size_text(rest)} do not, none asked: {self.update.labels('')[0]} updates in place"
        if self.scratch_bytes and category == OPTIMIZER_TEMPORARIES_CATEGORY:
            most, traced_most = self.scratch_bytes
            asked, was = self.update.labels(self.state.optimizer[0])
            return f"{scaled} (most at once: {size_text(most)} {asked} / {size_text(traced_most)} {was})"
        if fixed_factor != 1.0:
            after, before = self.state_sizes
            return f"{scaled} (weights + slots: {size_text(after)} / {size_text(before)} traced)"
        return f"; {size_text(rest)} do not, kept"


def _new_state_copy(trace: OpTrace, state: State, projected_state: Dict[str, Optional[int]]) -> List[float]:
    """What an XLA step's outputs gain (or lose) at each timeline point where the asked setting changes the
    state: a step that donates none of it (``nnx.jit``'s default, a ``jax.jit`` with no ``donate_argnums``)
    returns its new weights and optimizer state beside the old, so its outputs (XLA's plan:
    ``PLANNED_OUTPUTS``, where no parameter's buffer is an output; at least the state's bytes) hold a copy of it
    (flax steps under AdamW asked SGD, against XLA's plan of the SGD step: an MLP +82% with its moments' new copy
    kept, -6.8% without; a linen LM +7.1%, -0.7%). Nothing where any state is donated: it is updated in place."""
    timeline = trace.timeline
    none = [0.0] * len(timeline.t_us)
    if trace.allocations != "planned" or state.source != "breakdown" or None in projected_state.values():
        return none
    was, now = sum(state.bytes.values()), sum(v or 0 for v in projected_state.values())
    made = [i for i, op in enumerate(timeline.op) if op.endswith(PLANNED_OUTPUTS)]  # its allocation, its free
    if now == was or len(made) != 2 or not made[0] or timeline.bytes[made[0]] - timeline.bytes[made[0] - 1] < was:
        return none
    return [float(now - was) if made[0] <= i < made[1] else 0.0 for i in range(len(none))]


def _traced_compute_bytes(trace: OpTrace) -> int:
    """Bytes of an activation's element in the traced step: 2 where its forward pass ran under a mixed policy
    (``rules.buffers.mixed_step``), else the dtype of most of its forward pass's output bytes; where the trace places no
    op in a forward pass, the dtype holding most of the peak's activation bytes; float32 when it names neither.
    Not the peak's first: a mixed policy's peak may hold mostly float32 (KerasHub's GPT-2 under mixed_bfloat16:
    its tied head's logits, their gradient and the norms, 55.3 of the 80.4 MiB of activations there, where 56%
    of its forward pass's outputs are bfloat16)."""
    ops = trace.ops
    phases = [phase or phase_by_name(name, kind) for phase, name, kind
              in zip(ops.column("phase"), ops.column("name"), ops.column("op_type"))]
    held = forward_bytes_by_width(phases, [d or "" for d in ops.column("output_dtype")], ops.column("output_bytes"))
    if mixed_step(held):
        return 2
    if not held:
        buffers = trace.peak_buffers
        for dtype, category, size in zip(buffers.column("dtype"), buffers.column("category"), buffers.column("bytes")):
            if category == ACTIVATIONS_CATEGORY and item_bytes(dtype) and dtype.startswith(("float", "bfloat")):
                held[item_bytes(dtype)] = held.get(item_bytes(dtype), 0) + size
    return max(held, key=held.__getitem__) if held else 4


def _precision_name(trace: OpTrace, state: State, size: int) -> str:
    """The traced step's precision as the tab says it. A Keras step's policy, by its activations' width. A PyTorch
    step's, by what its matrix products computed in (``OpTrace.compute_dtype``; torch's trace records no op's
    output dtype): "bfloat16 autocast" where its weights stay float32, "bfloat16 matrix products" where no
    breakdown says the weights' dtype, "" where the trace does not say."""
    if not state.torch:
        return "float32" if size == 4 else "mixed (16-bit activations)"
    computed = trace.compute_dtype
    if not computed or computed == "float32":
        return computed
    weights = {dtype for _, _, dtype in state.trainable}
    return f"{computed} autocast" if weights == {"float32"} else computed if weights else f"{computed} matrix products"


def _step_unknown(trace: OpTrace, state: State, changes_step: bool, new_precision: bool,
                  batch_known: bool) -> Optional[str]:
    """Why the step's own buffers cannot be projected as asked, where they cannot (None: they can)."""
    fixed_precision = precision_unknown(trace, state.torch)
    if new_precision and fixed_precision is not None:
        return fixed_precision[0]
    if changes_step and not batch_known:
        return ("the trace does not say its batch size: trace the step again with this tb_modelmem, or pass "
                "batch_size to the trace")
    if changes_step and not any(any(v) for v in trace.timeline.batch_by_category.values()):
        return ("no buffer of this trace is known to carry the batch (the profile recorded no shapes: a PyTorch "
                "trace records none for what an op allocates; or an older trace)")
    return None


def _times(factor: float) -> str:
    return f"{factor:,.0f}" if factor >= 100 else f"{factor:.4g}"  # 4 digits: 1/32 reads 0.03125


# What the allocator held from before the traced step, in What-if's basis lines: kept as it was.
_BEFORE_TRACE_BASIS = {EARLIER_STEPS_CATEGORY: "made by earlier steps and freed in this one, as traced",
                       HELD_CATEGORY: "chunk slack and runtime buffers, held all step",
                       UNATTRIBUTED_CATEGORY: "in use before the step, and not the run's weights or optimizer state"}


def _unknown_peak(reason: str, basis: List[Dict[str, Any]], state: Dict[str, Optional[int]],
                  unknown: Dict[str, str], what: WhatIf) -> Dict[str, Any]:
    """A projection with no timeline to replay: the state as projected, the step unknown."""
    step = STEP_ONLY_CATEGORIES + (UNATTRIBUTED_CATEGORY,)
    by_category: Dict[str, Optional[int]] = dict.fromkeys(step)
    by_category.update(state)
    return {"peak_bytes": None, "by_category": by_category, "basis": basis,
            "unknown": {**unknown, **{c: unknown.get(c, reason) for c in step}}, "steps": [], "band": None,
            "peak_moved": False, "peak_time_us": None, "replicas": what.replicas,
            "batch_per_replica": math.ceil(what.batch / what.replicas) if what.batch else None,  # as asked
            "devices": what.replicas, "shard": what.shard, "seq": what.seq, "reserved": None, "traced": {},
            "optimizer": what.optimizer}
