"""readers/allocator_replay.py: the replay of allocator records, checked against a plain running sum
written here (the reference), on hand-made traces and on random ones."""

from __future__ import annotations

import random
from typing import Dict, List, Tuple

import pytest

from tb_modelmem.readers import allocator_replay
from tb_modelmem.readers.allocator_replay import MAX_TIMELINE_POINTS, headline_allocators, replay
from tb_modelmem.schema.names import ACTIVATIONS_CATEGORY, BEFORE_WINDOW, GRADIENTS_CATEGORY


def Event(t_us: float, delta: int, key, **fields) -> allocator_replay.Event:
    """An allocator record; an allocation's category defaults to activations (a reducer always names one)."""
    if delta > 0:
        fields.setdefault("category", ACTIVATIONS_CATEGORY)
    return allocator_replay.Event(t_us, delta, key, **fields)


def _reference(events: List[allocator_replay.Event]) -> Tuple[int, Dict]:
    """Peak of the running sum (frees before allocations at one instant) and the bytes of each buffer
    in use just after the first event that reaches it: buffers allocated and not yet freed, plus
    buffers freed later that were allocated before the window."""
    ordered = sorted(events, key=lambda e: (e.t_us, e.delta))
    running, peak, at = 0, -1, -1
    for n, event in enumerate(ordered):
        running += event.delta
        if running > peak:
            peak, at = running, n
    live: Dict = {}
    for event in ordered[:at + 1]:
        live[event.key] = live.get(event.key, 0) + event.delta
    allocated = {e.key for e in ordered if e.delta > 0}
    for event in ordered[at + 1:]:
        if event.key not in allocated and event.key not in live:
            live[event.key] = -event.delta
    return peak, {k: v for k, v in live.items() if v > 0}


def test_the_peak_is_the_highest_running_sum_with_the_buffers_in_use_there():
    events = [Event(0, 100, "a", op="conv1"), Event(1, 50, "b", op="conv2"),
              Event(2, -100, "a"), Event(3, 30, "c", op="dense"), Event(4, -50, "b"), Event(5, -30, "c")]
    result = replay(events)
    assert result.peak_bytes == 150 and result.peak_time_us == 1
    assert sorted((b.op, b.bytes) for b in result.peak_buffers) == [("conv1", 100), ("conv2", 50)]
    assert result.timeline.bytes == [100, 150, 50, 80, 30, 0]
    assert result.timeline.op == ["conv1", "conv2", "conv1", "dense", "conv2", "dense"]


def test_a_free_and_an_allocation_at_one_instant_do_not_add_up():
    events = [Event(0, 100, "a"), Event(1, 100, "b"), Event(1, -100, "a"), Event(2, -100, "b")]
    assert replay(events).peak_bytes == 100


def test_a_buffer_freed_in_the_window_was_in_use_from_its_start():
    """A free with no allocation before it: a buffer allocated before the trace, counted from its start."""
    events = [Event(0, 10, "a", op="x"), Event(1, -40, "old", category=""), Event(2, -10, "a")]
    result = replay(events)
    by_category = result.timeline.by_category
    assert by_category[BEFORE_WINDOW][:2] == [40, 0]
    assert {(b.op, b.bytes, b.category) for b in result.peak_buffers} >= {("", 40, BEFORE_WINDOW)}


