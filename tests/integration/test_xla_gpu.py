"""XLA-compiled steps on a GPU: Keras 3 on JAX profiled on an NVIDIA H100 (tests/fixtures/gpu_h100, made
by its make_profiles.py; tests/support/gpu_h100.py lays them out as a log dir), read in place by the real backend.
Ground truth: the profiles and their programs read with TensorFlow's own schemas (xplane_pb2, hlo_pb2), and
the fixture's truth.json (what Keras and JAX said in the run: model.weights, optimizer.variables,
memory_stats())."""

from __future__ import annotations

import collections
import gzip
import json
import os
from typing import Any, Dict

import pytest

from tests.support import gpu_h100, xplane_truth
from tests.support.layer_time import rows_on_layers
from tests.support.plugin_harness import Served, layer_rows

RUNS = tuple(gpu_h100.SESSIONS)  # keras_jax_lenet, keras_jax_lenet_nocmdbuf, keras_jax_transformer
# ResNet50, made the same way on an H100 (tests/fixtures/keras_jax_resnet50.truth.json says how), kept gzipped
RESNET50 = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "keras_jax_resnet50")
# bytes per element of xla.PrimitiveType, by name (xla_data.proto)
_ELEMENT_BYTES = {"PRED": 1, "S8": 1, "U8": 1, "S16": 2, "U16": 2, "F16": 2, "BF16": 2, "S32": 4, "U32": 4,
                  "F32": 4, "S64": 8, "U64": 8, "F64": 8}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    logdir = str(tmp_path_factory.mktemp("gpu_h100"))
    for run in RUNS:
        gpu_h100.write_run(logdir, run)
    session = os.path.join(logdir, "keras_jax_resnet50", "train", "plugins", "profile", "2026_11_26_15_42_59")
    os.makedirs(session)
    with gzip.open(RESNET50 + ".xplane.pb.gz") as f, open(os.path.join(session, "vm.xplane.pb"), "wb") as out:
        out.write(f.read())
    session = os.path.join(logdir, "no_node_ids", "train", "plugins", "profile", "2026_11_26_15_42_59")
    os.makedirs(session)
    with open(os.path.join(session, "vm.xplane.pb"), "wb") as out:
        out.write(xplane_truth.without_graph_node_ids(gpu_h100.profile_bytes("keras_jax_transformer")))
    return Served(logdir)


@pytest.fixture(scope="module")
def truth() -> Dict[str, Any]:
    with open(gpu_h100.TRUTH) as f:
        return json.load(f)["runs"]


def _tag(served: Served, run: str) -> str:
    (tag,) = [tag for (r, tag), info in served.tags().items() if r == f"{run}/train" and info["kind"] == "ops"]
    return tag


def _profile(run: str) -> Dict[str, Any]:
    """What the profile holds, read with TensorFlow's schemas (``tests.support.xplane_truth``): the train step's
    program, the time of each instruction its GPU events name, the GPU allocator's bytes in use, and
    the bytes of the step's state parameters (Keras on JAX: state[0] trainable ... state[3] metrics)."""
    from tensorflow.compiler.xla import xla_data_pb2

    if run == "keras_jax_resnet50":
        with gzip.open(RESNET50 + ".xplane.pb.gz") as f:
            data = f.read()
    else:
        data = gpu_h100.profile_bytes(run)
    truth = xplane_truth.read(data, devices="/device:GPU")
    main = truth.main()
    instructions = {i.name: i for c in main.hlo_module.computations for i in c.instructions}
    element = {v.number: v.name for v in xla_data_pb2.PrimitiveType.DESCRIPTOR.values}

    def dense(shape: Any) -> int:
        if shape.tuple_shapes:
            return sum(dense(part) for part in shape.tuple_shapes)
        count = 1
        for d in shape.dimensions:
            count *= d
        return count * _ELEMENT_BYTES.get(element[shape.element_type], 0)

    state: Dict[str, int] = collections.Counter()
    entry = [c for c in main.hlo_module.computations if c.id == main.hlo_module.entry_computation_id][0]
    for i in entry.instructions:
        if i.opcode == "parameter" and i.metadata.op_name.startswith("state["):
            state[i.metadata.op_name[:8]] += dense(i.shape)
    in_use = {name: [allocated for allocated, _ in events] for name, events in truth.in_use.items()}
    return {"time": truth.time, "instructions": instructions, "dense": dense, "in_use": in_use, "state": state,
            "computations": list(main.hlo_module.computations),
            "allocations": list(main.buffer_assignment.buffer_allocations)}


