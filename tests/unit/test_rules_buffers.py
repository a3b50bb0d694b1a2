"""rules/buffers.py: which buffers carry the batch and the sequence, on the shapes real steps allocate."""

from __future__ import annotations

import pytest

from tb_modelmem.rules.buffers import carried, carries_batch, sequence_power

# (shape, batch, sequence, times it carries the sequence): a causal LM at batch 8, 128 tokens (its step's
# buffers, tests/support/projection_run.py), XLA's unit dimension in front, a transformer at 200 tokens.
CASES = [("[1024,8000]", 8, 128, 1),  # the logits, flattened to [batch x seq, vocab]
         ("[8,6,128,128]", 8, 128, 2),  # attention scores [batch, heads, seq, seq]
         ("[8,128,6,32]", 8, 128, 1),  # a head split [batch, seq, heads, key_dim]
         ("[8,128,768]", 8, 128, 1),
         ("[1,8,6,128,128]", 8, 128, 2),
         ("[8,192]", 8, 128, 0),  # pooled: no sequence left
         ("[32,2,200,200]", 32, 200, 2),
         ("[8,128]", 8, None, 0)]  # a trace that does not know its length


@pytest.mark.parametrize("shape,batch,seq,power", CASES)
def test_a_buffer_carries_the_sequence_as_many_times_as_its_shape_holds_it(shape, batch, seq, power):
    assert sequence_power(shape, batch, seq) == power


def test_the_batch_rule_is_unchanged_by_the_sequence_rule():
    weights = {(192, 8000), (8000, 192)}
    assert carries_batch("[1024,8000]", 8, weights) and carries_batch("[8,6,128,128]", 8, weights)
    assert not carries_batch("[192,8000]", 8, weights) and not carries_batch("[8]", 8, weights)
    assert not carries_batch("[8,128]", None) and not carries_batch("[?,128]", 8)


def test_a_row_per_position_carries_no_batch_but_at_batch_1_a_samples_shape_does():
    """Shapes of real steps: peft_sft's Mistral at batch 4 x 64 tokens (rotary's cos and sin [1, 64, 24], 64 a
    multiple of 4; its logits [256, 1000]); T5's relative position buckets [64, 64]; a GPT-2 at batch 1, whose
    every activation is [1, seq, d] with the unit dimension in front, as a position's row would be."""
    weights = {(96, 96), (1000, 96)}
    assert carried("[1,64,24]", 4, weights, 64) == (False, 0)
    assert carried("[64,64]", 8, weights, 64) == (False, 0)
    assert carried("[256,1000]", 4, weights, 64) == (True, 1)  # [batch x seq, vocab]
    assert carried("[4,64,96]", 4, weights, 64) == (True, 1)
    assert carried("[1,128,768]", 1, {(768, 768)}, 128) == (True, 1)  # at batch 1: the sample's
    assert carried("[128,50257]", 1, {(768, 768)}, 128) == (True, 1)

