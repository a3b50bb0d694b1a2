"""A trace joined with one breakdown (or none): ops on the model's layer tree, the peak by
category, the timeline, and the ops as a pageable table."""

from __future__ import annotations

import collections
import functools
import heapq
from typing import Any, Dict, List, Optional, Tuple, cast

from tb_modelmem.plugin.views.breakdown import BreakdownView
from tb_modelmem.plugin.views.pager import Pager
from tb_modelmem.plugin.views.peak import not_held, resident
from tb_modelmem.plugin.views.trees import appended, as_columns, layer_tree, unknown_where
from tb_modelmem.rules.join import Joiner, LayerTree, Vocabulary, phase_by_name
from tb_modelmem.rules.peak import handed_out, peak_by_category, peak_notes, stacks
from tb_modelmem.schema.names import (
    ACTIVATIONS_CATEGORY,
    BACKWARD,
    BEFORE_WINDOW,
    EARLIER_STEPS_CATEGORY,
    EXECUTOR,
    FORWARD,
    GRADIENTS_CATEGORY,
    INPUT,
    LOSS,
    MEASURED,
    METRICS,
    OPTIMIZER,
    OPTIMIZER_SLOT,
    OPTIMIZER_SLOTS_CATEGORY,
    PLACED_BY_RANGES,
    UNATTRIBUTED_CATEGORY,
    UNKNOWN_BYTES,
)
from tb_modelmem.schema.records import OpTrace

# Ops whose output is a view of an existing buffer (a variable, an input): no new bytes.
ALIASING_OPS = frozenset({"ReadVariableOp", "Identity", "Reshape", "Squeeze", "ExpandDims", "_Arg", "_Retval",
                          "VarHandleOp", "Const", "NoOp", "StopGradient"})
MAX_BUFFERS = 5000  # buffers at the peak listed in one answer (the largest; the rest are counted)
_GROUP_LABEL = {FORWARD: "(forward, no layer)", BACKWARD: "(backward, no layer)", OPTIMIZER: "(optimizer)",
                LOSS: "(loss)", METRICS: "(metrics)", INPUT: "(input)", EXECUTOR: "(executor)", "": "(unattributed)"}
OP_FIELDS = ("name", "op_type", "layer", "phase", "device", "calls", "time_us", "mean_us", "output_bytes",
             "output_shape", "output_dtype", "bytes_source", "alloc_bytes", "new_bytes", "fused", "source",
             "moved_bytes")