def test_each_instruction_that_ran_is_a_row_with_its_time_and_output(served):
    run = "keras_jax_lenet_nocmdbuf"  # every kernel's hlo_op names its instruction
    truth = _profile(run)
    rows = {row["name"]: row for row in served.all_ops(f"{run}/train", _tag(served, run))}
    assert set(rows) == set(truth["time"]) and len(rows) == 48
    for name, row in rows.items():
        instruction = truth["instructions"][name]
        assert abs(row["time_us"] - truth["time"][name]) <= 0.01 * 8, (name, row["time_us"], truth["time"][name])
        assert row["output_bytes"] == truth["dense"](instruction.shape) and row["bytes_source"] == "derived", row
        assert row["op_type"] in (instruction.opcode, instruction.custom_call_target)
        assert row["calls"] == 2  # two steps in the window
    conv = rows["cudnn-conv-bias-activation.6"]  # conv1's forward convolution, fused with its bias and relu
    assert conv["output_shape"].startswith("[32,28,28,32]") and conv["layer"].endswith("conv1")
    assert conv["phase"] == "forward" and any("jvp(conv1)" in op for op in conv["fused"])


def test_command_buffers_place_every_kernel_on_its_instruction(served):
    """With XLA's command buffers (the default) kernels name only their CUDA graph: each is placed by its
    node's index, and the rows are the ones the same step shows with command buffers off."""
    with_buffers = served.all_ops("keras_jax_lenet/train", _tag(served, "keras_jax_lenet"))
    without = served.all_ops("keras_jax_lenet_nocmdbuf/train", _tag(served, "keras_jax_lenet_nocmdbuf"))
    assert {(r["name"], r["calls"]) for r in with_buffers} == {(r["name"], r["calls"]) for r in without}
    body = served.json("/ops", run="keras_jax_lenet/train", tag=_tag(served, "keras_jax_lenet"))
    xla = body["xla"]
    assert xla["command_buffers"] and xla["attributed_fraction"] == 1.0 and xla["time_us_by_method"]["graph_node"] > 0
    assert "--xla_gpu_enable_command_buffer=" in xla["note"]
    truth = _profile("keras_jax_lenet")
    assert abs(sum(r["time_us"] for r in with_buffers) - sum(truth["time"].values())) < 0.01 * 104


def test_kernel_time_no_rule_placed_is_in_no_phase(served):
    """The transformer's profile without command-buffer node ids (a profiler that does not record them): the
    kernels a command buffer ran that no rule tied to an instruction are "(not attributed)" rows, in no phase
    and on no layer (they read "forward" once), and the layer table's "(unattributed)" row holds their time."""
    run = "no_node_ids"
    tag = _tag(served, run)
    rows = served.all_ops(f"{run}/train", tag)
    left = [r for r in rows if r["op_type"] == "(not attributed)"]
    assert left and all(r["phase"] == "" and r["layer"] == "" for r in left), left[:3]
    body = served.json("/ops", run=f"{run}/train", tag=tag)
    (group,) = [r for r in layer_rows(body) if r.get("group") == ""]
    assert group["label"] == "(unattributed)"
    assert abs(group["time_us"] - sum(r["time_us"] for r in left)) < 0.01 * len(left) + 0.01
    assert abs(group["time_us"] - body["xla"]["time_us_by_method"]["unattributed"]) < 0.01 * len(left) + 0.01
    assert all(r["phase"] != "" for r in rows if r["op_type"] != "(not attributed)")
    assert "no graph node ids" in body["xla"]["note"] and "node's place" not in body["xla"]["note"]


