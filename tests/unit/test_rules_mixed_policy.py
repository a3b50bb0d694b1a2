"""What a mixed precision policy leaves wider than 16-bit (rules/buffers.py ``under_mixed_policy``, What if's
policy arithmetic in rules/projection.py): the rule on the op names, phases and order of a real float32 trace
(tests/support/projection_run.py's causal LM, TF executor, read off its XSpace), and the projection on a
hand-made one-point trace against figures computed here."""

from __future__ import annotations

import pytest

from tb_modelmem.rules.buffers import CAST_COPY, KEEPS_WIDTH, LOSS_COPY, under_mixed_policy
from tb_modelmem.rules.projection import WhatIf, project
from tb_modelmem.schema.names import ACTIVATIONS_CATEGORY as ACTIVATIONS
from tb_modelmem.schema.names import BACKWARD, FORWARD, LOSS, OPTIMIZER
from tb_modelmem.schema.records import OpTable, OpTrace, Timeline

F = "StatefulPartitionedCall/functional_1/"
# (op, phase, carries the batch) in the order the causal LM's float32 step allocated them
STEP = [
    ("StatefulPartitionedCall/compile_loss/sparse_categorical_crossentropy/Cast", LOSS, True),
    (F + "embedding_1/GatherV2", FORWARD, True),
    (F + "layer_normalization_1/moments/SquaredDifference", FORWARD, True),
    (F + "layer_normalization_1/moments/mean", FORWARD, False),
    (F + "multi_head_attention_1/einsum/Einsum", FORWARD, True),
    ("StatefulPartitionedCall/gradient_tape/functional_1/dense_1_1/Gelu/Square", BACKWARD, True),
    (F + "layer_normalization_4_1/mul_1", FORWARD, True),
    (F + "pre_mixer/mul", FORWARD, True),  # a normalization its user renamed: not known as one
    (F + "dense_4_1/Tensordot/MatMul", FORWARD, True),  # the logits: the model's output
    ("StatefulPartitionedCall/compile_loss/sparse_categorical_crossentropy/SparseSoftmaxCrossEntropyWithLogits/"
     "SparseSoftmaxCrossEntropyWithLogits", LOSS, False),
    ("StatefulPartitionedCall/gradient_tape/functional_1/layer_normalization_4_1/mul_2/Mul_1", BACKWARD, True),
    ("StatefulPartitionedCall/gradient_tape/functional_1/dense_2_2/Tensordot/MatMul/MatMul", BACKWARD, True),
    ("StatefulPartitionedCall/adam_w/Square_35", OPTIMIZER, False),
]


def test_normalization_and_the_loss_stay_float32_and_the_output_is_copied_for_the_loss():
    ops, phases, batch = zip(*STEP)
    found = under_mixed_policy(ops, phases, batch, ["float32"] * len(ops), [4096] * len(ops))
    # not the embedding's lookup: its float32 GatherV2 is cast to bfloat16 in the layer, and the cast is what
    # lives on (the real mixed_bfloat16 step of this model: embedding_1/GatherV2 float32, then embedding_1/Cast)
    assert found == {0: KEEPS_WIDTH, 2: KEEPS_WIDTH, 6: KEEPS_WIDTH, 8: LOSS_COPY, 10: KEEPS_WIDTH}


def test_kerashubs_norms_attention_softmax_and_tied_logits_stay_float32():
    """KerasHub's Llama computes its RMS norms and its attention softmax in float32 (llama_layernorm.py; a
    Softmax with dtype="float32" in llama_attention.py), and its logits too: its ReversibleEmbedding multiplies
    the 16-bit states by the table it does not autocast (a real mixed_bfloat16 step: token_embedding_1/
    Tensordot/MatMul [1024,8000] float32), so the loss needs no float32 copy of them; its rotary embedding
    autocasts (bfloat16 there), and the silu gradient's helper TensorFlow hoists after the logits ("sub_2",
    in no layer's scope) is not the output. Op names of its real float32 trace, in its order."""
    llama = "StatefulPartitionedCall/llama_causal_lm_1/llama_backbone_1/transformer_layer_0_1/"
    ops = [llama + "self_attention_layernorm_1/Pow", llama + "self_attention_1/attention_softmax_1/SelectV2_1",
           llama + "self_attention_1/MatMul", llama + "self_attention_1/llama_rotary_embedding_1/mul",
           "StatefulPartitionedCall/llama_causal_lm_1/token_embedding_1/Tensordot/MatMul",
           "StatefulPartitionedCall/sub_2"]
    found = under_mixed_policy(ops, [FORWARD] * 6, [True] * 6, ["float32"] * 6, [4096] * 6)
    assert found == {0: KEEPS_WIDTH, 1: KEEPS_WIDTH, 4: KEEPS_WIDTH}


