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