@pytest.mark.parametrize("run", ["keras_jax_lenet_nocmdbuf", "keras_jax_lenet", "keras_jax_transformer"])
def test_forward_and_backward_time_is_on_the_model_layers(served, run):
    """No breakdown beside these profiles: the layer tree comes from the name stacks alone."""
    tag = _tag(served, run)
    body = served.json("/ops", run=f"{run}/train", tag=tag)
    layers = {row["layer"] for row in layer_rows(body) if row["layer"]}
    fraction, elsewhere = rows_on_layers(served.all_ops(f"{run}/train", tag), layers)
    assert fraction >= 0.9, (fraction, elsewhere)
    assert body["xla"]["programs"][0]["name"] == "jit_train_step" and body["steps"] == 2
    if run != "keras_jax_transformer":
        assert {"conv1", "conv2", "fc1", "logits"} <= layers
    else:
        assert {"transformer_block", "transformer_block_1/multi_head_attention_1"} <= layers
    # Forward work never reads a gradient: an instruction that takes a value JAX names transpose(jvp(...)) is not
    # forward, whatever op names it most (a layer norm's gradient fused with the norm's own sums:
    # input_reduce_select_fusion.2 on the transformer). Read off the proto: a tuple element is the tuple's
    # operand at its index, inside a multi-output fusion too, where XLA gives the element the fusion's name
    # (the loss's sum beside dense_5's gradient, which the loss tracker's update reads: not backward).
    profile = _profile(run)
    instructions = profile["instructions"]
    by_id = {i.id: i for i in instructions.values()}
    computations = {c.id: c for c in profile["computations"]}

    def made(operand):
        source = by_id[operand]
        if source.opcode == "get-tuple-element":
            whole = by_id[source.operand_ids[0]]
            if whole.opcode == "fusion":
                whole = by_id[computations[whole.called_computation_ids[0]].root_id]
            source = by_id[whole.operand_ids[source.tuple_index]] if whole.opcode == "tuple" else source
        return source

    rows = {row["name"]: row for row in served.all_ops(f"{run}/train", tag)}
    reads = {name: [made(o) for o in instructions[name].operand_ids if o in by_id]
             for name in rows if name in instructions}
    reads_gradient = [name for name, sources in reads.items()
                      if any("transpose(jvp(" in source.metadata.op_name for source in sources)]
    assert reads_gradient and not [n for n in reads_gradient if rows[n]["phase"] == "forward"], reads_gradient
    metric_updates = [name for name, sources in reads.items() if name not in reads_gradient
                      and any(source.opcode == "parameter" and source.metadata.op_name.startswith("state[3]")
                              for source in sources)]
    assert not [n for n in metric_updates if rows[n]["phase"] == "backward"], metric_updates


@pytest.mark.parametrize("run", RUNS)
def test_the_peak_is_the_gpus_and_splits_to_the_byte(served, truth, run):
    body = served.json("/ops", run=f"{run}/train", tag=_tag(served, run))
    profile = _profile(run)
    gpu_peak = max(profile["in_use"]["GPU_0_bfc"])
    assert body["peak_bytes"] == gpu_peak  # the pinned host allocator's bytes are beside it, never added
    assert {a["name"]: a["counted"] for a in body["allocators"]} == {"GPU_0_bfc": True, "xla_gpu_host_bfc": False}
    if run == "keras_jax_transformer":  # the window held the process's lifetime peak: memory_stats() says it
        assert gpu_peak == truth[run]["memory_stats_after_fit"]["peak_bytes_in_use"]
    peak = body["peak_by_category"]
    parts = {k: v for k, v in peak.items() if k not in ("total", "unknown", "step_peak_bytes")}
    assert sum(parts.values()) == peak["total"] == gpu_peak
    # Resident state: the model's weights and Adam's, from the program's parameters (no breakdown here).
    weights = truth[run]["weight_bytes"]
    assert peak["weights"] == weights == profile["state"]["state[0]"]
    assert peak["optimizer_slots"] == 2 * weights  # m and v
    counters = truth[run]["optimizer_variable_bytes"] - 2 * weights  # Adam's iteration and learning rate
    assert peak["other_state"] == counters + profile["state"]["state[3]"]  # and the metrics' state
    assert peak["unattributed"] < 0.001 * gpu_peak  # the allocator's rounding of those buffers
    # the step's temp allocation, split by the buffers live in it at its peak
    assert peak["activations"] > 0 and peak["gradients"] > 0


