"""readers/xla.py on the H100 profiles (tests/fixtures/gpu_h100): the GPU events, read here from the
XSpace with the shipped protos, tied to the HLO instructions they ran; time is conserved, each event
named by its instruction lands on it, and the state is what Keras said (truth.json)."""

from __future__ import annotations

import functools
import json
from typing import Any, List

import pytest

from tb_modelmem import proto
from tb_modelmem.readers import hlo, xla
from tests.support import gpu_h100

RUNS = ["keras_jax_lenet", "keras_jax_lenet_nocmdbuf", "keras_jax_transformer"]


@functools.lru_cache(maxsize=None)
def _xspace(run: str) -> Any:
    return proto.XSpace.FromString(gpu_h100.profile_bytes(run))


def _events(run: str) -> List[xla.XlaEvent]:
    """Every event on the GPU plane that carries an ``hlo_op`` (its own stats, then its metadata's)."""
    (plane,) = [p for p in _xspace(run).planes if p.name.startswith("/device:GPU")]
    names = {k: m.name for k, m in plane.stat_metadata.items()}

    def value(stat: Any) -> Any:
        kind = stat.WhichOneof("value")
        return names.get(stat.ref_value) if kind == "ref_value" else getattr(stat, kind) if kind else None

    out = []
    for line in plane.lines:
        for event in line.events:
            meta = plane.event_metadata[event.metadata_id]
            stats = {names[s.metadata_id]: value(s) for s in list(meta.stats) + list(event.stats)}
            if "hlo_op" in stats:
                out.append(xla.XlaEvent(plane.name, line.name, meta.name, line.timestamp_ns * 1000 + event.offset_ps,
                                        event.duration_ps, {k: stats.get(k) for k in xla.STATS}))
    return out


def _attributed(run: str) -> List[xla.XlaEvent]:
    events = _events(run)
    xla.attribute(events, hlo.programs(_xspace(run)))
    return events


@pytest.mark.parametrize("run", RUNS)
def test_every_event_and_its_time_is_in_a_row_or_said_unplaced(run):
    events = _attributed(run)
    assert events
    placed, unplaced = xla.rows(events)
    assert sum(r.duration_ps for r in placed) + sum(u.duration_ps for u in unplaced) == \
        sum(e.duration_ps for e in _events(run))
    assert all(r.calls >= 1 and r.instruction.opcode not in hlo.NO_WORK for r in placed)


@pytest.mark.parametrize("run", ["keras_jax_lenet", "keras_jax_lenet_nocmdbuf"])  # the transformer's: all in buffers
def test_an_event_naming_an_instruction_is_on_that_instruction(run):
    named = 0
    for event in _attributed(run):
        hlo_op = str(event.stats["hlo_op"])
        if event.program is not None and hlo_op in event.program.by_name:
            assert event.method == xla.BY_NAME and event.instruction is not None
            assert event.instruction.name == hlo_op
            named += 1
    assert named


def test_without_command_buffers_every_kernel_names_its_instruction():
    events = _attributed("keras_jax_lenet_nocmdbuf")
    assert not xla.uses_command_buffers(events)
    step = [e for e in events if e.program is not None and e.program.name == "jit_train_step"]
    assert step and all(e.method == xla.BY_NAME for e in step)


def test_with_command_buffers_kernels_are_placed_by_their_graph_node():
    """The default XLA flags: hlo_op names only the command buffer; most kernels are placed by node."""
    events = _attributed("keras_jax_lenet")
    assert xla.uses_command_buffers(events)
    in_buffers = [e for e in events if str(e.stats["hlo_op"]).startswith("command_buffer")]
    assert in_buffers
    placed = [e for e in in_buffers if e.instruction is not None]
    assert len(placed) >= 0.9 * len(in_buffers)
    assert {e.method for e in placed} <= {xla.BY_GRAPH_NODE, xla.BY_KERNEL_NAME, xla.BY_SCHEDULE}


def test_both_lenet_runs_ran_the_same_instructions():
    """The same model and step with and without command buffers: the train step's instructions that ran
    are the same (each run compiled its own program, named alike)."""
    def ran(run: str) -> set:
        placed, _ = xla.rows(_attributed(run))
        return {r.instruction.name for r in placed if r.program.name == "jit_train_step"}
    with_buffers, without = ran("keras_jax_lenet"), ran("keras_jax_lenet_nocmdbuf")
    assert len(with_buffers & without) >= 0.9 * len(without)


@pytest.mark.parametrize("run", RUNS)
def test_the_steps_resident_state_is_what_keras_said(run):
    with open(gpu_h100.TRUTH) as f:
        truth = json.load(f)["runs"][run]
    step = xla.Step(hlo.programs(_xspace(run)), _events(run))
    resident = step.resident()
    assert resident["weight"] == truth["weight_bytes"]
    assert resident["optimizer_slot"] == 2 * truth["weight_bytes"]  # Adam's two moments; its two scalars are not
    assert truth["optimizer_variable_bytes"] - resident["optimizer_slot"] == 8
    assert step.executions() == 2  # truth.json "how": the trace held batches 3 and 4
    assert step.batch_size() == 32  # truth.json "how": model.fit, batch 32
