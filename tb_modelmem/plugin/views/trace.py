"""A trace joined with one breakdown (or none): ops on the model's layer tree, the peak by
category, the timeline, and the ops as a pageable table."""

from __future__ import annotations

import collections
from typing import Any, Dict, List, Optional, Tuple

from tb_modelmem.plugin.views.breakdown import BreakdownView
from tb_modelmem.plugin.views.pager import Pager
from tb_modelmem.plugin.views.peak import peak_by_category, stacks
from tb_modelmem.plugin.views.trees import appended, as_columns, layer_tree
from tb_modelmem.rules.join import Joiner, LayerTree, Vocabulary, phase_by_name
from tb_modelmem.schema.names import (
    ACTIVATIONS,
    BACKWARD,
    BEFORE_WINDOW,
    EXECUTOR,
    FORWARD,
    GRADIENTS,
    INPUT,
    LOSS,
    MEASURED,
    METRICS,
    NON_TRAINABLE,
    OPTIMIZER,
    OPTIMIZER_SLOT,
    UNATTRIBUTED,
    UNKNOWN_BYTES,
    WEIGHT,
)
from tb_modelmem.schema.records import OpTrace

# Ops whose output is a view of an existing buffer (a variable, an input): no new bytes.
ALIASING_OPS = frozenset({"ReadVariableOp", "Identity", "Reshape", "Squeeze", "ExpandDims", "_Arg", "_Retval",
                          "VarHandleOp", "Const", "NoOp", "StopGradient"})
MAX_BUFFERS = 5000  # buffers at the peak listed in one answer (the largest; the rest are counted)
_GROUP_LABEL = {FORWARD: "(forward, no layer)", BACKWARD: "(backward, no layer)", OPTIMIZER: "(optimizer)",
                LOSS: "(loss)", METRICS: "(metrics)", INPUT: "(input)", EXECUTOR: "(executor)", "": "(unattributed)"}
OP_FIELDS = ("name", "op_type", "layer", "phase", "device", "calls", "time_us", "mean_us", "output_bytes",
             "output_shape", "output_dtype", "bytes_source", "alloc_bytes", "new_bytes", "fused")