def test_the_temp_allocation_splits_into_buffers_on_layers(served):
    run = "keras_jax_lenet_nocmdbuf"
    tag = _tag(served, run)
    timeline = served.json("/timeline", run=f"{run}/train", tag=tag)
    body = served.json("/ops", run=f"{run}/train", tag=tag)
    temp = [temp for temp in body["xla"]["temp_allocations"] if temp["program"] == "jit_train_step"][0]
    truth = _profile(run)
    assert temp["allocation_bytes"] == 22_422_312 == max(
        a.size for a in truth["allocations"] if not (a.is_entry_computation_parameter or a.maybe_live_out
                                                     or a.is_thread_local or a.is_constant or a.is_tuple))
    activations = [b for b in timeline["buffers"] if b["category"] == "activations"]
    layers = {row["layer"] for row in layer_rows(body) if row["layer"]}
    assert activations and {b["layer"] for b in activations} <= layers
    conv1 = [b for b in activations if b["shape"] == "[32,28,28,32]"]  # conv1's output, kept for its backward pass
    assert conv1 and all(b["layer"] == "conv1" and b["bytes"] == 32 * 28 * 28 * 32 * 4 for b in conv1)
    # BFC hands that allocation out whole, never one of its buffers: What if shows no allocator band for it
    whatif = served.json("/whatif", run=f"{run}/train", tag=tag, batch=64)["whatif"]
    assert whatif["peak_bytes"] > body["peak_bytes"] and whatif["band"] is None


def test_resnet50_with_command_buffers(served):
    """ResNet50's step: 3 GB at the peak, BatchNormalization's statistics, 361 buffers live in the temp
    allocation, 113 command buffers (many alike: its blocks repeat), each named after the instruction
    it starts at. The rows are the ones the same step shows with command buffers off."""
    run = "keras_jax_resnet50"
    with open(RESNET50 + ".truth.json") as f:
        truth = json.load(f)
    tag = _tag(served, run)
    body = served.json("/ops", run=f"{run}/train", tag=tag)
    profile = _profile(run)
    peak = body["peak_by_category"]
    assert body["peak_bytes"] == peak["total"] == max(profile["in_use"]["GPU_0_bfc"]) > 3 * 10**9
    assert sum(v for k, v in peak.items() if k not in ("total", "unknown", "step_peak_bytes")) == peak["total"]
    # the lifetime peak memory_stats() read after fit: this window's, up to the allocator's rounding of the batch
    assert 0 <= truth["memory_stats_after_fit"]["peak_bytes_in_use"] - peak["total"] < 1024
    assert peak["weights"] + peak["non_trainable"] == truth["weight_bytes"] and peak["non_trainable"] > 0
    assert peak["optimizer_slots"] == 2 * peak["weights"]  # Adam's m and v of each trainable weight
    assert peak["optimizer_slots"] + 8 == truth["optimizer_variable_bytes"]  # + its iteration and learning rate
    rows = served.all_ops(f"{run}/train", tag)
    xla = body["xla"]
    unplaced = sum(r["time_us"] for r in rows if r["op_type"] == "(not attributed)")
    assert abs(unplaced - xla["time_us_by_method"].get("unattributed", 0)) < 0.01 * len(rows)
    assert xla["attributed_fraction"] == 1.0 and xla["command_buffers"]
    with gzip.open(RESNET50 + "_nocmdbuf.xplane.pb.gz") as f:  # every kernel's hlo_op names its instruction
        named = set(xplane_truth.read(f.read(), devices="/device:GPU").time)
    assert {r["name"] for r in rows} == named and len(named) == 1204
    assert {r["calls"] for r in rows} == {2}  # two steps: no instruction got another's kernels
    assert abs(sum(r["time_us"] for r in rows) - sum(profile["time"].values())) < 0.01 * len(rows) + 1
    layers = {row["layer"] for row in layer_rows(body) if row["layer"]}
    fraction, elsewhere = rows_on_layers(rows, layers)
    assert fraction >= 0.95, (fraction, elsewhere)