def test_a_variables_copy_holds_it_once_its_old_buffer_is_freed():
    """TensorFlow's copy-on-write, as seed 002's LeNet does it on BFC: AssignSubVariableOp writes conv2's kernel
    to a new buffer while the old value is still read, and the old buffer (from before the window) is freed
    later. From that free the copy is the variable's: resident, in no step column and not "before the
    window"; a copy of another size, or freed before any buffer is, stays the step's own."""
    events = [Event(1, 204, "copy", op="adam/AssignSubVariableOp_2", category="optimizer_temporaries", requested=200),
              Event(2, 96, "other", op="adam/AssignSubVariableOp_3", category="optimizer_temporaries", requested=96),
              Event(3, -204, "w", category="", requested=200),  # conv2's old kernel, allocated before the trace
              Event(4, -96, "other")]
    ordered = sorted(events, key=lambda e: (e.t_us, e.delta))
    moved = replay(events)
    columns = moved.timeline.by_category
    assert columns["optimizer_temporaries"] == [204, 300, 96, 0]  # the copy leaves them at the old one's free
    assert BEFORE_WINDOW not in columns  # the old buffer was the variable's, not an earlier step's
    copies = {("adam/AssignSubVariableOp_2", "optimizer_temporaries"),
              ("adam/AssignSubVariableOp_3", "optimizer_temporaries")}
    # at the peak (both copies alive) the old buffer is still the variable's
    assert {(b.op, b.category) for b in moved.peak_buffers} == copies | {("", "moved_state")}
    after = allocator_replay._in_use_at(ordered, 2, allocator_replay._moves(ordered))  # just after the old's free
    assert {(b.op, b.category) for b in after} == {("adam/AssignSubVariableOp_2", "moved_state"),
                                                   ("adam/AssignSubVariableOp_3", "optimizer_temporaries")}


def test_the_allocators_own_count_is_used_when_it_reports_one():
    """``in_use`` counts what was allocated before the window too: the peak is the allocator's."""
    events = [Event(0, 100, "a", allocator="GPU_0_bfc", in_use=1100), Event(1, -100, "a", allocator="GPU_0_bfc",
                                                                              in_use=1000)]
    result = replay(events)
    assert result.peak_bytes == 1100
    (extremes,) = result.allocators
    assert extremes == {"name": "GPU_0_bfc", "peak_bytes": 1100, "min_bytes": 1000}


def test_a_rise_of_the_lifetime_peak_in_the_window_is_the_peak():
    events = [Event(0, 10, "a", allocator="GPU_0_bfc", in_use=510, lifetime_peak=600),
              Event(1, -10, "a", allocator="GPU_0_bfc", in_use=500, lifetime_peak=900)]
    assert replay(events).peak_bytes == 900


@pytest.mark.parametrize("names, headline", [
    (["GPU_0_bfc", "GPU_1_bfc", "cpu", "gpu_host_bfc"], {"GPU_0_bfc"}),
    (["gpu_2_bfc", "GPU_10_bfc"], {"gpu_2_bfc"}),
    (["TPU_0_bfc", "cpu"], {"TPU_0_bfc"}),
    (["cpu", "mklcpu", "gpu_host_bfc"], None),
    ([], None),
])
def test_the_headline_is_the_lowest_numbered_accelerator(names, headline):
    assert headline_allocators(names) == headline


def test_only_the_headline_allocators_bytes_are_the_peak_each_listed_with_whether_counted():
    events = [Event(0, 100, "g", allocator="GPU_0_bfc"), Event(1, 1000, "h", allocator="gpu_host_bfc"),
              Event(2, -100, "g", allocator="GPU_0_bfc"), Event(3, -1000, "h", allocator="gpu_host_bfc")]
    result = replay(events, headline=headline_allocators(["GPU_0_bfc", "gpu_host_bfc"]))
    assert result.peak_bytes == 100
    assert {a["name"]: (a["peak_bytes"], a["counted"]) for a in result.allocators} == {
        "GPU_0_bfc": (100, True), "gpu_host_bfc": (1000, False)}


def test_times_are_from_the_origin():
    result = replay([Event(1000.5, 8, "a"), Event(1002.0, -8, "a")], origin_us=1000.0)
    assert result.timeline.t_us == [0.5, 2.0] and result.peak_time_us == 0.5


def test_no_events_is_no_peak():
    result = replay([])
    assert result.peak_bytes == 0 and result.peak_buffers == [] and result.timeline.bytes == []


