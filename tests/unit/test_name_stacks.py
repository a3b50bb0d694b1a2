"""rules/name_stacks.py: a JAX name stack read as the TF-style name ``join`` reads, and a Keras-on-JAX
train step's parameters read by their names; on hand-made stacks and on the H100 profiles' own
programs (tests/fixtures/gpu_h100), whose truth is what Keras said in those runs (truth.json)."""

from __future__ import annotations

import json
import math
from typing import Dict, List

import pytest

from tb_modelmem import proto
from tb_modelmem.readers import hlo
from tb_modelmem.rules.join import Joiner, Vocabulary
from tb_modelmem.rules.name_stacks import batch_parameters, is_keras_batch, keras_state_role, layer_paths, scope_name
from tb_modelmem.schema.names import NON_TRAINABLE, OPTIMIZER_SLOT, OTHER, WEIGHT
from tests.support import gpu_h100


@pytest.mark.parametrize("stack, name", [
    ("jit(train_step)/jvp(conv1)/conv_general_dilated", "conv1/conv_general_dilated"),
    ("jit(train_step)/transpose(jvp(conv1))/conv_general_dilated", "gradient_tape/conv1/conv_general_dilated"),
    ("jit(train_step)/jvp(transformer_block)/dense/dot_general", "transformer_block/dense/dot_general"),
    ("jit(train_step)/transpose(jvp(block))/attention/jit(relu)/max", "gradient_tape/block/attention/max"),
    ("jit(train_step)/jvp(mha)/abc,cde->abde/dot_general", "mha/dot_general"),
    ("jit(train_step)/vmap(jvp(fc1))/add", "add"),
    ("jit(train_step)/adam/mul", "adam/mul"),
    ("jit(train_step)/jvp(conv1)/add;jit(train_step)/jvp(conv2)/add", "conv1/add"),
    ("sequential_1/conv1_1/convolution", "sequential_1/conv1_1/convolution"),
    ("gradient_tape/sequential_1/dense/MatMul", "gradient_tape/sequential_1/dense/MatMul"),
    ("XLA_Args", "XLA_Args"),
    ("", ""),
])
def test_a_name_stack_reads_as_the_tf_style_name(stack, name):
    assert scope_name(stack) == name


def test_layer_paths_are_the_differentiated_layers_in_order_the_loss_none():
    stacks = ["jit(train_step)/jvp(conv1)/conv_general_dilated",
              "jit(train_step)/jvp(compile_loss)/log",
              "jit(train_step)/transpose(jvp(conv1))/conv_general_dilated",
              "jit(train_step)/jvp(block)/dense/dot_general",
              "jit(train_step)/adam/mul",
              "jit(train_step)/transpose(jvp(loss_1))/mul",
              "jit(train_step)/jvp(fc)/add"]
    assert layer_paths(stacks) == ["conv1", "block/dense", "fc"]


@pytest.mark.parametrize("op_name, dims, role", [
    ("state[0][3]", (5, 5, 1, 32), WEIGHT),
    ("state[1][0]", (64,), NON_TRAINABLE),
    ("state[2][4]", (1024,), OPTIMIZER_SLOT),
    ("state[3][0]", (), OTHER),
    ("data[0]", (32, 28, 28, 1), None),
    ("state[4][0]", (3,), None),
    ("state[0]", (3,), None),
    ("XLA_Args", (3,), None),
])
def test_a_keras_state_parameter_has_the_role_its_index_says(op_name, dims, role):
    assert keras_state_role(op_name, dims) == role


def test_a_scalar_optimizer_variable_is_no_slot():
    """Adam's iteration counter and learning rate are state[2] scalars: optimizer variables, not slots."""
    assert keras_state_role("state[2][0]", ()) not in (OPTIMIZER_SLOT, None)


@pytest.mark.parametrize("op_name, batch", [("data[0]", True), ("data[1]", True), ("data[0][1]", True),
                                            ("data", False), ("state[0][0]", False), ("data[x]", False)])
def test_the_batch_is_the_data_parameters(op_name, batch):
    assert is_keras_batch(op_name) is batch


RUNS = ["keras_jax_lenet", "keras_jax_lenet_nocmdbuf", "keras_jax_transformer"]


def _train_step_parameters(run: str) -> List[Dict]:
    """The train step's entry parameters, read from the HloProto with the shipped protos: op_name, dims
    and the bytes of their buffer allocation."""
    xspace = proto.XSpace.FromString(gpu_h100.profile_bytes(run))
    (step,) = [p for p in hlo.programs(xspace).values() if p.name == "jit_train_step"]
    module = step._hlo.hlo_module
    (entry,) = [c for c in module.computations if c.id == module.entry_computation_id]
    by_number = {i.parameter_number: i for i in entry.instructions if i.opcode == "parameter"}
    out = []
    for allocation in step._hlo.buffer_assignment.buffer_allocations:
        if allocation.is_entry_computation_parameter:
            raw = by_number[allocation.parameter_number]
            out.append({"op_name": raw.metadata.op_name, "dims": tuple(raw.shape.dimensions),
                        "bytes": allocation.size})
    return out


