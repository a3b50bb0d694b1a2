"""What if's figure where the asked setting changes it: the allocator band's middle, with a signed
``allocator_chunking`` row for how far that is from the traced chunks scaled (rules/projection.py
``_chunking``), on a hand-made two-step trace counted by a BFC allocator, against figures computed here."""

from __future__ import annotations

from tb_modelmem.rules.projection import WhatIf, project
from tb_modelmem.schema.names import ACTIVATIONS_CATEGORY as ACTIVATIONS
from tb_modelmem.schema.records import BufferRecord, OpTable, OpTrace, Timeline

MiB = 2**20
# At the traced peak (the second step's): the logits, asked 30 MiB and handed 32, and 2 MiB that carry no batch
ASKED, HANDED, FIXED = 30 * MiB, 32 * MiB, 2 * MiB
FIRST = 20 * MiB  # the first step's peak: its logits only, batch-carrying, handed what they asked


def _trace() -> OpTrace:
    peak = float(HANDED + FIXED)
    timeline = Timeline([0.0, 10.0, 20.0], [float(FIRST), 0.0, peak], ["a", "b", "c"],
                        {ACTIVATIONS: [float(FIRST), 0.0, peak]}, {ACTIVATIONS: [float(FIRST), 0.0, float(HANDED)]},
                        step_starts_us=[0.0, 15.0])
    logits = BufferRecord(op="f/dense/MatMul", bytes=HANDED, shape="[1024,8000]", dtype="float32",
                          category=ACTIVATIONS, requested_bytes=ASKED, batch=True, seq=0, mixed="")
    fixed = BufferRecord(op="f/dense/BiasAdd", bytes=FIXED, shape="[8000]", dtype="float32",
                         category=ACTIVATIONS, requested_bytes=FIXED, batch=False, seq=0, mixed="")
    return OpTrace(ops=OpTable.from_rows([]), source="xspace", timeline=timeline, peak_bytes=int(peak),
                   peak_buffers=[logits, fixed], batch_size=8, counts_resident=True, allocations="all",
                   allocators=[{"name": "mklcpu_bfc", "peak_bytes": int(peak), "counted": True}])


def test_as_traced_the_figure_is_the_traced_peak_and_there_is_no_chunking_row():
    for asked in (WhatIf(), WhatIf(batch=8)):
        answer = project(_trace(), None, asked)
        assert answer["peak_bytes"] == HANDED + FIXED and "allocator_chunking" not in answer["by_category"]


def test_another_batch_takes_the_bands_middle_and_says_how_far_it_is_from_the_chunks_scaled():
    answer = project(_trace(), None, WhatIf(batch=32))
    scaled = 4 * HANDED + FIXED  # the traced chunks scaled
    low = scaled - 4 * (HANDED - ASKED)  # every buffer at its request
    high = scaled + 2 * 4 * ASKED - 4 * HANDED  # the logits handed twice their request (under 128 MiB over it)
    band = answer["band"]
    assert (band["low_bytes"], band["high_bytes"]) == (low, high)
    assert answer["peak_bytes"] == (low + high) // 2
    assert answer["by_category"]["allocator_chunking"] == answer["peak_bytes"] - scaled > 0
    assert _known_sum(answer) == answer["peak_bytes"]
    (line,) = [line for line in answer["basis"] if line["category"] == "allocator_chunking"]
    assert line["how"] == "computed" and line["projected_bytes"] == answer["peak_bytes"] - scaled
    # each traced step's projection moves by the same row: the second is the figure, the first its own
    assert [s["peak_bytes"] for s in answer["steps"]] == [4 * FIRST + answer["peak_bytes"] - scaled,
                                                         answer["peak_bytes"]]


