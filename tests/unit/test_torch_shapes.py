"""The shape of a buffer a PyTorch op allocated (``readers/torch_shapes.py``), from op records as torch 2.13's
profiler writes them (the "Input Dims", "Input type" and "Concrete Inputs" below are copied from real traces:
the Trainer GPT-2 and Lightning CNN of tests/integration/test_projection_torch.py, the H100 ResNet50 of
tests/fixtures/torch_h100), the expected shapes worked out here by PyTorch's own formulas; and crafted
fields, each of which gives no shape (never an exception, never a long wait)."""

from __future__ import annotations

import pytest

from tb_modelmem.readers import torch_trace
from tb_modelmem.readers.torch_shapes import allocated_shape, tensor_shapes

F = 4  # float32


@pytest.mark.parametrize("name,dims,types,concrete,nbytes,expected", [
    # GPT-2: c_attn's addmm [512,96] x [96,288] + bias; attention's bmm; lm_head's matmul on [8,64,96]
    ("aten::addmm", [[288], [512, 96], [96, 288], [], []], ["float", "float", "float", "Scalar", "Scalar"],
     ["", "", "", "1", "1"], 512 * 288 * F, ((512, 288), "float32")),
    ("aten::bmm", [[32, 64, 24], [32, 24, 64]], ["float", "float"], ["", ""], 32 * 64 * 64 * F,
     ((32, 64, 64), "float32")),
    ("aten::matmul", [[8, 64, 96], [96, 1000]], ["float", "float"], ["", ""], 8 * 64 * 1000 * F,
     ((8, 64, 1000), "float32")),
    ("aten::embedding", [[1000, 96], [8, 64], [], [], []], ["float", "long int", "Scalar", "Scalar", "Scalar"],
     ["", "", "-1", "False", "False"], 8 * 64 * 96 * F, ((8, 64, 96), "float32")),
    ("aten::index_select", [[1000, 96], [], [512]], ["float", "Scalar", "long int"], ["", "0", ""], 512 * 96 * F,
     ((512, 96), "float32")),
    # the CNN: mkldnn's convolution (padding, stride, dilation at 3, 4, 5) and max pooling with its indices
    ("aten::mkldnn_convolution", [[32, 3, 32, 32], [16, 3, 3, 3], [16], [], [], [], []],
     ["float", "float", "float", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
     ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"], 32 * 16 * 32 * 32 * F, ((32, 16, 32, 32), "float32")),
    ("aten::max_pool2d_with_indices", [[32, 16, 32, 32], [], [], [], [], []],
     ["float", "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
     ["", "[2, 2]", "[2, 2]", "[0, 0]", "[1, 1]", "False"], 32 * 16 * 16 * 16 * 8, ((32, 16, 16, 16), "int64")),
    # ResNet50 on an H100: cuDNN's (padding, stride, dilation at 2, 3, 4): 224 -> 112, a 2 MiB-rounded block
    ("aten::cudnn_convolution", [[32, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], [], [], []],
     ["float", "float", "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", "Scalar", "Scalar"],
     ["", "", "[3, 3]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"], 32 * 64 * 112 * 112 * F,
     ((32, 64, 112, 112), "float32")),
    # factories: aten::empty(size, dtype 6 = float32), empty_strided(size, stride, dtype 4 = int64)
    ("aten::empty", [[], [], [], [], [], []], ["ScalarList", "Scalar", "Scalar", "", "", "Scalar"],
     ["[8, 64, 96]", "6", "0", "", "", "0"], 8 * 64 * 96 * F, ((8, 64, 96), "float32")),
    ("aten::empty_strided", [[], [], [], [], [], []], ["ScalarList", "ScalarList", "Scalar", "Scalar", "", ""],
     ["[64]", "[1]", "4", "0", "", ""], 64 * 8, ((64,), "int64")),
    # a join along its recorded dimension, and a collate's stack along a new first one
    ("aten::cat", [[[2, 3, 17, 17], [2, 3, 17, 17]], []], ["TensorList", "Scalar"], ["", "1"], 2 * 6 * 17 * 17 * F,
     ((2, 6, 17, 17), "")),
    ("aten::stack", [[[64], [64]], []], ["TensorList", "Scalar"], ["", "0"], 2 * 64 * 8, ((2, 64), "")),
])
def test_the_shape_an_op_made_is_the_one_its_inputs_say(name, dims, types, concrete, nbytes, expected):
    assert allocated_shape(name, dims, types, concrete, nbytes) == expected


def test_ceil_mode_pooling_counts_the_last_partial_window():
    """PyTorch's rule: 57 with a 2-wide window, stride 2, ceil_mode: 29 windows (floor: 28)."""
    dims, types = [[64, 64, 57, 57], [], [], [], [], []], ["float"] + ["ScalarList"] * 4 + ["Scalar"]
    ceil = ["", "[2, 2]", "[2, 2]", "[0, 0]", "[1, 1]", "True"]
    assert allocated_shape("aten::max_pool2d", dims, types, ceil, 64 * 64 * 29 * 29 * F) == ((64, 64, 29, 29),
                                                                                          "float32")
    floor = ceil[:5] + ["False"]
    assert allocated_shape("aten::max_pool2d", dims, types, floor, 64 * 64 * 28 * 28 * F)[0] == (64, 64, 28, 28)


def test_a_cuda_block_is_the_closest_tensor_that_fits_it():
    """A CUDA caching block rounds the tensor up: of two inputs that fit a 1.5 MiB block, the one that fills it
    ([3,128,1024] float32, exactly 1.5 MiB) is the buffer, not the position table broadcast into it."""
    dims, types = [[1, 128, 1024], [3, 128, 1024], []], ["float", "float", "Scalar"]
    block = 3 * 128 * 1024 * F
    assert allocated_shape("aten::add", dims, types, ["", "", "1"], block, cached=True) == ((3, 128, 1024),
                                                                                           "float32")
    assert allocated_shape("aten::add", dims, types, ["", "", "1"], 3 * 128 * 1024 * F + 512, cached=False) is None


def test_a_transposed_convolution_is_not_guessed():
    dims = [[8, 16, 7, 7], [16, 8, 3, 3], [8], [], [], [], [], [], []]
    concrete = ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "True", "[1, 1]", "1"]
    made = allocated_shape("aten::convolution", dims, ["float"] * 3 + ["ScalarList"] * 3 + ["Scalar"] * 3,
                           concrete, 8 * 8 * 14 * 14 * F)
    assert made is None  # its 14x14 output is not the forward formula's, and no input is that size


@pytest.mark.parametrize("name,dims,types,concrete", [
    ("aten::empty", [[]], ["ScalarList"], ["[²]", "6"]),  # a digit Python's int() refuses
    ("aten::empty", [[]], ["ScalarList"], ["[8, 64]", "9" * 5000]),  # past int()'s 4,300 digits
    ("aten::empty", [[]], ["ScalarList"], ["[" + ", ".join(["2"] * 100_000) + "]", "6"]),
    ("aten::empty", [[]], ["ScalarList"], ["[-8, 64]", "6"]),
    ("aten::resize_", [[0], [], []], ["float", "ScalarList", ""], ["", "[²,2]", ""]),
    ("aten::max_pool2d", [[8, 16, 32, 32]], ["float"], ["", "[²]", "[2]", "[0]", "[1]", "False"]),
    ("aten::add", [[2 ** 61] * 20_000, [8]], ["float", "float"], ["", ""]),
    ("aten::cat", [[[2] * 64] * 5000, []], ["TensorList", "Scalar"], ["", "0"]),
    ("aten::cat", [[[[1, 2]]], []], ["TensorList", "Scalar"], ["", "99999999999999999999"]),
    ("aten::mm", "not a list", {"a": 1}, 7),
    ("aten::matmul", [[8, 16], [16, None]], ["float", None], None),
])
def test_a_crafted_field_gives_no_shape(name, dims, types, concrete):
    assert allocated_shape(name, dims, types, concrete, 4096) is None


def test_a_tensor_list_is_read_to_its_bound():
    assert len(tensor_shapes([[[3, 4]] * 100_000])) == 4096
    assert tensor_shapes([[1, 2], [[5], "x", [-1]], "y", [[2] * 65]]) == [(1, 2), (5,)]


def test_a_trace_with_crafted_input_fields_reduces():
    """Every field the shapes are read from, crafted, in one trace: it reduces (the batch and sequence it
    cannot read are unknown), and one op with thousands of inputs and thousands of allocations does not make
    each allocation walk them again."""
    events = []
    for i, (dims, types) in enumerate([([[8, "x"]], ["long int"]), ([["²", 64]], ["long int"]),
                                       ([[8, 2 ** 70]], ["long int"]), ([[8, -5]], ["long int"])]):
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::embedding", "pid": 1, "tid": 1, "ts": 10 * i,
                       "dur": 5, "args": {"Input Dims": dims, "Input type": types, "Sequence number": i}})
    wide = [[8, 4]] * 2000
    events.append({"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 100, "dur": 50,
                   "args": {"Input Dims": wide, "Input type": ["float"] * 2000}})
    for n in range(2000):
        events.append({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 101 + n * 0.01,
                       "args": {"Bytes": 12_345, "Addr": n, "Total Allocated": 12_345 * (n + 1), "Device Type": 0,
                                "Device Id": -1}})
    reduced = torch_trace.reduce_trace({"traceEvents": events})
    assert reduced.sequence_length is None and reduced.peak_bytes == 12_345 * 2000


def test_the_weights_are_what_the_optimizer_step_read_not_a_metric_after_it():
    """A training loop that computes accuracy after ``optimizer.step()`` reads the logits [4, 10] there; the
    weights (no buffer shaped like one carries the batch) are what ran inside ``Optimizer.step#``."""
    def op(name, ts, dims, types):
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 1,
                "args": {"Input Dims": dims, "Input type": types}}

    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
              op("aten::linear", 1, [[4, 5], [10, 5], [10]], ["float"] * 3),
              {**op("autograd::engine::evaluate_function: AddmmBackward0", 10, [], []), "args": {"Sequence number": 1}},
              {"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#SGD.step", "pid": 1, "tid": 1, "ts": 20,
               "dur": 10},
              op("aten::_foreach_add_", 21, [[[10, 5], [10]], [[10, 5], [10]], []], ["TensorList", "TensorList", ""]),
              op("aten::argmax", 40, [[4, 10], [], []], ["float", "Scalar", "Scalar"])]
    reduced = torch_trace.reduce_trace({"traceEvents": events})
    assert reduced.weight_dims == [5, 10]
