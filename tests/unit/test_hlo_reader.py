"""readers/hlo.py on the H100 profiles (tests/fixtures/gpu_h100): each figure checked against the
HloProto read here field by field with the shipped protos, or against what Keras and JAX said in
those runs (truth.json)."""

from __future__ import annotations

import functools
import json
import math
from typing import Any, Dict

import pytest

from tb_modelmem import proto
from tb_modelmem.readers import hlo
from tests.support import gpu_h100

RUNS = ["keras_jax_lenet", "keras_jax_lenet_nocmdbuf", "keras_jax_transformer"]
BYTES_PER_ELEMENT = {1: 1, 2: 1, 4: 4, 5: 8, 6: 1, 8: 4, 10: 2, 11: 4, 12: 8, 16: 2}  # xla.PrimitiveType
TUPLE = 13


@functools.lru_cache(maxsize=None)
def _xspace(run: str) -> Any:
    return proto.XSpace.FromString(gpu_h100.profile_bytes(run))


def _truth(run: str) -> Dict[str, Any]:
    with open(gpu_h100.TRUTH) as f:
        return json.load(f)["runs"][run]


def _raw_programs(xspace: Any) -> Dict[int, Any]:
    """program_id -> HloProto, from the metadata plane's event metadata, as the profiler stores them."""
    (plane,) = [p for p in xspace.planes if p.name == "/host:metadata"]
    names = {k: m.name for k, m in plane.stat_metadata.items()}
    found = {}
    for metadata in plane.event_metadata.values():
        stats = {names[s.metadata_id]: s for s in metadata.stats}
        if "Hlo Proto" in stats:
            found[stats["program_id"].uint64_value or stats["program_id"].int64_value] = \
                proto.HloProto.FromString(stats["Hlo Proto"].bytes_value)
    return found


def _train_step(run: str) -> hlo.Program:
    (step,) = [p for p in hlo.programs(_xspace(run)).values() if p.name == "jit_train_step"]
    return step


def _dense_bytes(shape: Any) -> int:
    if shape.element_type == TUPLE:
        return sum(_dense_bytes(part) for part in shape.tuple_shapes)
    return math.prod(shape.dimensions) * BYTES_PER_ELEMENT.get(shape.element_type, 0)


@pytest.mark.parametrize("run", RUNS)
def test_every_program_the_profile_keeps_is_read_by_its_program_id(run):
    raw = _raw_programs(_xspace(run))
    programs = hlo.programs(_xspace(run))
    assert sorted(programs) == sorted(raw) and len(raw) > 1
    for program_id, program in programs.items():
        assert program.name == raw[program_id].hlo_module.name
        assert len(program.instructions) == sum(len(c.instructions) for c in raw[program_id].hlo_module.computations)


@pytest.mark.parametrize("run", RUNS)
def test_jax_wrote_the_profile(run):
    assert hlo.written_by_jax(_xspace(run))
    assert not hlo.written_by_jax(proto.XSpace())


@pytest.mark.parametrize("run", RUNS)
def test_the_train_steps_parameters_hold_what_keras_said(run):
    truth = _truth(run)
    parameters = _train_step(run).parameters()
    weights = [p for p in parameters if p.op_name.startswith("state[0]")]
    assert sum(p.bytes for p in weights) == truth["weight_bytes"]
    assert sum(math.prod(p.dims) for p in weights) == truth["params"]
    assert sum(p.bytes for p in parameters if p.op_name.startswith("state[2]")) == truth["optimizer_variable_bytes"]


@pytest.mark.parametrize("run", RUNS)
def test_each_instructions_shape_and_bytes_are_its_protos(run):
    step = _train_step(run)
    raw = {i.id: i for c in step._hlo.hlo_module.computations for i in c.instructions}
    for iid, instruction in step.instructions.items():
        assert instruction.name == raw[iid].name and instruction.opcode == raw[iid].opcode
        if raw[iid].shape.element_type in BYTES_PER_ELEMENT or raw[iid].shape.element_type == TUPLE:
            assert instruction.bytes == _dense_bytes(raw[iid].shape), instruction.name


def _largest_temp_allocation(step: hlo.Program) -> int:
    """Bytes of the program's largest temp allocation on the device (color 0), read from its buffer
    assignment here: no entry parameter, constant, thread-local scalar, pointer table or output."""
    allocations = step._hlo.buffer_assignment.buffer_allocations
    return max(a.size for a in allocations if a.color == 0 and not (
        a.is_entry_computation_parameter or a.is_constant or a.is_thread_local or a.is_tuple or a.maybe_live_out))


@pytest.mark.parametrize("run", RUNS)
def test_the_temp_peak_is_buffers_live_in_the_largest_temp_allocation(run):
    step = _train_step(run)
    peak = step.temp_peak()
    assert peak is not None
    assert peak.live_bytes == sum(b.bytes for b in peak.live)
    assert peak.allocation_bytes == _largest_temp_allocation(step)
    assert 0.5 * peak.allocation_bytes < peak.live_bytes <= peak.allocation_bytes
    assert peak.allocation_bytes <= _truth(run)["memory_stats_after_fit"]["peak_bytes_in_use"]