class TraceView:
    """A trace joined with one breakdown (or none): ops on the model's layer tree, the peak by
    category, and the ops as a pageable table."""

    def __init__(self, trace: OpTrace, breakdown: Optional[BreakdownView]) -> None:
        self.trace = trace
        self.breakdown = breakdown
        ops = trace.ops
        names, types = ops.column("name"), ops.column("op_type")
        phases = [p or phase_by_name(n, t) for p, n, t in zip(ops.column("phase"), names, types)]
        own_layers = trace.layers or sorted({layer for layer in ops.column("layer") if layer})
        vocabulary = breakdown.vocabulary if breakdown else Vocabulary(own_layers)
        # A trace whose ops carry the module they ran in (PyTorch's ranges) keeps them beside a breakdown's
        # layers: where the two name the same modules they meet; where they do not (a trace torch named by
        # instance, "GPT2Block_0", a checkpoint by state_dict path) neither side's figures are lost.
        self.unmatched_layers = ([layer for layer in own_layers if layer not in set(vocabulary.layers)]
                                 if breakdown is not None and trace.source in PLACED_BY_RANGES else [])
        self.tree = LayerTree(list(vocabulary.layers) + self.unmatched_layers)
        known = self.tree.children
        layers = [layer if layer in known and layer else "" for layer in ops.column("layer")]
        # Ops the trace did not place on one of these layers (an old trace, a trace joined to a
        # breakdown it was not captured with) are placed by name, learning from those names only.
        unplaced = ([i for i, (layer, phase) in enumerate(zip(layers, phases)) if not layer
                     and phase not in (INPUT, EXECUTOR)] if breakdown is not None and "" in layers else [])
        if unplaced:
            joiner = Joiner(vocabulary, (), [names[i] for i in unplaced])
            for i in unplaced:
                layers[i] = joiner.assign(names[i], types[i])[0]
        self.layer_column = layers
        self.phase_column = phases
        calls, time_us = ops.column("calls"), ops.column("time_us")
        sources = ops.column("bytes_source")
        new_bytes = [0 if t in ALIASING_OPS or (s == MEASURED and a == 0) else None if s == UNKNOWN_BYTES else o
                     for t, s, o, a in zip(types, sources, ops.column("output_bytes"), ops.column("alloc_bytes"))]
        alloc_bytes = _alloc_bytes(trace, sources)
        columns = dict(ops.columns)
        output_bytes = ([None if s == UNKNOWN_BYTES else o for s, o in zip(sources, ops.column("output_bytes"))]
                        if UNKNOWN_BYTES in sources else ops.column("output_bytes"))
        columns.update(layer=layers, phase=phases, new_bytes=new_bytes, alloc_bytes=alloc_bytes,
                       output_bytes=output_bytes, mean_us=[t / c if c else 0.0 for t, c in zip(time_us, calls)])
        # new_bytes: output bytes the op newly allocated (None when unknown); measured ops that got no
        # allocation, and aliasing ops (a ReadVariableOp "outputs" the whole kernel), add nothing
        self.ops = Pager({f: columns[f] for f in OP_FIELDS}, "time_us")
        # the ops that allocated a buffer at the peak, by name (a dict of every op would cost more)
        wanted = set(trace.peak_buffers.column("op"))
        self._of_op = {names[i]: (layers[i], phases[i]) for i in range(len(names)) if names[i] in wanted}
        state = resident(trace, breakdown)
        self._not_held = not_held(trace, breakdown)
        self.peak = peak_by_category(trace, state, self._not_held)
        self.peak_notes = peak_notes(trace, state, self.peak)
        # as answers carry it: built once
        self.layer_table = self._layer_table(layers, phases, time_us, calls, new_bytes, alloc_bytes)

    def _layer_of(self, op: str) -> str:
        return self._of_op.get(op, ("", ""))[0]

    def _layer_table(self, layers: List[str], phases: List[str], time_us: List[float], calls: List[int],
                     new_bytes: List[Optional[int]], alloc_bytes: List[Optional[int]]) -> Dict[str, Any]:
        """One row per layer of the model (composites summing their sublayers, each figure counted
        once: ``layer_tree``) and one per phase for ops on no layer. Output and allocated bytes add
        known figures only: ``unknown_output_ops`` / ``unknown_alloc_ops`` count the rest, and a
        row with nothing known is None. A phase's time per layer is None where none of its ops
        was placed on a layer (``unplaced_time_us`` in the summary holds it)."""
        per_layer, per_group, placed = _sum_ops(layers, phases, time_us, calls, new_bytes, alloc_bytes)
        self._add_peak_buffers(per_layer, per_group)
        self.unplaced_time_us = {phase: agg["time_us"] for phase, agg in per_group.items() if phase in _PHASE_KEYS}
        self.joined_time_us = sum(agg["time_us"] for p, agg in per_layer.items() if p and p in self.tree)
        self.leaf_time_us = sum(agg["time_us"] for p, agg in per_layer.items()
                                if p and p in self.tree and not self.tree.children[p])
        tree = self._layer_rows(per_layer)
        columns = tree["columns"]
        for phase in _PHASE_KEYS:  # none of this phase's ops is on a layer: per layer, it is unknown
            if self.unplaced_time_us.get(phase) and not placed.get(phase):
                columns[f"{phase}_time_us"] = [None] * tree["length"]
        if self.trace.compiled_layers:  # a layer no op names ran inside a torch.compile graph: unknown, never 0
            opaque = [i for i, ops in enumerate(columns["ops"]) if not ops]
            for field in _OP_FIGURES + tuple(f"{p}_time_us" for p in _PHASE_KEYS):
                if field in columns:
                    columns[field] = [None if i in opaque else v for i, v in enumerate(columns[field])]
        if self.trace.allocations == "none":  # no allocator event: what was live at the peak is unknown
            for category in (ACTIVATIONS_CATEGORY, GRADIENTS_CATEGORY):
                columns[f"peak_{category}_bytes"] = [None] * tree["length"]
        if OPTIMIZER_SLOTS_CATEGORY in self._not_held:  # a weights-only breakdown: each layer's slots unknown
            columns["slot_bytes"] = [None] * tree["length"]
        return appended(tree, _group_rows(per_group, self.trace.allocations == "none"))

    def _add_peak_buffers(self, per_layer: Dict[str, Dict[str, Any]], per_group: Dict[str, Dict[str, Any]]) -> None:
        """Adds the activation and gradient buffers live at the peak to their op's layer (else its phase's group)."""
        for buffer_op, size, category in zip(self.trace.peak_buffers.column("op"),
                                             self.trace.peak_buffers.column("bytes"),
                                             self.trace.peak_buffers.column("category")):
            if category in (ACTIVATIONS_CATEGORY, GRADIENTS_CATEGORY):
                layer = self._layer_of(buffer_op)
                agg = per_layer[layer] if layer else per_group[self._of_op.get(buffer_op, ("", ""))[1]]
                agg[f"peak_{category}_bytes"] += size

    def _layer_rows(self, per_layer: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
        """The layer tree's rows (``layer_tree``'s columns) of each layer's own figures (a composite's
        are what its own ops and variables hold, never its sublayers' again), in model order: the
        breakdown's layers, else the ones the trace joined; then any other layer ops named."""
        storage = self.breakdown.layer_table["columns"] if self.breakdown else {}
        own = self.breakdown.layer_own if self.breakdown else {}
        at = self.breakdown.layer_at if self.breakdown else {}
        paths = list(own["name"]) if self.breakdown else list(self.trace.layers)
        listed = set(paths)
        paths += sorted(p for p in per_layer if p and p not in listed)
        zero = _zero_layer()

        def leaf(path: str) -> Dict[str, Any]:
            row = dict(per_layer.get(path) or zero)
            row["own_time_us"] = row["time_us"]
            i = at.get(path)
            row["weight_bytes"] = own["param_bytes"][i] if i is not None else 0  # parameters: not RNG state
            row["slot_bytes"] = own["bytes"][OPTIMIZER_SLOT][i] if i is not None else 0
            row["class_name"] = own["class_name"][i] or "" if i is not None else ""
            return row

        sums = ("time_us", "ops", "output_bytes", "alloc_bytes", "unknown_output_ops", "unknown_alloc_ops",
                "weight_bytes", "slot_bytes", f"peak_{ACTIVATIONS_CATEGORY}_bytes", f"peak_{GRADIENTS_CATEGORY}_bytes"
                ) + tuple(f"{p}_time_us" for p in _PHASE_KEYS)
        tree = layer_tree(paths, as_columns([leaf(path) for path in paths])["columns"], sums, floors=_FLOORS,
                          root=self.breakdown.root if self.breakdown else "")
        columns = tree["columns"]
        own_time = columns.get("own_time_us") or [None] * tree["length"]
        columns["own_time_us"] = [t or 0.0 for t in own_time]  # a composite no op names: none of its own
        in_storage = set(storage.get("layer", ()))
        columns["in_breakdown"] = [path in in_storage for path in columns["layer"]]
        for field in ("weight_bytes", "slot_bytes"):  # a layer no breakdown holds: unknown, never 0
            columns[field] = [v if known else None for v, known in zip(columns[field], columns["in_breakdown"])]
        return tree

    def summary(self, top: int = 12) -> Dict[str, Any]:
        trace = self.trace
        total = sum(trace.ops.column("time_us"))
        joined = self.joined_time_us
        return {
            "source": trace.source, "steps": trace.steps, "devices": trace.devices, "timed": trace.timed,
            "xla": trace.xla,
            "op_count": len(trace.ops), "total_time_us": total,
            # wall time from the first op's start to the last allocation event: what the Timeline spans
            "timeline_span_us": trace.timeline.t_us[-1] if trace.timed and trace.timeline.t_us else None,
            "join": {"compiled_layers": list(trace.compiled_layers),  # ran as torch.compile graphs
                     "joined_time_us": joined, "fraction": joined / total if total else None,
                     # on a leaf layer: an op on a composite (the model's root) is placed less precisely
                     "leaf_time_us": self.leaf_time_us, "leaf_fraction": self.leaf_time_us / total if total else None,
                     "unplaced_time_us": self.unplaced_time_us,
                     "vocabulary": "breakdown" if self.breakdown else ("trace" if self.tree.children[""] else "none"),
                     # the trace's own modules the breakdown does not name (kept apart, not re-placed)
                     "unmatched_layers": len(self.unmatched_layers), "unmatched_examples": self.unmatched_layers[:3],
                     # ops that say where the training script traced them (an XLA program's Python frames)
                     "traced_at_ops": sum(1 for source in trace.ops.column("source") if source)},
            "peak_bytes": self.peak["total"], "peak_time_us": trace.peak_time_us,
            "peak_by_category": self.peak, "peak_notes": self.peak_notes, "allocations": trace.allocations,
            "allocations_note": trace.allocations_note, "allocators": trace.allocators,
            "layers": self.layer_table,
            "top_time": self.ops.rows(self._top("time_us", top), ("name", "time_us", "layer")),
            "top_bytes": self.ops.rows(self._top("new_bytes", top), ("name", "new_bytes", "layer")),
            "top_device": self.top_device,
        }

    @functools.cached_property
    def top_device(self) -> Optional[str]:
        """The device whose ops the top lists show when ops ran on several devices (an XLA step spread over
        devices runs the same instructions on each: listed once, not once per device): the one with the
        most op time; None on one device, or where the host's ops are among them."""
        devices = self.trace.ops.column("device")
        if len(set(devices)) < 2 or not all(d.startswith("/device:") for d in devices):
            return None
        time: Dict[str, float] = collections.defaultdict(float)
        for device, spent in zip(devices, self.trace.ops.column("time_us")):
            time[device] += spent or 0.0
        return max(time, key=lambda device: time[device])

    def _top(self, key: str, n: int) -> List[int]:
        """The rows of the ``n`` largest ``key`` figures (of ``top_device``'s rows, when there is one)."""
        if self.top_device is None:
            return self.ops.top(key, n)
        values, devices = self.ops.columns[key], self.trace.ops.column("device")
        mine = [i for i, device in enumerate(devices) if device == self.top_device]
        return [i for i in heapq.nlargest(n, mine, key=lambda i: values[i] or 0) if (values[i] or 0) > 0]

    def _buffer_category(self, category: str) -> str:
        """A buffer from before the window is an earlier step's where the split names those, else unattributed."""
        if category != BEFORE_WINDOW:
            return category
        return EARLIER_STEPS_CATEGORY if self.peak.get(EARLIER_STEPS_CATEGORY) else UNATTRIBUTED_CATEGORY

    def timeline(self) -> Dict[str, Any]:
        """Bytes in use over the trace stacked by category, the peak marked, and the buffers in use at it."""
        t = self.trace.timeline
        by_category = stacks(self.trace, self.peak)
        buffers = self.trace.peak_buffers
        listed = list(range(min(len(buffers), MAX_BUFFERS)))
        rows = [{"op": buffers.column("op")[i], "layer": self._layer_of(buffers.column("op")[i]),
                 "bytes": buffers.column("bytes")[i], "shape": buffers.column("shape")[i],
                 "dtype": buffers.column("dtype")[i], "region": buffers.column("region")[i],
                 "category": self._buffer_category(buffers.column("category")[i]),
                 "bytes_source": buffers.column("bytes_source")[i],
                 "requested_bytes": buffers.column("requested_bytes")[i]} for i in listed]
        return {"t_us": t.t_us, "bytes": t.bytes, "op": t.op, "stacks": by_category, "peak_bytes": self.peak["total"],
                "peak_time_us": self.trace.peak_time_us, "counts_resident": self.trace.counts_resident,
                "buffers": rows, "buffer_count": len(buffers), "peak_by_category": self.peak,
                "peak_notes": self.peak_notes,
                "allocations": self.trace.allocations, "allocations_note": self.trace.allocations_note,
                "handed_out": handed_out(buffers), "allocators": self.trace.allocators}


_PHASE_KEYS = (FORWARD, BACKWARD, OPTIMIZER, LOSS, METRICS)


# a byte figure summed over known values only, and the count of the values unknown beside it
_FLOORS = {"output_bytes": "unknown_output_ops", "alloc_bytes": "unknown_alloc_ops"}


# A layer's figures that come from its ops (a compiled graph's layers have none of their own: ``_layer_table``)
_OP_FIGURES = ("time_us", "own_time_us", "ops", "output_bytes", "alloc_bytes", f"peak_{ACTIVATIONS_CATEGORY}_bytes",
               f"peak_{GRADIENTS_CATEGORY}_bytes")


def _sum_ops(layers: List[str], phases: List[str], time_us: List[float], calls: List[int],
             new_bytes: List[Optional[int]], alloc_bytes: List[Optional[int]]
             ) -> Tuple[Dict[str, Dict[str, Any]], Dict[str, Dict[str, Any]], Dict[str, float]]:
    """The ops' figures summed per layer and, for ops on no layer, per phase group; and each
    phase's time spent on a layer."""
    per_layer: Dict[str, Dict[str, Any]] = collections.defaultdict(_zero_layer)
    per_group: Dict[str, Dict[str, Any]] = collections.defaultdict(_zero_layer)
    # One pass groups op indices by (layer or phase group, phase); the sums run in C over each group.
    groups: Dict[Tuple[str, str], List[int]] = collections.defaultdict(list)
    for i, key in enumerate(zip(layers, phases)):
        groups[key].append(i)
    unknown_outputs, unknown_allocs = None in new_bytes, None in alloc_bytes  # each scan in C
    known_bytes = [nb or 0 for nb in new_bytes] if unknown_outputs else cast(List[int], new_bytes)
    known_alloc = [a or 0 for a in alloc_bytes] if unknown_allocs else cast(List[int], alloc_bytes)
    placed: Dict[str, float] = collections.defaultdict(float)  # phase -> time on a layer
    for (layer, phase), indices in groups.items():
        agg = per_layer[layer] if layer else per_group[phase]
        spent = sum(map(time_us.__getitem__, indices))
        agg["time_us"] += spent
        agg["ops"] += sum(map(calls.__getitem__, indices))
        agg["output_bytes"] += sum(map(known_bytes.__getitem__, indices))
        if unknown_outputs:
            agg["unknown_output_ops"] += list(map(new_bytes.__getitem__, indices)).count(None)
        agg["alloc_bytes"] += sum(map(known_alloc.__getitem__, indices))
        if unknown_allocs:
            agg["unknown_alloc_ops"] += list(map(alloc_bytes.__getitem__, indices)).count(None)
        agg[f"{phase or 'other'}_time_us"] = agg.get(f"{phase or 'other'}_time_us", 0.0) + spent
        if layer:
            placed[phase] += spent
    return per_layer, per_group, placed


def _group_rows(per_group: Dict[str, Dict[str, Any]], no_allocations: bool) -> List[Dict[str, Any]]:
    """One row per phase group of ops on no layer, the most time first (peak bytes unknown
    where the trace has no allocator event)."""
    rows = [dict(agg, layer="", group=phase, label=_GROUP_LABEL.get(phase, f"({phase})"), depth=0, leaf=True,
                 weight_bytes=None, slot_bytes=None, class_name="", in_breakdown=False, own_time_us=agg["time_us"])
            for phase, agg in sorted(per_group.items(), key=lambda kv: -kv[1]["time_us"])]
    for row in rows:
        for field, count in _FLOORS.items():
            row[field] = unknown_where([row[field]], [row[count]])[0]
        if no_allocations:
            row.update({f"peak_{c}_bytes": None for c in (ACTIVATIONS_CATEGORY, GRADIENTS_CATEGORY)})
    return rows


def _zero_layer() -> Dict[str, Any]:
    row: Dict[str, Any] = {"time_us": 0.0, "ops": 0, "output_bytes": 0, "alloc_bytes": 0, "unknown_output_ops": 0,
                           "unknown_alloc_ops": 0, f"peak_{ACTIVATIONS_CATEGORY}_bytes": 0,
                           f"peak_{GRADIENTS_CATEGORY}_bytes": 0}
    return row


def _alloc_bytes(trace: OpTrace, sources: List[str]) -> List[Optional[int]]:
    """Each op's allocated bytes, None where the trace cannot tell: every op when it recorded no
    allocation; an op it recorded nothing for when it recorded only large allocations (TF's
    default CPU allocator). An allocator that records every allocation makes 0 a figure."""
    alloc = trace.ops.column("alloc_bytes")
    if trace.allocations == "none":
        return [None] * len(alloc)
    if trace.allocations == "all":
        return list(alloc)
    return [a if a or s == MEASURED else None for a, s in zip(alloc, sources)]