def test_a_long_trace_is_downsampled_keeping_its_peak():
    events = []
    for n in range(5000):
        events += [Event(2 * n, 1 + n % 97, ("buf", n)), Event(2 * n + 1, -(1 + n % 97), ("buf", n))]
    events.append(Event(2 * 2500 + 0.5, 10_000, "spike"))
    events.append(Event(2 * 2500 + 0.7, -10_000, "spike"))
    result = replay(events)
    peak, _ = _reference(events)
    assert result.peak_bytes == peak
    assert len(result.timeline.bytes) <= MAX_TIMELINE_POINTS + 2
    assert max(result.timeline.bytes) == peak and result.peak_time_us in result.timeline.t_us


def _random_trace(seed: int) -> List[allocator_replay.Event]:
    rng = random.Random(seed)
    events, live = [], []
    for n in range(300):
        t = n // 3  # three events an instant: ties between frees and allocations
        freeable = [n for n, (_, _, made) in enumerate(live) if made < t]  # freed at a later instant
        if freeable and rng.random() < 0.45:
            key, size, _ = live.pop(rng.choice(freeable))
            events.append(Event(t, -size, key))
        elif rng.random() < 0.1:
            events.append(Event(t, -rng.randrange(1, 5000), ("before", n)))  # allocated before the window
        else:
            size = rng.choice([256, 512, 4096, 65536]) * rng.randrange(1, 9)
            events.append(Event(t, size, ("buf", n), op=f"op{n % 7}", category=rng.choice([ACTIVATIONS_CATEGORY,
                                                                                          GRADIENTS_CATEGORY])))
            live.append((("buf", n), size, t))
    rng.shuffle(events)  # replay orders them
    return events


@pytest.mark.parametrize("seed", range(24))
def test_a_random_trace_peaks_as_the_running_sum_says_with_its_buffers(seed):
    events = _random_trace(seed)
    peak, buffers = _reference(events)
    result = replay(events)
    assert result.peak_bytes == peak
    assert sorted(b.bytes for b in result.peak_buffers) == sorted(buffers.values())
    assert sum(b.bytes for b in result.peak_buffers) == sum(buffers.values())


def test_each_buffer_counts_in_the_columns_of_what_it_carries():
    """Per category: all bytes; those carrying the batch; of them, those carrying the sequence once and twice.
    Shapes and sizes of a causal LM's step at batch 8, sequence 128 (tests/support/projection_run.py)."""
    from tb_modelmem.rules.buffers import sequence_power

    shapes = {"logits": ("[1024,8000]", 32_768_000), "scores": ("[8,6,128,128]", 3_145_728),
              "mlp": ("[8,128,768]", 3_145_728), "pooled": ("[8,192]", 6_144), "grad": ("[192,8000]", 6_144_000)}
    powers = {name: sequence_power(shape, 8, 128) for name, (shape, _) in shapes.items()}
    assert powers == {"logits": 1, "scores": 2, "mlp": 1, "pooled": 0, "grad": 0}
    events = [Event(t, size, name, shape=shape, batch=name != "grad", seq=powers[name],
                    category=GRADIENTS_CATEGORY if name == "grad" else ACTIVATIONS_CATEGORY)
              for t, (name, (shape, size)) in enumerate(shapes.items())]
    timeline = replay(events + [Event(9, -3_145_728, "scores")]).timeline
    at_peak = {field: {c: v[4] for c, v in getattr(timeline, field).items()}
               for field in ("by_category", "batch_by_category", "seq_by_category", "seq2_by_category")}
    assert at_peak["by_category"][ACTIVATIONS_CATEGORY] == 32_768_000 + 2 * 3_145_728 + 6_144
    assert at_peak["by_category"][GRADIENTS_CATEGORY] == 6_144_000
    assert at_peak["batch_by_category"] == {ACTIVATIONS_CATEGORY: 32_768_000 + 2 * 3_145_728 + 6_144}
    assert at_peak["seq_by_category"] == {ACTIVATIONS_CATEGORY: 32_768_000 + 3_145_728}
    assert at_peak["seq2_by_category"] == {ACTIVATIONS_CATEGORY: 3_145_728}
    assert timeline.seq2_by_category[ACTIVATIONS_CATEGORY][-1] == 0  # the scores freed