def test_a_step_with_no_forward_buffer_copies_nothing():
    assert under_mixed_policy(["a/b"], [BACKWARD], [True], ["float32"], [4096]) == {}


def test_integers_and_booleans_keep_their_width_and_are_never_the_output():
    """A [batch, seq, vocab] int32 BitwiseAnd and a bool mask (KerasHub's Llama step holds 33-48 MB of them at
    its peak) are no float a policy narrows; the logits before them are still the output."""
    ops = ["f/dense_4_1/Tensordot/MatMul", "StatefulPartitionedCall/BitwiseAnd", "StatefulPartitionedCall/Less"]
    found = under_mixed_policy(ops, [FORWARD] * 3, [True] * 3, ["float32", "int32", "bool"], [4096] * 3)
    assert found == {0: LOSS_COPY, 1: KEEPS_WIDTH, 2: KEEPS_WIDTH}


MiB = 2**20
CARRIED, KEPT, OUTPUT, FIXED = 40 * MiB, 6 * MiB, 30 * MiB, 2 * MiB  # activations at the peak


def _trace() -> OpTrace:
    total = float(CARRIED + FIXED)
    timeline = Timeline([0.0], [total], ["x"], {ACTIVATIONS: [total]}, {ACTIVATIONS: [float(CARRIED)]},
                        kept_width_by_category={ACTIVATIONS: [float(KEPT)]},
                        loss_copy_by_category={ACTIVATIONS: [float(OUTPUT)]})
    return OpTrace(ops=OpTable.from_rows([]), source="xspace", timeline=timeline, peak_bytes=int(total),
                   batch_size=8, counts_resident=True, allocations="all")


@pytest.mark.parametrize("batch", [None, 16])
def test_a_mixed_policy_halves_what_it_computes_in_16_bits_only(batch):
    answer = project(_trace(), None, WhatIf(batch=batch, policy="mixed_bfloat16"))
    scale = (batch or 8) / 8
    # every batch-carrying byte halved, then the ones kept wide given their other half back, and the
    # output's float32 copy added whole; the bytes that do not carry the batch stay
    expected = scale * (CARRIED * 0.5 + KEPT * 0.5 + OUTPUT) + FIXED
    assert answer["by_category"][ACTIVATIONS] == round(expected)
    (line,) = [line for line in answer["basis"] if line["category"] == ACTIVATIONS]
    assert "kept wide (norms, loss, ints, its copy)" in line["formula"], line["formula"]


def test_float32_as_traced_leaves_the_columns_unused():
    answer = project(_trace(), None, WhatIf(batch=16))
    assert answer["by_category"][ACTIVATIONS] == 2 * CARRIED + FIXED


def test_a_step_whose_forward_pass_is_a_quarter_16_bit_is_mixed_and_keeps_its_wide_buffers():
    """KerasHub's GPT-2 under mixed_bfloat16 (its real trace's order and dtypes): a Cast made the 16-bit
    states, the norm and the tied logits are float32. 32 of its 128 bytes of forward outputs are bfloat16, a quarter: so
    it is a mixed step, and asked float32 the Cast is not made and the wide buffers stay; with one byte fewer
    it reads as a float32 step, and the Cast is one more buffer a mixed policy would make 16-bit."""
    ops = ["f/token_embedding_1/Cast", "f/layer_norm_1/Pow", "f/token_embedding_1/Tensordot/MatMul"]
    dtypes = ["bfloat16", "float32", "float32"]
    found = under_mixed_policy(ops, [FORWARD] * 3, [True] * 3, dtypes, [32, 32, 64])
    assert found == {0: CAST_COPY, 1: KEEPS_WIDTH, 2: KEEPS_WIDTH}
    assert under_mixed_policy(ops, [FORWARD] * 3, [True] * 3, dtypes, [31, 32, 65]) == {1: KEEPS_WIDTH,
                                                                                         2: KEEPS_WIDTH}