def test_a_band_whose_middle_is_below_the_chunks_scaled_gives_a_negative_row():
    """A trace whose largest buffer was handed almost twice its request (Llama's high mode): the middle is
    below the chunks scaled, and the row says so with its sign."""
    trace = _trace()
    trace.peak_buffers = [BufferRecord(op="f/dense/MatMul", bytes=HANDED, shape="[1024,8000]", dtype="float32",
                                       category=ACTIVATIONS, requested_bytes=17 * MiB, batch=True, seq=0, mixed=""),
                          trace.peak_buffers[1]]
    answer = project(trace, None, WhatIf(batch=16))
    assert answer["by_category"]["allocator_chunking"] < 0
    assert _known_sum(answer) == answer["peak_bytes"]


def _known_sum(answer: dict) -> int:
    """The rows' sum (with no breakdown the variables are unknown apart, counted whole in unattributed)."""
    return sum(v for v in answer["by_category"].values() if v is not None)


def test_a_step_never_projects_below_its_own_traced_peak_when_every_axis_grows():
    """Issue 54: a CI run projected LeNet at batch 128 below its traced batch-32 peak. Each step is moved by the
    band's row, worked out at the figure's step: a step that holds little batch-carrying memory at its own peak
    (here the first, 33 MiB of which 1 MiB carries the batch), moved by a large negative row (the second step's
    logits asked 17 MiB and were handed 32), went below what it traced. Where every axis asked grows, neither
    the figure nor any step goes below its traced peak."""
    trace = _trace()
    first_fixed = 32 * MiB
    trace.timeline = Timeline([0.0, 10.0, 20.0], [float(first_fixed + MiB), 0.0, float(HANDED + FIXED)],
                              ["a", "b", "c"], {ACTIVATIONS: [float(first_fixed + MiB), 0.0, float(HANDED + FIXED)]},
                              {ACTIVATIONS: [float(MiB), 0.0, float(HANDED)]}, step_starts_us=[0.0, 15.0])
    trace.peak_buffers = [BufferRecord(op="f/dense/MatMul", bytes=HANDED, shape="[1024,8000]", dtype="float32",
                                       category=ACTIVATIONS, requested_bytes=17 * MiB, batch=True, seq=0, mixed=""),
                          trace.peak_buffers[1]]
    answer = project(trace, None, WhatIf(batch=32))
    row = answer["by_category"]["allocator_chunking"]
    assert first_fixed + 4 * MiB + row < first_fixed + MiB  # moved alike, the first step would fall below
    assert [s["traced_peak_bytes"] for s in answer["steps"]] == [first_fixed + MiB, HANDED + FIXED]
    assert answer["steps"][0]["peak_bytes"] == first_fixed + MiB  # its traced peak, not below it
    assert answer["steps"][1]["peak_bytes"] == answer["peak_bytes"] == 4 * HANDED + FIXED + row
    smaller = project(trace, None, WhatIf(batch=2))  # an axis that shrinks keeps its own arithmetic
    assert smaller["steps"][0]["peak_bytes"] < first_fixed + MiB


def test_a_figure_raised_to_the_traced_peak_says_so():
    """The logits asked 17 MiB and were handed 32: at batch 9 the band's middle is below the traced 34 MiB though
    every axis grew. The figure is the traced peak, and its row says that, not "the band's middle"."""
    trace = _trace()
    trace.peak_buffers = [BufferRecord(op="f/dense/MatMul", bytes=HANDED, shape="[1024,8000]", dtype="float32",
                                       category=ACTIVATIONS, requested_bytes=17 * MiB, batch=True, seq=0, mixed=""),
                          trace.peak_buffers[1]]
    answer = project(trace, None, WhatIf(batch=9))
    assert (answer["band"]["low_bytes"] + answer["band"]["high_bytes"]) // 2 < HANDED + FIXED
    assert answer["peak_bytes"] == HANDED + FIXED
    (line,) = [line for line in answer["basis"] if line["category"] == "allocator_chunking"]
    assert "the traced peak" in line["formula"] and answer["band"]["low_bytes"] < HANDED + FIXED
    assert _known_sum(answer) == answer["peak_bytes"]