class TraceView:
    """A trace joined with one breakdown (or none): ops on the model's layer tree, the peak by
    category, and the ops as a pageable table."""

    def __init__(self, trace: OpTrace, breakdown: Optional[BreakdownView]) -> None:
        self.trace = trace
        self.breakdown = breakdown
        ops = trace.ops
        names, types = ops.column("name"), ops.column("op_type")
        phases = [p or phase_by_name(n, t) for p, n, t in zip(ops.column("phase"), names, types)]
        vocabulary = breakdown.vocabulary if breakdown else Vocabulary(
            trace.layers or sorted({layer for layer in ops.column("layer") if layer}))
        self.tree = LayerTree(vocabulary.layers)
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
        new_bytes = [0 if t in ALIASING_OPS or (s == MEASURED and a == 0) else None if s == UNKNOWN_BYTES else o
                     for t, s, o, a in zip(types, ops.column("bytes_source"), ops.column("output_bytes"),
                                           ops.column("alloc_bytes"))]
        columns = dict(ops.columns)
        columns.update(layer=layers, phase=phases, new_bytes=new_bytes,
                       mean_us=[t / c if c else 0.0 for t, c in zip(time_us, calls)])
        # new_bytes: output bytes the op newly allocated (None when unknown); measured ops that got no
        # allocation, and aliasing ops (a ReadVariableOp "outputs" the whole kernel), add nothing
        self.ops = Pager({f: columns[f] for f in OP_FIELDS}, "time_us")
        # the ops that allocated a buffer at the peak, by name (a dict of every op would cost more)
        wanted = set(trace.peak_buffers.column("op"))
        self._of_op = {names[i]: (layers[i], phases[i]) for i in range(len(names)) if names[i] in wanted}
        self.peak = peak_by_category(trace, breakdown)
        # as answers carry it: built once
        self.layer_table = self._layer_table(layers, phases, time_us, calls, new_bytes, ops.column("alloc_bytes"))

    def _layer_of(self, op: str) -> str:
        return self._of_op.get(op, ("", ""))[0]

    def _layer_table(self, layers: List[str], phases: List[str], time_us: List[float], calls: List[int],
                     new_bytes: List[Optional[int]], alloc_bytes: List[int]) -> Dict[str, Any]:
        per_layer: Dict[str, Dict[str, Any]] = collections.defaultdict(_zero_layer)
        per_group: Dict[str, Dict[str, Any]] = collections.defaultdict(_zero_layer)
        # One pass groups op indices by (layer or phase group, phase); the sums run in C over each group.
        groups: Dict[Tuple[str, str], List[int]] = collections.defaultdict(list)
        for i, key in enumerate(zip(layers, phases)):
            groups[key].append(i)
        known_bytes = [nb or 0 for nb in new_bytes]
        for (layer, phase), indices in groups.items():
            agg = per_layer[layer] if layer else per_group[phase]
            spent = sum(map(time_us.__getitem__, indices))
            agg["time_us"] += spent
            agg["ops"] += sum(map(calls.__getitem__, indices))
            agg["output_bytes"] += sum(map(known_bytes.__getitem__, indices))
            agg["unknown_output_ops"] += sum(1 for i in indices if new_bytes[i] is None)  # output_bytes is a floor
            agg["alloc_bytes"] += sum(map(alloc_bytes.__getitem__, indices))
            agg[f"{phase or 'other'}_time_us"] = agg.get(f"{phase or 'other'}_time_us", 0.0) + spent
        for buffer_op, size, category in zip(self.trace.peak_buffers.column("op"),
                                             self.trace.peak_buffers.column("bytes"),
                                             self.trace.peak_buffers.column("category")):
            if category in (ACTIVATIONS, GRADIENTS):
                layer = self._layer_of(buffer_op)
                agg = per_layer[layer] if layer else per_group[self._of_op.get(buffer_op, ("", ""))[1]]
                agg[f"peak_{category}_bytes"] += size
        storage = self.breakdown.layer_table["columns"] if self.breakdown else {}
        at = {path: i for i, path in enumerate(storage.get("layer", ()))}  # every row of the storage tree
        # model order: the breakdown's layers, else the ones the trace joined; then any other layer ops named
        paths = ([p for p, leaf in zip(storage["layer"], storage["leaf"]) if leaf] if self.breakdown
                 else list(self.trace.layers))
        listed = set(paths)
        paths += sorted(p for p in per_layer if p and p not in listed)
        self.joined_time_us = sum(agg["time_us"] for p, agg in per_layer.items() if p and p in self.tree)

        def leaf(path: str) -> Dict[str, Any]:
            row = dict(per_layer.get(path) or _zero_layer())
            i = at.get(path)
            role_bytes = {role: values[i] or 0 for role, values in storage["bytes"].items()} if i is not None else {}
            row["weight_bytes"] = role_bytes.get(WEIGHT, 0) + role_bytes.get(NON_TRAINABLE, 0)
            row["slot_bytes"] = role_bytes.get(OPTIMIZER_SLOT, 0)
            row["class_name"] = storage["class_name"][i] or "" if i is not None else ""
            return row

        sums = ("time_us", "ops", "output_bytes", "alloc_bytes", "unknown_output_ops", "weight_bytes", "slot_bytes",
                f"peak_{ACTIVATIONS}_bytes", f"peak_{GRADIENTS}_bytes") + tuple(f"{p}_time_us" for p in _PHASE_KEYS)
        tree = layer_tree(paths, as_columns([leaf(path) for path in paths])["columns"], sums)
        tree["columns"]["in_breakdown"] = [path in at for path in tree["columns"]["layer"]]
        group_rows = [dict(agg, layer="", group=phase, label=_GROUP_LABEL.get(phase, f"({phase})"), depth=0, leaf=True,
                       weight_bytes=0, slot_bytes=0, class_name="", in_breakdown=False)
                  for phase, agg in sorted(per_group.items(), key=lambda kv: -kv[1]["time_us"])]
        return appended(tree, group_rows)

    def summary(self, top: int = 12) -> Dict[str, Any]:
        trace = self.trace
        total = sum(trace.ops.column("time_us"))
        joined = self.joined_time_us
        return {
            "source": trace.source, "steps": trace.steps, "devices": trace.devices, "timed": trace.timed,
            "xla": trace.xla,
            "op_count": len(trace.ops), "total_time_us": total,
            "join": {"joined_time_us": joined, "fraction": joined / total if total else None,
                     "vocabulary": "breakdown" if self.breakdown else ("trace" if self.tree.children[""] else "none")},
            "peak_bytes": self.peak["total"], "peak_time_us": trace.peak_time_us,
            "peak_by_category": self.peak, "allocations": trace.allocations,
            "allocations_note": trace.allocations_note, "allocators": trace.allocators,
            "layers": self.layer_table,
            "top_time": self.ops.rows(self.ops.top("time_us", top), ("name", "time_us", "layer")),
            "top_bytes": self.ops.rows(self.ops.top("new_bytes", top), ("name", "new_bytes", "layer")),
        }

    def timeline(self) -> Dict[str, Any]:
        """Bytes in use over the trace stacked by category, the peak marked, and the buffers in use at it."""
        t = self.trace.timeline
        by_category = stacks(self.trace, self.peak)
        buffers = self.trace.peak_buffers
        listed = list(range(min(len(buffers), MAX_BUFFERS)))
        rows = [{"op": buffers.column("op")[i], "layer": self._layer_of(buffers.column("op")[i]),
                 "bytes": buffers.column("bytes")[i], "shape": buffers.column("shape")[i],
                 "dtype": buffers.column("dtype")[i], "region": buffers.column("region")[i],
                 "category": _buffer_category(buffers.column("category")[i]),
                 "bytes_source": buffers.column("bytes_source")[i]} for i in listed]
        return {"t_us": t.t_us, "bytes": t.bytes, "op": t.op, "stacks": by_category, "peak_bytes": self.peak["total"],
                "peak_time_us": self.trace.peak_time_us, "counts_resident": self.trace.counts_resident,
                "buffers": rows, "buffer_count": len(buffers), "peak_by_category": self.peak,
                "allocations": self.trace.allocations, "allocations_note": self.trace.allocations_note}


_PHASE_KEYS = (FORWARD, BACKWARD, OPTIMIZER, LOSS, METRICS)


def _zero_layer() -> Dict[str, Any]:
    row: Dict[str, Any] = {"time_us": 0.0, "ops": 0, "output_bytes": 0, "alloc_bytes": 0, "unknown_output_ops": 0,
                           f"peak_{ACTIVATIONS}_bytes": 0, f"peak_{GRADIENTS}_bytes": 0}
    return row


def _buffer_category(category: str) -> str:
    return UNATTRIBUTED if category == BEFORE_WINDOW else category