@pytest.mark.parametrize("run", RUNS)
def test_the_state_roles_sum_to_what_keras_said(run):
    truth = json.load(open(gpu_h100.TRUTH))["runs"][run]
    parameters = _train_step_parameters(run)
    weights = [p for p in parameters if keras_state_role(p["op_name"], p["dims"]) == WEIGHT]
    assert sum(p["bytes"] for p in weights) == truth["weight_bytes"]
    assert sum(math.prod(p["dims"]) for p in weights) == truth["params"]
    optimizer = [p for p in parameters if p["op_name"].startswith("state[2]")]
    assert sum(p["bytes"] for p in optimizer) == truth["optimizer_variable_bytes"]
    slots = [p for p in optimizer if keras_state_role(p["op_name"], p["dims"]) == OPTIMIZER_SLOT]
    assert sum(p["bytes"] for p in slots) == 2 * truth["weight_bytes"]  # Adam: a first and second moment each
    assert any(is_keras_batch(p["op_name"]) for p in parameters)


def test_the_lenet_step_differentiates_its_layers():
    """The seed 002 LeNet (truth.json: conv1, pool1, conv2, pool2, flatten, fc1, logits): every layer with
    weights is differentiated, and nothing outside the model is."""
    xspace = proto.XSpace.FromString(gpu_h100.profile_bytes("keras_jax_lenet"))
    (step,) = [p for p in hlo.programs(xspace).values() if p.name == "jit_train_step"]
    op_names = [i.metadata.op_name for c in step._hlo.hlo_module.computations for i in c.instructions]
    found = layer_paths(op_names)
    assert {"conv1", "conv2", "fc1", "logits"} <= set(found)
    assert set(found) <= {"conv1", "pool1", "conv2", "pool2", "flatten", "fc1", "logits"}
    assert len(found) == len(set(found))


def _parameters(*named: tuple) -> List[hlo.Parameter]:
    return [hlo.Parameter(number, name, dims, 4 * math.prod(dims)) for number, (name, dims) in enumerate(named)]


# an nnx.jit step's entry parameters as JAX names them (tests/support/flax_run.py's CNN, batch 32): its model's
# and optimizer's flattened state, then its arguments x and y; conv1's bias has y's shape
_NNX_STEP = _parameters(("model.states[0][0]", (32,)), ("model.states[0][1]", (3, 3, 1, 32)),
                        ("opt.states[0][0]", ()), ("opt.states[0][1]", (32,)), ("x", (32, 28, 28, 1)), ("y", (32,)))


def test_a_jax_steps_batch_is_the_arguments_that_lead_with_it():
    assert batch_parameters(_NNX_STEP, 32) == {4, 5}
    assert batch_parameters(_NNX_STEP) == {4, 5}  # unknown: the leading dimension most bytes share
    # data-parallel on 8 devices: each program holds its piece, 4 rows of the batch of 32
    sharded = _parameters(("params['head']['kernel']", (64, 256)), ("opt_state[0].count", ()), ("ids", (4, 32)))
    assert batch_parameters(sharded, 32) == {2}


def test_the_state_a_step_returns_is_never_its_batch():
    """A uniform-width MLP's params all lead with its width (64) and outweigh the batch of 8: the step
    returns them updated, so they are state; x and y are the batch."""
    step = _parameters(("params['w']", (64, 64)), ("params['b']", (64,)), ("x", (8, 64)), ("y", (8,)))
    assert batch_parameters(step, returned={(64, 64), (64,), ()}) == {2, 3}
    assert batch_parameters(step) == {0, 1}  # without the outputs: the most bytes, the params (why they count)


def test_keras_and_tensorflow_programs_keep_their_own_rule():
    keras = _parameters(("state[0][0]", (32, 10)), ("data[0]", (32, 784)), ("data[1]", (32,)))
    assert batch_parameters(keras, 32) == {1, 2}
    assert batch_parameters(_parameters(("XLA_Args", (32, 784)), ("XLA_Args", (784, 10))), 32) == set()
    assert batch_parameters(_parameters(("params", (32, 10))), 32) == set()  # one argument: the state alone


@pytest.mark.parametrize("op_name, layer", [
    ("jit(step)/jvp(CNN)/conv1/conv_general_dilated", "conv1"),  # capture.flax_scopes: the model's class first
    ("jit(step)/transpose(jvp(CNN))/blocks/0/attn/dot_general", "blocks/0/attn"),
    ("jit(step)/jvp(CNN)/reduce_window_sum", "CNN"),  # the model's own call, outside its modules
    ("jit(step)/jvp(TinyLM)/block0/attention/attention/key/dot_general", "block0/attention/key"),  # linen
])
def test_a_scope_of_the_model_above_its_layers_is_passed_over(op_name, layer):
    joiner = Joiner(Vocabulary(["CNN", "conv1", "blocks/0/attn", "block0/attention/key"]), (), [])
    assert joiner.assign(scope_name(op_name), "")[0] == layer
