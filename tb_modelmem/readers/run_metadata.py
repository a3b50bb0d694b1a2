"""Reduce a RunMetadata's step stats to an OpTrace: one row per op plus bytes in use over time.

No TensorFlow import: the plugin backend runs this on old log dirs written by plain
``FileWriter.add_run_metadata``, so it reads TensorBoard's copies of the protos. The
op-naming helpers here (kernel -> fused ops, shapes) are shared with
``readers.xspace`` so both sources read the same way.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from google.protobuf.message import DecodeError
from tensorboard.compat.proto import config_pb2, step_stats_pb2

from tb_modelmem.readers.allocator_replay import Event, replay
from tb_modelmem.readers.dtypes import dtype_name
from tb_modelmem.rules.buffers import format_shape, step_category
from tb_modelmem.rules.join import Joiner, OpGraph, Vocabulary
from tb_modelmem.schema.names import MEASURED
from tb_modelmem.schema.records import BufferTable, OpRecord, OpTable, OpTrace

# "[mklcpu 0.1MB 0.1MB] scope/Relu = _MklNativeFusedConv2D(in0, in1, in2)"
_LABEL = re.compile(r"^(?:\[[^\]]*\]\s*)?(?P<name>.+?) = (?P<op>[^(\s]+)\((?P<args>.*)\)\s*$")
# Kernels that stand for Conv/MatMul + BiasAdd (+ an activation named by the node).
_FUSABLE = {"Conv2D", "Conv3D", "MatMul", "BatchMatMulV2", "DepthwiseConv2dNative"}
# Ops grappler folds after the BiasAdd; the fused node keeps the last op's name.
_FUSED_TAILS = {"Relu", "Relu6", "Elu", "LeakyRelu", "Tanh", "Sigmoid", "Selu", "Softplus", "Swish",
                "Gelu", "Mish", "Add", "AddV2"}


def reduce_run_metadata(run_metadata: Any, graphs: Sequence[OpGraph] = (),
                        vocabulary: Optional[Vocabulary] = None) -> OpTrace:
    """Per-op table of one traced step from a RunMetadata with FULL_TRACE step stats.

    ``run_metadata``: a ``tf.compat.v1.RunMetadata``, TensorBoard's ``config_pb2.RunMetadata``
    or its serialized bytes. Rows are keyed by (node, device) and aggregated over calls:
    ``time_us`` sums the calls, ``output_bytes`` and ``alloc_bytes`` are the largest call.
    Each op's layer and phase come from ``tb_modelmem.rules.join`` (``graphs``: the session's graph,
    when the caller has it; ``vocabulary``: the model's layers). The timeline counts the bytes
    allocated during the step from 0 at its start, so memory held before the step (weights,
    slots) is not in it (``counts_resident`` is False). Raises ValueError for a RunMetadata
    without step stats.
    """
    rm = _as_run_metadata(run_metadata)
    if not rm.step_stats.dev_stats:
        raise ValueError("this RunMetadata has no step stats: run the step with RunOptions(trace_level=FULL_TRACE); "
                         "TF2 trace_export keeps its profile in <logdir>/plugins/profile/*/*.xplane.pb")
    exact_fused = _fused_from_partition_graphs(rm)
    dev_stats = _without_duplicate_streams(rm.step_stats.dev_stats)
    joiner = Joiner(vocabulary or Vocabulary([]), graphs, (n.node_name for d in dev_stats for n in d.node_stats))
    start = min((n.all_start_micros for d in dev_stats for n in d.node_stats if n.all_start_micros),
                default=0)
    rows: Dict[Tuple[str, str], OpRecord] = {}
    events: List[Event] = []
    node_peak = (0, 0.0)
    for dev in dev_stats:
        for node in dev.node_stats:
            op_type, fused = _kernel(node, exact_fused)
            out_bytes, shape, dtype = _outputs(node)
            alloc = sum(m.total_bytes for m in node.memory)
            key = (node.node_name, dev.device)
            row = rows.get(key)
            if row is None:
                layer, phase = joiner.assign(node.node_name, op_type)
                row = rows[key] = OpRecord(
                    name=node.node_name, op_type=op_type, layer=layer, phase=phase, device=dev.device,
                    calls=0, output_shape=shape, output_dtype=dtype, bytes_source=MEASURED, fused=fused)
            row.calls += 1
            row.time_us += _time_us(node)
            if out_bytes >= row.output_bytes:
                row.output_bytes, row.output_shape, row.output_dtype = out_bytes, shape, dtype
            row.alloc_bytes = max(row.alloc_bytes, alloc)
            category = step_category(row.phase)
            for mem in node.memory:
                events.extend(Event(t_us=float(r.alloc_micros - start), delta=r.alloc_bytes,
                                    key=(mem.allocator_name, node.node_name), op=node.node_name, category=category,
                                    shape=row.output_shape, dtype=row.output_dtype, allocator=mem.allocator_name)
                              for r in mem.allocation_records)
                if mem.peak_bytes > node_peak[0]:
                    node_peak = (mem.peak_bytes, float(node.all_start_micros - start))
    replayed = replay(events)
    peak_bytes, peak_time = ((replayed.peak_bytes, replayed.peak_time_us) if replayed.timeline.t_us
                             else node_peak)
    return OpTrace(source="run_metadata", ops=OpTable.by_name(rows.values()), peak_bytes=int(peak_bytes),
                   peak_time_us=float(peak_time), timeline=replayed.timeline,
                   devices=sorted({d.device for d in dev_stats}), steps=1, counts_resident=False,
                   peak_buffers=BufferTable.from_rows(replayed.peak_buffers), allocators=replayed.allocators,
                   layers=list(joiner.vocabulary.layers))


def fused_ops(kernel: str, node_name: str) -> List[str]:
    """The graph ops a rewritten kernel (oneDNN, grappler remapper) stands for; [] for plain ops.

    The kernel name alone says the base op; the node keeps the name of the last op folded
    into it, which names the activation (``conv2d/Relu = _MklNativeFusedConv2D``).
    """
    core = kernel.lstrip("_")
    if not core.startswith(("Mkl", "Fused")) or core == kernel:  # plain ops, _Arg, _Retval, ...
        return []
    for prefix in ("Mkl", "Native"):
        core = core[len(prefix):] if core.startswith(prefix) else core
    if core.startswith("Fused") and core[len("Fused"):] in _FUSABLE:
        ops = [core[len("Fused"):], "BiasAdd"]
        tail = re.sub(r"_\d+$", "", node_name.rpartition("/")[2])
        return ops + [tail] if tail in _FUSED_TAILS else ops
    if core.endswith("WithBias"):
        return [core[:-len("WithBias")], "BiasAddGrad"]
    return [core]


def _as_run_metadata(run_metadata: Any) -> config_pb2.RunMetadata:
    if isinstance(run_metadata, config_pb2.RunMetadata):
        return run_metadata
    if isinstance(run_metadata, (bytes, bytearray, memoryview)):
        data = bytes(run_metadata)
    elif hasattr(run_metadata, "SerializeToString"):  # TensorFlow's own RunMetadata class
        data = run_metadata.SerializeToString()
    else:
        raise TypeError(f"expected a RunMetadata proto or its bytes, got {type(run_metadata).__name__}")
    try:
        return config_pb2.RunMetadata.FromString(data)
    except DecodeError:
        raise ValueError("not a serialized RunMetadata (corrupt or foreign bytes)") from None


def _without_duplicate_streams(dev_stats: Sequence[step_stats_pb2.DeviceStepStats]
                               ) -> List[step_stats_pb2.DeviceStepStats]:
    """GPU traces list each kernel under ".../stream:all" and again under ".../stream:N": keep one."""
    merged = {d.device.rpartition("/stream:")[0] for d in dev_stats if d.device.endswith("/stream:all")}
    return [d for d in dev_stats
            if "/stream:" not in d.device or d.device.endswith("/stream:all")
            or d.device.rpartition("/stream:")[0] not in merged]


def _fused_from_partition_graphs(rm: config_pb2.RunMetadata) -> Dict[str, List[str]]:
    """Exact ``fused_ops`` attrs when the run also asked for partition graphs."""
    fused: Dict[str, List[str]] = {}
    for graph in rm.partition_graphs:
        for node in graph.node:
            if "fused_ops" in node.attr:
                base = fused_ops(node.op, node.name)[:1]
                fused[node.name] = base + [s.decode() for s in node.attr["fused_ops"].list.s]
    return fused


def _kernel(node: step_stats_pb2.NodeExecStats, exact_fused: Dict[str, List[str]]) -> Tuple[str, List[str]]:
    match = _LABEL.match(node.timeline_label)
    if not match:
        return "", []
    op = match.group("op")
    return op, exact_fused.get(node.node_name) or fused_ops(op, node.node_name)


def _outputs(node: step_stats_pb2.NodeExecStats) -> Tuple[int, str, str]:
    """Total output bytes and the shapes/dtypes that explain them ("a;b" for several outputs)."""
    total, shapes, dtypes = 0, [], []
    for out in sorted(node.output, key=lambda o: o.slot):
        desc = out.tensor_description
        alloc = desc.allocation_description
        total += alloc.requested_bytes or alloc.allocated_bytes
        shapes.append(format_shape(d.size for d in desc.shape.dim) if not desc.shape.unknown_rank else "?")
        dtype = dtype_name(desc.dtype)
        dtypes += [] if dtype in dtypes else [dtype]
    return total, ";".join(shapes), ";".join(dtypes)


def _time_us(node: step_stats_pb2.NodeExecStats) -> float:
    """Wall time of one call in the executor, at nanosecond resolution when recorded."""
    if node.all_end_rel_nanos or node.all_end_rel_micros:
        return node.all_end_rel_nanos / 1000.0 if node.all_end_rel_nanos else float(node.all_end_rel_micros)
    if node.op_end_rel_nanos:
        return (node.op_end_rel_nanos - node.op_start_rel_nanos) / 1000.0
    return float(node.op_end_rel_micros - node.op_start_rel_micros)
