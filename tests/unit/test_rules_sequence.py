"""What if's sequence axis (rules/projection.py, rules/buffers.py) on a hand-made one-point trace whose
figures are the causal LM's (tests/support/projection_run.py, batch 8, 128 tokens): the arithmetic against
figures computed here, and every length the shapes cannot tell apart refused with its reason."""

from __future__ import annotations

import math

import pytest

from tb_modelmem.rules.buffers import input_sequence
from tb_modelmem.rules.projection import WhatIf, project
from tb_modelmem.schema.names import ACTIVATIONS_CATEGORY as ACTIVATIONS
from tb_modelmem.schema.records import Breakdown, OpTable, OpTrace, Timeline, VariableRecord

MiB = 2**20
SEQ1, SEQ2, BATCH_ONLY, FIXED = 30 * MiB, 6 * MiB, 1 * MiB, 2 * MiB  # activations at the peak, by what they carry


def _trace(seq=128, batch=8) -> OpTrace:
    carried = SEQ1 + SEQ2 + BATCH_ONLY
    timeline = Timeline([0.0], [float(carried + FIXED)], ["x"], {ACTIVATIONS: [float(carried + FIXED)]},
                        {ACTIVATIONS: [float(carried)]}, {ACTIVATIONS: [float(SEQ1)]}, {ACTIVATIONS: [float(SEQ2)]})
    return OpTrace(ops=OpTable.from_rows([]), source="xspace", timeline=timeline, peak_bytes=int(timeline.bytes[0]),
                   batch_size=batch, sequence_length=seq, counts_resident=True, allocations="all")


def _breakdown(*shapes) -> Breakdown:
    return Breakdown(source="keras", variables=[
        VariableRecord(name=f"dense_{i}/kernel", layer=f"dense_{i}", shape=list(shape), dtype="float32",
                       bytes=4 * math.prod(shape), role="weight") for i, shape in enumerate(shapes)])


LM = _breakdown((192, 8000), (8000, 192), (192, 768))


@pytest.mark.parametrize("seq,batch", [(256, None), (512, None), (64, None), (256, 16)])
def test_what_carries_the_sequence_grows_with_it_and_attention_with_its_square(seq, batch):
    answer = project(_trace(), LM, WhatIf(batch=batch, seq=seq))
    r, b = seq / 128, (batch or 8) / 8
    expected = (SEQ1 * r + SEQ2 * r * r + BATCH_ONLY) * b + FIXED
    assert answer["unknown"] == {} and answer["by_category"][ACTIVATIONS] == round(expected)
    (line,) = [line for line in answer["basis"] if line["category"] == ACTIVATIONS]
    assert f"x {r:.4g} (seq)" in line["formula"] and f"x {r * r:.4g} (seq²)" in line["formula"]
    assert answer["seq"] == seq and answer["traced"]["seq"] == 128


@pytest.mark.parametrize("trace,breakdown,says", [
    (_trace(seq=None), LM, "does not say its sequence length"),
    (_trace(batch=None), LM, "does not say its batch size"),
    (_trace(seq=8), LM, "is also the batch"),
    (_trace(seq=1), LM, "is a unit dimension"),
    (_trace(seq=192), LM, "the traced sequence length, 192, is also a dimension of dense_0/kernel [192, 8000]"),
    (_trace(), None, "no breakdown"),
])
def test_a_length_the_shapes_cannot_tell_apart_is_unknown_with_why(trace, breakdown, says):
    answer = project(trace, breakdown, WhatIf(seq=300))
    assert answer["peak_bytes"] is None and says in answer["unknown"][ACTIVATIONS], answer["unknown"]
    assert project(trace, breakdown, WhatIf())["unknown"].get(ACTIVATIONS) is None  # as traced: nothing to tell


def test_batch_times_the_length_in_a_weight_does_not_hide_the_length():
    """8 x 96 = 768 is dense_2's width, but no buffer shaped like a weight carries the batch (``carries_batch``):
    the length is told apart, and projects as any other (tests/integration/test_projection_torch.py: real runs)."""
    answer = project(_trace(seq=96), LM, WhatIf(seq=192))
    expected = (SEQ1 * 2 + SEQ2 * 4 + BATCH_ONLY) + FIXED
    assert answer["unknown"] == {} and answer["by_category"][ACTIVATIONS] == round(expected)


@pytest.mark.parametrize("bad", [0, -1, True, 10**9 + 1, 10**400, "256"])
def test_a_length_that_is_no_length_is_refused_before_anything_is_projected(bad):
    with pytest.raises(ValueError, match="seq must be a positive integer"):
        project(_trace(), LM, WhatIf(seq=bad))


@pytest.mark.parametrize("dims,dtype,seq", [((8, 128), "int32", 128), ((8, 128), "int64", 128),
                                            ((8, 128), "uint16", 128), ((8, 128), "float32", None),
                                            ((8, 50, 16), "float32", 50), ((8, 28, 28), "float32", None),
                                            ((8, 28, 28, 1), "float32", None), ((8, None), "int32", None)])
def test_the_traced_length_is_read_from_a_sequence_input_only(dims, dtype, seq):
    assert input_sequence(dims, dtype) == seq


def test_a_budget_over_many_devices_searches_only_batches_a_question_may_ask():
    """The search asks global batches up to the bound a question has (10**9): over 2,000 devices a model that
    fits 2**20 samples each used to ask 2,097,152,000 and raise; now the answer is a batch, or none with why."""
    from tb_modelmem.rules.projection import budget_answer

    answer = budget_answer(_trace(), LM, WhatIf(replicas=2000), 2**62)
    assert answer["largest_batch"] is None or answer["largest_batch"] <= 10**9, answer
    assert answer["note"] or answer["largest_batch"]


def test_a_tensorflow_op_run_once_per_token_is_one_a_loop_runs_length_times_each_step():
    """``xspace._per_token`` on op names as Keras' LSTM on TensorFlow makes them (2 steps traced, 36 tokens):
    its body's ops allocate 72 times where the rest allocate twice, the body's other ops are in the same
    innermost loop; a tf.function running 8 steps (``steps_per_execution``, itself a loop around the step)
    multiplies every count alike, which at 8 tokens makes no op a per-token one."""
    from tb_modelmem.readers.xspace import _per_token

    body = "train/while/body/_1/seq/lstm/while/body/_27/seq/lstm/while/lstm_cell/"
    lstm = (["train/seq/dense/MatMul", "train/adam/Square"] * 2 + [body + "split"] * 72 + [body + "Tanh_1"] * 70
            + ["train/seq/lstm/TensorArrayUnstack/TensorListFromTensor"] * 72)
    assert _per_token(lstm, 36) == {body + "split", body + "Tanh_1",
                                    "train/seq/lstm/TensorArrayUnstack/TensorListFromTensor"}
    executed_eight = ["train/while/body/_1/seq/dense/MatMul", "train/while/body/_1/seq/embedding/Gather"] * 8
    assert _per_token(executed_eight, 8) == set() and _per_token(lstm, None) == set()
