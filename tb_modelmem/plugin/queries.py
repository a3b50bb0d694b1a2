"""Aggregations the tab shows, computed from decoded records. Pure functions, no I/O."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Dict, List, Optional

from tb_modelmem.records import (
    MEASURED, NON_TRAINABLE, OPTIMIZER_SLOT, WEIGHT, Breakdown, LoadBench, OpRecord, OpTrace, bytes_by_role,
)
from tb_modelmem.rollup import layer_rollup

ACTIVATIONS = "activations"
# Ops whose output is a view of an existing buffer (a variable, an input): no new bytes.
ALIASING_OPS = frozenset({"ReadVariableOp", "Identity", "Reshape", "Squeeze", "ExpandDims", "_Arg", "_Retval",
                          "VarHandleOp", "Const", "NoOp", "StopGradient"})
UNATTRIBUTED = "unattributed"


def breakdown_view(record: Breakdown) -> Dict[str, Any]:
    totals = bytes_by_role(record.variables)
    variables = []
    for v in record.variables:
        row = v.to_dict()
        row["params"] = v.params
        variables.append(row)
    return {
        "source": record.source,
        "model_name": record.model_name,
        "optimizer": record.optimizer,
        "file_bytes": record.file_bytes,
        "overhead": record.overhead,
        "totals": totals,
        "total_bytes": sum(totals.values()),
        "total_params": sum(v.params for v in record.variables if v.role in (WEIGHT, NON_TRAINABLE)),
        "layers": layer_rollup(record),
        "variables": variables,
    }


def _match_layer(op_layer: str, layer_names: List[str]) -> Optional[str]:
    """The breakdown layer an op's name scope belongs to (scopes may carry outer prefixes)."""
    if not op_layer:
        return None
    for name in layer_names:
        if op_layer == name or op_layer.endswith("/" + name) or name.endswith("/" + op_layer):
            return name
    # gradients/conv1/Conv2D_grad, Adam/update_conv1/kernel: a scope component names the layer
    parts = [p[len("update_"):] if p.startswith("update_") else p for p in op_layer.split("/")]
    for name in layer_names:
        if name.split("/")[-1] in parts:
            return name
    return None


def _new_bytes(op: OpRecord) -> int:
    """Output bytes the op newly allocated: measured ops that got no allocation, and
    aliasing ops (a ReadVariableOp "outputs" the whole kernel), add nothing."""
    if op.op_type in ALIASING_OPS or (op.bytes_source == MEASURED and op.alloc_bytes == 0):
        return 0
    return op.output_bytes


def ops_view(trace: OpTrace, breakdown: Optional[Breakdown] = None) -> Dict[str, Any]:
    """Per-op table, per-layer join with weights/slots, and what is live at the peak."""
    ops = []
    for op in trace.ops:
        row = op.to_dict()
        row["mean_us"] = op.time_us / op.calls if op.calls else 0.0
        row["new_bytes"] = _new_bytes(op)
        ops.append(row)
    layers = layer_rollup(breakdown) if breakdown else []
    names = [row["name"] for row in layers]
    joined: Dict[str, Dict[str, Any]] = defaultdict(lambda: {"time_us": 0.0, "output_bytes": 0, "alloc_bytes": 0,
                                                             "ops": 0})
    for op in trace.ops:
        key = _match_layer(op.layer, names) or (op.layer.split("/")[0] if op.layer else "(no layer)")
        agg = joined[key]
        agg["time_us"] += op.time_us
        agg["output_bytes"] += _new_bytes(op)
        agg["alloc_bytes"] += op.alloc_bytes
        agg["ops"] += op.calls
    by_name = {row["name"]: row for row in layers}
    layer_rows = []
    for key in names + sorted(k for k in joined if k not in by_name):
        agg = joined.get(key, {"time_us": 0.0, "output_bytes": 0, "alloc_bytes": 0, "ops": 0})
        storage = by_name.get(key, {"bytes": {}})["bytes"]
        layer_rows.append({"layer": key, "weight_bytes": storage.get(WEIGHT, 0) + storage.get(NON_TRAINABLE, 0),
                           "slot_bytes": storage.get(OPTIMIZER_SLOT, 0), **agg})
    return {
        "source": trace.source,
        "steps": trace.steps,
        "devices": trace.devices,
        "peak_bytes": trace.peak_bytes,
        "peak_time_us": trace.peak_time_us,
        "timeline": trace.timeline,
        "ops": ops,
        "layers": layer_rows,
        "peak_by_role": peak_by_role(trace, breakdown),
    }


def peak_by_role(trace: OpTrace, breakdown: Optional[Breakdown]) -> Dict[str, int]:
    """What is live at the peak: weights, slots, the step's activations/temporaries, the rest.

    The lowest bytes-in-use over the trace is what stays resident through the step;
    the peak minus it is what the step itself allocated (activations, gradients,
    temporaries). The TF2 profiler's counter includes weights and slots, so they are
    taken out of the resident bytes and what remains is ``unattributed``. RunMetadata
    counts only the step's own allocations (lowest point 0), so the run's weights and
    slots, from its breakdown, are added on top. Parts always sum to ``total``.
    """
    totals = bytes_by_role(breakdown.variables if breakdown else [])
    weights, slots = totals[WEIGHT] + totals[NON_TRAINABLE], totals[OPTIMIZER_SLOT]
    resident = min((int(point[1]) for point in trace.timeline), default=0)
    parts = {WEIGHT: weights, OPTIMIZER_SLOT: slots,
             ACTIVATIONS: max(trace.peak_bytes - resident, 0),
             UNATTRIBUTED: max(resident - weights - slots, 0)}
    parts["total"] = sum(parts.values())
    return parts


def loadbench_view(record: LoadBench) -> Dict[str, Any]:
    return {"model_name": record.model_name, "results": [r.to_dict() for r in record.results]}
