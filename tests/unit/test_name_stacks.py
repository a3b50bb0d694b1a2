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
from tb_modelmem.rules.name_stacks import is_keras_batch, keras_state_role, layer_paths, scope_name
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
