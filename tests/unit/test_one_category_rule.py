"""One category rule for every reader that knows a buffer's lifetime (``rules.buffers.lived_categories``): a
PyTorch profiler trace and a memory snapshot of the same step, written inline (no torch), put every buffer
live at the peak in the same category, and that category is what each buffer was made to be."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import pytest

from tb_modelmem.readers import torch_snapshot, torch_trace
from tb_modelmem.schema.names import BACKWARD, FORWARD, OPTIMIZER

# Where torch's code allocates in each phase, as a snapshot's frames show it (``torch_snapshot.site_of``).
_FRAMES = {FORWARD: "/py/torch/nn/modules/conv.py", BACKWARD: "/py/torch/autograd/graph.py",
           OPTIMIZER: "/py/torch/optim/adam.py"}
_OPS = {FORWARD: "aten::conv2d", BACKWARD: "autograd::engine::evaluate_function: ConvolutionBackward0",
        OPTIMIZER: "aten::mul"}

# (name, phase, bytes, allocated at, freed at or None, what it is): one step, its peak in the backward pass
BACKWARD_PEAK = [
    ("saved_for_backward", FORWARD, 4000, 10, 45, "activations"),
    ("forward_scratch", FORWARD, 300, 12, 14, "temporaries"),
    ("intermediate_gradient", BACKWARD, 2000, 30, 38, "temporaries"),
    ("weight_gradient", BACKWARD, 1000, 34, None, "gradients"),
    ("first_layers_weight_gradient", BACKWARD, 500, 40, None, "gradients"),  # the pass goes on after 38
    ("adam_scratch", OPTIMIZER, 200, 50, 52, "optimizer_temporaries"),
]
# a forward buffer freed before the backward pass, big enough to be the peak: no activation
FORWARD_PEAK = [
    ("saved_for_backward", FORWARD, 400, 10, 45, "activations"),
    ("forward_scratch", FORWARD, 9000, 12, 14, "temporaries"),
    ("weight_gradient", BACKWARD, 100, 34, None, "gradients"),
]


def _trace(step: List[Tuple[Any, ...]]) -> Dict[str, Any]:
    events: List[Dict[str, Any]] = []
    seq = {FORWARD: 1, BACKWARD: 1}
    for i, (_, phase, size, start, end, _what) in enumerate(step):
        args: Dict[str, Any] = {"Sequence number": seq[phase]} if phase in seq else {}
        events.append({"ph": "X", "cat": "cpu_op", "name": _OPS[phase], "pid": 1, "tid": 1, "ts": start - 0.5,
                       "dur": 1.0, "args": args})
        for ts, delta in [(start, size)] + ([(end, -size)] if end is not None else []):
            events.append({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
                           "args": {"Bytes": delta, "Addr": 1000 * (i + 1), "Device Type": 1, "Device Id": 0}})
    if any(p == OPTIMIZER for _, p, *_ in step):
        events.append({"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#Adam.step", "pid": 1,
                       "tid": 1, "ts": 49, "dur": 10})
    return {"traceEvents": events}


def _snapshot(step: List[Tuple[Any, ...]]) -> Dict[str, Any]:
    moments = []
    for i, (_, phase, size, start, end, _what) in enumerate(step):
        frames = [{"filename": _FRAMES[phase], "line": 1, "name": "forward"},
                  {"filename": "/home/me/train.py", "line": 40 + i, "name": "train_step"}]
        moments.append((start, {"action": "alloc", "addr": 1000 * (i + 1), "size": size, "frames": frames}))
        if end is not None:
            moments.append((end, {"action": "free_requested", "addr": 1000 * (i + 1), "size": size, "frames": []}))
    entries = [dict(entry, time_us=t) for t, entry in sorted(moments, key=lambda m: m[0])]
    live = [{"size": size, "state": "active_allocated", "address": 1000 * (i + 1), "frames": []}
            for i, (_, _, size, _, end, _) in enumerate(step) if end is None]
    return {"segments": [{"device": 0, "total_size": 1 << 20, "blocks": live}], "device_traces": [entries]}


def _live_at_peak(step: List[Tuple[Any, ...]]) -> Dict[int, str]:
    """bytes -> what it is, of the buffers live at the step's highest count (frees before allocations at a time)."""
    moments = sorted([(start, 1, i) for i, (_, _, _, start, _, _) in enumerate(step)]
                     + [(end, 0, i) for i, (_, _, _, _, end, _) in enumerate(step) if end is not None])
    live: set = set()
    best: Tuple[int, set] = (0, set())
    for _, allocated, i in moments:
        (live.add if allocated else live.discard)(i)
        total = sum(step[j][2] for j in live)
        if total > best[0]:
            best = (total, set(live))
    return {step[i][2]: step[i][5] for i in best[1]}


@pytest.mark.parametrize("step", [BACKWARD_PEAK, FORWARD_PEAK], ids=["backward_peak", "forward_peak"])
def test_a_trace_and_a_snapshot_of_one_step_categorise_each_buffer_alike(step):
    by_trace = torch_trace.reduce_trace(_trace(step))
    by_snapshot = torch_snapshot.reduce_snapshot(_snapshot(step))
    assert by_trace.peak_bytes == by_snapshot.peak_bytes
    made = _live_at_peak(step)
    for reduced in (by_trace, by_snapshot):
        found = sorted(zip(reduced.peak_buffers.column("bytes"), reduced.peak_buffers.column("category")))
        assert found == sorted(made.items()), reduced.source