def test_the_transformers_largest_allocation_is_its_train_steps_temp_allocation():
    """What JAX's memory_stats() said after fit (largest_alloc_size) is the temp allocation's bytes
    rounded up to the BFC allocator's 256-byte granularity."""
    peak = _train_step("keras_jax_transformer").temp_peak()
    assert peak is not None
    assert -(-peak.allocation_bytes // 256) * 256 == \
        _truth("keras_jax_transformer")["memory_stats_after_fit"]["largest_alloc_size"]


@pytest.mark.parametrize("run", RUNS)
def test_work_is_the_entry_instructions_that_launch_work_in_schedule_order(run):
    step = _train_step(run)
    module = step._hlo.hlo_module
    sequence = list(module.schedule.sequences[module.entry_computation_id].instruction_ids)
    (entry,) = [c for c in module.computations if c.id == module.entry_computation_id]
    opcodes = {i.id: i.opcode for i in entry.instructions}
    assert [i.id for i in step.work()] == [iid for iid in sequence if opcodes[iid] not in hlo.NO_WORK]
    assert all(step.order[a.id] < step.order[b.id] for a, b in zip(step.work(), step.work()[1:]))


@pytest.mark.parametrize("run", RUNS)
def test_an_instruction_with_its_own_op_name_implements_that_op(run):
    step = _train_step(run)
    named = [i for i in step.entry() if i.op_name][:50]
    assert named
    for instruction in named:
        assert step.framework_ops(instruction.id) == (instruction.op_name,)


@pytest.mark.parametrize("run", RUNS)
def test_a_fusion_implements_the_ops_of_the_instructions_it_calls(run):
    step = _train_step(run)
    computations = {c.id: c for c in step._hlo.hlo_module.computations}
    fusions = [i for i in step.entry() if i.opcode == "fusion" and not i.op_name][:30]
    for fusion in fusions:
        inside, pending, seen = set(), list(fusion.called_computation_ids), set()
        while pending:  # the fused computation and what it calls in turn
            computation = computations[pending.pop()]
            if computation.id not in seen:
                seen.add(computation.id)
                for raw in computation.instructions:
                    if raw.metadata.op_name and raw.opcode != "parameter":
                        inside.add(raw.metadata.op_name)
                    pending.extend(raw.called_computation_ids)
        if inside:
            assert set(step.framework_ops(fusion.id)) == inside


def test_kernel_names_and_shape_text():
    step = _train_step("keras_jax_lenet_nocmdbuf")
    for name, instruction in step.kernel_names().items():
        assert name == hlo.kernel_name(instruction) == instruction.name.replace(".", "_").replace("-", "_")
    shape = proto.HloProto().hlo_module.computations.add().instructions.add().shape
    shape.element_type, shape.dimensions[:] = 11, [32, 28, 28, 1]
    assert hlo.shape_text(shape) == ("[32,28,28,1]", "float32", 32 * 28 * 28 * 4)
    tuple_shape = type(shape)(element_type=TUPLE, tuple_shapes=[shape, type(shape)(element_type=16, dimensions=[3])])
    assert hlo.shape_text(tuple_shape) == ("[32,28,28,1];[3]", "float32;bfloat16", 32 * 28 * 28 * 4 + 6)


def _program(computations: list, frames: list = ()) -> hlo.Program:
    module = proto.HloProto()
    module.hlo_module.name = "crafted"
    for cid, instructions in computations:
        computation = module.hlo_module.computations.add(id=cid, name=f"c{cid}")
        for iid, called, frame in instructions:
            raw = computation.instructions.add(id=iid, name=f"i{iid}", opcode="fusion" if called else "add")
            raw.called_computation_ids.extend(called)
            raw.metadata.stack_frame_id = frame
        computation.root_id = instructions[0][0]
    index = module.hlo_module.stack_frame_index
    for path, line, function in frames:
        index.file_names.append(path)
        index.function_names.append(function)
        index.file_locations.add(file_name_id=len(index.file_names), function_name_id=len(index.function_names),
                                 line=line)
        index.stack_frames.add(file_location_id=len(index.file_locations), parent_frame_id=len(index.stack_frames))
    module.hlo_module.entry_computation_id = computations[0][0]
    return hlo.Program(0, module)


def test_the_source_is_the_innermost_frame_in_the_users_script():
    # frame 1: the training script; frame 2 (called from 1): flax's Conv, an installed package
    program = _program([(0, [(1, [], 2), (2, [7], 0)]), (7, [(8, [], 1)])],
                       frames=[("/home/me/train.py", 13, "CNN.__call__"),
                               ("/venv/lib/python3.11/site-packages/flax/nnx/nn/linear.py", 300, "Conv.__call__")])
    assert program.source(program.instructions[1]) == "train.py:13 CNN.__call__"
    assert program.source(program.instructions[2]) == "train.py:13 CNN.__call__"  # a fusion: its root's


def test_a_crafted_program_of_shared_nested_fusions_is_read_in_linear_time():
    """30 computations of 30 fusions each calling the next and none keeping a frame: each computation is
    worked out once (walking every path was 30^4 visits a row: seconds), and a cycle back ends."""
    depth, width = 30, 30
    computations = [(c, [(c * 100 + i, [c + 1] if c + 1 < depth else [0], 0) for i in range(width)])
                    for c in range(depth)]
    program = _program(computations)
    rows = [program.instructions[c * 100 + i] for c in range(depth) for i in range(width)]
    assert {program.source(row) for row in rows} == {""}
    assert len(program._computation_frames) == depth
