"""The PyTorch trace reader on small traces written inline (no torch), one rule each (``rules/phases.py``,
``readers/torch_trace.py``): which module an op ran in, its phase under every range that can hold it, and
what the reader does with events it cannot trust. The real runs these rules were written from are in
tests/integration/test_pytorch_corpus.py."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from tb_modelmem.readers import torch_trace
from tb_modelmem.schema.names import BACKWARD, FORWARD, INPUT, LOSS, OPTIMIZER
from tb_modelmem.schema.records import OpTrace


class Trace:
    """Events on one thread, each placed at the next free microsecond unless given."""

    def __init__(self) -> None:
        self.events: List[Dict[str, Any]] = []

    def range(self, name: str, ts: float, dur: float) -> "Trace":
        self.events.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": ts,
                            "dur": dur})
        return self

    def op(self, name: str, ts: float, dur: float = 1.0, seq: Any = None, alloc: int = 0) -> "Trace":
        args: Dict[str, Any] = {} if seq is None else {"Sequence number": seq}
        self.events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                            "args": args})
        if alloc:
            self.events.append({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts + dur / 2,
                                "args": {"Bytes": alloc, "Addr": int(ts * 1000), "Total Allocated": alloc,
                                         "Device Type": 0, "Device Id": -1}})
        return self

    def rows(self) -> Dict[str, Dict[str, Any]]:
        reduced = torch_trace.reduce_trace({"traceEvents": self.events})
        return {row.name: {"layer": row.layer, "phase": row.phase, "time_us": row.time_us, "calls": row.calls}
                for row in reduced.ops}


def test_an_op_is_on_the_innermost_module_and_a_backward_op_on_its_forward_ops_module():
    rows = (Trace().range("tb_modelmem.layer: encoder", 0, 20).range("tb_modelmem.layer: encoder/fc1", 1, 5)
            .op("aten::linear", 2, seq=7).op("aten::relu", 10, seq=8)
            .op("autograd::engine::evaluate_function: AddmmBackward0", 30, seq=7).rows())
    assert rows["encoder/fc1/aten::linear"] == {"layer": "encoder/fc1", "phase": FORWARD, "time_us": 1.0, "calls": 1}
    assert rows["encoder/aten::relu"]["layer"] == "encoder"  # in the parent's own forward, outside fc1
    assert rows["encoder/fc1/AddmmBackward0"] == {"layer": "encoder/fc1", "phase": BACKWARD, "time_us": 1.0,
                                                  "calls": 1}


def test_lightnings_closure_the_forward_and_loss_inside_optimizer_step_the_update_after():
    rows = (Trace().range("Optimizer.step#Adam.step", 0, 100)
            .range("[pl][module]torch.nn.modules.linear.Linear: net.0", 1, 5).op("aten::linear", 2, seq=1)
            .op("aten::cross_entropy_loss", 10, seq=2)  # training_step's loss: numbered, outside the model
            .op("autograd::engine::evaluate_function: NllLossBackward0", 20, seq=2)
            .op("aten::add_", 50).op("aten::mul_", 60).rows())  # the update: gradients off, no number
    assert rows["net/0/aten::linear"]["phase"] == FORWARD and rows["net/0/aten::linear"]["layer"] == "net/0"
    assert rows["aten::cross_entropy_loss"]["phase"] == LOSS
    assert rows["aten::add_"]["phase"] == rows["aten::mul_"]["phase"] == OPTIMIZER
    assert rows["NllLossBackward0"]["phase"] == BACKWARD


def test_in_an_iteration_what_runs_before_the_forward_is_input_and_after_the_backward_the_optimizers():
    rows = (Trace().range("ProfilerStep#0", 0, 100).op("aten::stack", 1, seq=3)  # the batch's collate
            .range("tb_modelmem.layer: fc", 10, 5).op("aten::linear", 11, seq=4)
            .op("autograd::engine::evaluate_function: AddmmBackward0", 30, seq=4)
            .op("aten::_foreach_norm", 40).op("aten::isinf", 45, seq=5)  # gradient clipping, in no range
            .range("Optimizer.step#AdamW.step", 50, 10).op("aten::_fused_adamw_", 51).rows())
    assert rows["aten::stack"]["phase"] == INPUT
    assert rows["aten::_foreach_norm"]["phase"] == rows["aten::isinf"]["phase"] == OPTIMIZER
    assert rows["aten::_fused_adamw_"]["phase"] == OPTIMIZER


def test_one_op_in_two_phases_is_two_rows():
    rows = (Trace().range("ProfilerStep#0", 0, 100).op("aten::stack", 1, seq=1)
            .range("tb_modelmem.layer: fc", 10, 5).op("aten::linear", 11, seq=2)
            .op("autograd::engine::evaluate_function: AddmmBackward0", 30, seq=2).op("aten::stack", 40, dur=3).rows())
    assert rows["aten::stack (input)"]["time_us"] == 1.0 and rows["aten::stack (optimizer)"]["time_us"] == 3.0


def test_ranges_that_do_not_nest_still_say_what_they_hold():
    """Lightning's ProfilerStep#N ends inside Optimizer.step: an op after it is still in the optimizer's range."""
    rows = (Trace().range("ProfilerStep#1", 0, 50).range("Optimizer.step#Adam.step", 20, 60)
            .range("ProfilerStep#2", 51, 100).op("aten::add_", 70).rows())
    assert rows["aten::add_"]["phase"] == OPTIMIZER


def test_a_window_that_starts_inside_an_iteration_is_said():
    trace = (Trace().range("ProfilerStep#3", 0, 100)
             .op("autograd::engine::evaluate_function: ConvolutionBackward0", 1, seq=9)  # the step before's tail
             .range("tb_modelmem.layer: conv", 40, 5).op("aten::conv2d", 41, seq=10))
    reduced = torch_trace.reduce_trace({"traceEvents": trace.events})
    assert "starts inside an iteration" in reduced.allocations_note


def test_the_dataloaders_range_is_input_and_modules_by_instance_join_as_a_path():
    rows = (Trace().range("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 10)
            .op("aten::stack", 1).range("nn.Module: Net_0", 20, 20).range("nn.Module: Linear_1", 21, 5)
            .op("aten::linear", 22, seq=1).rows())
    assert rows["aten::stack"]["phase"] == INPUT
    assert rows["Net_0/Linear_1/aten::linear"]["layer"] == "Net_0/Linear_1"


def test_malformed_events_are_skipped_and_counted_the_rest_read():
    trace = Trace().range("tb_modelmem.layer: fc", 0, 10).op("aten::linear", 1, seq=1, alloc=64)
    trace.events += [{"ph": "X", "cat": "cpu_op", "name": "aten::bad", "pid": [1], "tid": 1, "ts": 5, "dur": 1},
                     {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 6,
                      "args": {"Bytes": 10 ** 300, "Addr": 1}},
                     {"ph": "X", "cat": "cpu_op", "name": "aten::late", "pid": 1, "tid": 1, "ts": float("nan"),
                      "dur": 1}]
    reduced = torch_trace.reduce_trace({"traceEvents": trace.events})
    assert "3 malformed events skipped" in reduced.allocations_note
    assert [row.name for row in reduced.ops] == ["fc/aten::linear"] and reduced.peak_bytes == 64


def test_collectives_are_their_own_rows_out_of_the_backward_op_that_launched_them():
    """DDP: the bucket's all-reduce is launched inside AccumulateGrad's backward op and runs on gloo's thread."""
    trace = (Trace().op("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 0, dur=100, seq=4)
             .op("c10d::allreduce_", 20, dur=60))
    trace.events.append({"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 1, "tid": 2,
                         "ts": 30, "dur": 500, "args": {"Input Dims": [[33088]]}})
    rows = trace.rows()
    assert rows["torch::autograd::AccumulateGrad"]["time_us"] == 40.0  # 100 less the 60 of its all-reduce
    # launched in a backward op: it serves the backward pass; its bucket names no module
    assert rows["c10d::allreduce_ (backward pass)"] == {"layer": "", "phase": "collective", "time_us": 60.0, "calls": 1}
    work = rows["gloo:all_reduce (backward pass)"]  # the backend's work of that call, on its own thread
    assert work["phase"] == "collective" and work["time_us"] == 500.0
    note = torch_trace.reduce_trace({"traceEvents": trace.events}).allocations_note
    assert "1 collective calls are on no module" in note and "DDP bucket" in note


def _call(name: str, ts: float, dims: list, tid: int = 1) -> Dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op" if name.startswith("c10d::") else "user_annotation", "name": name, "pid": 1,
            "tid": tid, "ts": ts, "dur": 5, "args": {"Input Dims": dims, "Input type": ["float"] * len(dims)}}


def test_fsdp2s_gathers_are_on_their_unit_in_the_pass_they_serve():
    """FSDP2 names its unit in its ranges: unit 0 gathered before its forward and again in backward (a
    prefetch inside unit 2's pre-backward), its gradients reduce-scattered after; the gloo thread's work
    takes its call's unit, pass and message, first in first out."""
    trace = (Trace().range("FSDP::pre_forward (0)", 0, 20).range("FSDP::all_gather (0)", 1, 10)
             .range("FSDP::pre_backward (2)", 100, 30).range("FSDP::backward_prefetch for 0", 110, 15)
             .range("FSDP::all_gather (0)", 111, 10).range("FSDP::post_backward_reduce (0)", 200, 20))
    trace.events += [_call("c10d::_allgather_base_", 2, [[16640], [8320]]),
                     _call("c10d::_allgather_base_", 112, [[16640], [8320]]),
                     _call("c10d::_reduce_scatter_base_", 201, [[8320], [16640]]),
                     _call("gloo:all_gather", 3, [[8320]], tid=2), _call("gloo:all_gather", 113, [[8320]], tid=2),
                     _call("gloo:all_reduce", 202, [[16640]], tid=3)]
    reduced = torch_trace.reduce_trace({"traceEvents": trace.events})
    rows = {row.name: row for row in reduced.ops}
    for name in ("0/c10d::_allgather_base_ (forward pass)", "0/c10d::_allgather_base_ (backward pass)",
                 "0/c10d::_reduce_scatter_base_ (backward pass)", "0/gloo:all_gather (forward pass)",
                 "0/gloo:all_gather (backward pass)", "0/gloo:all_reduce (backward pass)"):
        assert rows[name].layer == "0" and rows[name].phase == "collective" and rows[name].calls == 1, name
        assert rows[name].moved_bytes == 16640 * 4, name  # the unit's whole parameters, gathered or reduced
    assert "no module" not in reduced.allocations_note


def test_a_collectives_crafted_figures_are_refused_for_it_alone():
    """Counts no real tensor has (1e300, negative, 8,000 huge dimensions) give the call no message bytes
    (never an overflow, a negative figure, or an hour of big-number products), and an FSDP range name of
    40,000 parentheses names no unit; the trace's other rows are read as ever."""
    trace = Trace().op("aten::mm", 0, dur=10, seq=1).range("FSDP::all_gather " + "(" * 40_000, 20, 50)
    trace.events += [
        {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 21, "dur": 2,
         "args": {"In msg nelems": 1e300, "Out msg nelems": -5, "dtype": "Float"}},
        {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 1, "tid": 1, "ts": 30, "dur": 2,
         "args": {"Input Dims": [[1e300] * 8000], "Input type": ["float"]}},
        {"ph": "X", "cat": "cpu_op", "name": "c10d::broadcast_", "pid": 1, "tid": 1, "ts": 40, "dur": 2,
         "args": {"Input Dims": [[2, 3]], "Input type": ["c10::BFloat16"]}}]
    reduced = torch_trace.reduce_trace({"traceEvents": trace.events})
    rows = {row.op_type: row for row in reduced.ops}
    assert rows["record_param_comms"].moved_bytes == 0 and rows["c10d::allreduce_"].moved_bytes == 0
    assert rows["c10d::broadcast_"].moved_bytes == 12  # 2 x 3 bfloat16
    assert {rows[name].layer for name in ("record_param_comms", "c10d::allreduce_")} == {""}
    assert rows["aten::mm"].time_us == 10.0
    from tb_modelmem.schema import payload

    assert payload.decode(payload.encode(reduced)).ops.column("moved_bytes") == reduced.ops.column("moved_bytes")


def _stacked_then_read(cuda: bool, reader_in_next_step: bool) -> Any:
    """A char-RNN's shape of trace: a top-level ``aten::stack`` of over 30 tensors (recorded as ``[[], []]``)
    allocates [8, 36, 16] floats, and the next top-level op reads [8, 36, 16]: in the same forward pass, or (a
    crafted case) only as the next step's first op, the stack being the last op of the update."""
    events: List[Dict[str, Any]] = []

    def op(name: str, ts: float, dims: Any, types: Any, seq: Any = None) -> None:
        args = {"Input Dims": dims, "Input type": types, **({} if seq is None else {"Sequence number": seq})}
        events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 5,
                       "args": args})

    size = 8 * 36 * 16 * 4
    for step, start in enumerate((0, 1000)):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1,
                       "ts": start, "dur": 900})
        events.append({"ph": "X", "cat": "user_annotation", "name": "tb_modelmem.layer: rnn", "pid": 1, "tid": 1,
                       "ts": start + 1, "dur": 100})
        op("aten::embedding", start + 2, [[100, 16], [8, 36]], ["float", "long int"], seq=1)
        stack_at = start + (600 if reader_in_next_step else 20)
        if step == 0:
            if reader_in_next_step:
                events.append({"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#SGD.step", "pid": 1,
                               "tid": 1, "ts": start + 590, "dur": 100})
            op("aten::stack", stack_at, [[], []], ["TensorList", "Scalar"])
            events.append({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": stack_at + 2,
                           "args": {"Bytes": size, "Addr": 77, "Total Allocated": size,
                                    "Device Type": 1 if cuda else 0, "Device Id": 0 if cuda else -1}})
        if not reader_in_next_step:
            op("aten::linear", start + 40, [[8, 36, 16], [16, 16], [16]], ["float", "float", "float"], seq=2)
    (buffer,) = [b for b in torch_trace.reduce_trace({"traceEvents": events}).peak_buffers.records()
                 if b.op.endswith("aten::stack")]
    return buffer


def test_a_buffer_no_op_shaped_takes_the_next_ops_input_of_its_bytes_in_its_own_phase_on_the_cpu():
    """Exact bytes (torch's CPU count) in the same phase: the next op's input is its shape, and it carries the
    batch and the sequence. Not across a phase (the update's last op, read by the next step's first: it
    reads other tensors), nor on CUDA, whose blocks are rounded (a 2 MiB block is no 1.125 MiB input)."""
    shaped = _stacked_then_read(cuda=False, reader_in_next_step=False)
    assert (shaped.shape, shaped.batch, shaped.seq) == ("[8,36,16]", True, 1)
    for cuda, later in ((False, True), (True, False)):
        unread = _stacked_then_read(cuda=cuda, reader_in_next_step=later)
        assert (unread.shape, unread.batch) == ("", False), (cuda, later, unread)


def test_the_steps_implementation_is_read_inside_optimizer_step_alone_and_when_it_began():
    """Clipping the gradients runs foreach ops after the backward pass, in the update's phase but outside
    ``Optimizer.step``: the step itself, one parameter at a time, says its implementation; and an update that
    allocates nothing (SGD's) still says when it began, after the last allocator event before it."""
    trace = (Trace().op("aten::linear", 0, seq=1, alloc=64)
             .op("autograd::engine::evaluate_function: AddmmBackward0", 10, seq=1, alloc=32)
             .op("aten::_foreach_norm", 20, alloc=8).op("aten::_foreach_mul_", 25)  # clip_grad_norm_
             .range("Optimizer.step#SGD.step", 30, 10).op("aten::add_", 31).op("aten::add_", 33))
    reduced = torch_trace.reduce_trace({"traceEvents": trace.events})
    assert reduced.optimizer_path == "for-loop"
    timeline = reduced.timeline
    (start,) = timeline.update_starts_us  # two ops in one gap between points: one start
    assert timeline.t_us[-1] < start  # after the clip's allocation, the last point
    fused = Trace().range("Optimizer.step#AdamW.step", 0, 10).op("aten::_foreach_add_", 1, alloc=4).op(
        "aten::_fused_adamw_", 3)
    assert torch_trace.reduce_trace({"traceEvents": fused.events}).optimizer_path == "fused"
    assert torch_trace.reduce_trace({"traceEvents": Trace().op("aten::_foreach_norm", 0, alloc=8).events}
                                    ).optimizer_path == ""  # no Optimizer.step: untold


def test_the_optimizer_class_is_what_its_step_ranges_name_and_a_crafted_name_is_none():
    """``Optimizer.step#<class>.step``, torch.optim's range (its ``__class__.__name__``), names the class where no
    breakdown does: a GAN's two optimizers once each, in order; a name no Python class has, and a trace naming
    thousands, say no more than eight real ones."""
    two = (Trace().range("Optimizer.step#Adam.step", 0, 5).range("Optimizer.zero_grad#SGD.zero_grad", 6, 1)
           .range("Optimizer.step#SGD.step", 8, 5).range("Optimizer.step#Adam.step", 14, 5).op("aten::add_", 15))
    assert torch_trace.reduce_trace({"traceEvents": two.events}).optimizer_classes == ["Adam", "SGD"]
    crafted = (Trace().range("Optimizer.step#<img src=x>.step", 0, 5).range("Optimizer.step#Adam.zero_grad", 6, 1)
               .range("Optimizer.step#\u0410dam.step", 7, 1))  # a Cyrillic A: no class torch.optim has
    for n in range(5000):
        crafted.range(f"Optimizer.step#Opt{n}.step", 10 + n, 0.5)
    assert torch_trace.reduce_trace({"traceEvents": crafted.events}).optimizer_classes == [f"Opt{n}" for n in range(8)]
    stored = torch_trace.reduce_trace({"traceEvents": two.events}).to_dict(compact=True)
    for forged in (["<img src=x>"], ["Adam"] * 9):  # a crafted ops summary's
        with pytest.raises(ValueError, match="optimizer_classes"):
            OpTrace.from_dict(dict(stored, optimizer_classes=forged))


def test_the_step_computes_in_what_its_innermost_matrix_products_took_and_a_crafted_type_is_none():
    """Autocast casts a float32 linear's inputs inside it: the outer aten::linear records them float32, the
    aten::addmm it calls bfloat16, so the step computed in bfloat16. A type no float has, or none, says nothing;
    a stored dtype no float has is refused."""
    trace = Trace()
    for i, (name, types) in enumerate([("aten::linear", ["float", "float", "float"]),
                                       ("aten::addmm", ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16"]),
                                       ("aten::mm", ["c10::BFloat16", "c10::BFloat16"]),
                                       ("aten::mm", ["float", "float"]),
                                       ("aten::bmm", ["<img src=x>", "long int"]), ("aten::bmm", [7]),
                                       ("aten::addmm", None)]):
        trace.op(name, 10 * i)
        trace.events[-1]["args"]["Input type"] = types
    reduced = torch_trace.reduce_trace({"traceEvents": trace.events})
    assert reduced.compute_dtype == "bfloat16"
    assert torch_trace.reduce_trace({"traceEvents": Trace().op("aten::add_", 0).events}).compute_dtype == ""
    for forged in ("<img src=x>", "int64"):
        with pytest.raises(ValueError, match="compute_dtype"):
            OpTrace.from_dict(dict(reduced.to_dict(compact=True), compute_dtype=forged))


def test_the_heads_width_is_what_queries_split_before_their_transpose_not_the_scores():
    """GPT-2's queries viewed [batch, seq, heads, width] before their transpose say the heads' width (4 of 24 here);
    attention scores [batch, heads, seq, seq] where the heads are as many as the tokens (12 of 64 at 12 tokens:
    BERT-base) say nothing of it."""
    def op(dims: list) -> Any:
        return torch_trace._Op(name="aten::transpose", ts=0.0, end=1.0, tid=1, dims=dims)

    assert torch_trace._head_width([op([[8, 24, 4, 24]]), op([[8, 4, 24, 24]])], 8, 24) == 24
    assert torch_trace._head_width([op([[8, 12, 12, 12]])], 8, 12) is None
    assert torch_trace._head_width([op([[8, 12, 12, 64]])], 8, 12) is None  # [b, s, s, x]: which is which untold
    assert torch_trace._head_width([op([[8, 24, 4, 24]])], None, 24) is None


def test_a_cycle_cut_in_its_warmup_is_said_so_not_told_to_profile_memory():
    """torch.profiler's repeating schedule writes a last file for a cycle the loop ended in its warmup: a
    ProfilerStep range and no op. Its note said "profile with profile_memory=True" to a user who had."""
    cut = torch_trace.reduce_trace({"traceEvents": Trace().range("ProfilerStep#10", 0, 5).events})
    assert cut.allocations == "none" and "schedule's active steps" in cut.allocations_note
    unprofiled = torch_trace.reduce_trace({"traceEvents": Trace().op("aten::mm", 0).events})
    assert "profile_memory=True" in unprofiled.allocations_note


def test_the_count_before_the_window_is_its_first_events_though_an_instant_lists_them_out_of_order():
    """A second profile in one process starts from what torch's CPU count already held (1,000 B here). At the
    window's first instant two threads' events came listed the later one first: the window was counted from the
    later one's count before it (1,040 B), and the step's peak read 40 B low (a CI run's real trace: a test's own
    reading of it 40 B high). The first is the one whose count before it no other of that instant left."""
    def memory(tid: int, ts: float, size: int, total: int, addr: int) -> Dict[str, Any]:
        return {"ph": "i", "name": "[memory]", "pid": 1, "tid": tid, "ts": ts,
                "args": {"Bytes": size, "Addr": addr, "Total Allocated": total, "Device Type": 0, "Device Id": -1}}

    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 0, "dur": 50, "args": {}},
              memory(1, 10, 500, 1_540, 1), memory(2, 10, 40, 1_040, 2),  # listed later one first
              memory(1, 20, -500, 1_040, 1), memory(2, 30, 4_000, 5_040, 3)]
    reduced = torch_trace.reduce_trace({"traceEvents": events})
    assert reduced.peak_bytes == 5_040 - 1_000


def _recurrent_step(batch_first: str, transposed: bool, optimizer: bool) -> OpTrace:
    """An embedding over [35, 20] ids, an LSTM over its output (as recorded: its input and batch_first), its
    backward accumulating two parameters' gradients, then an update by hand or in torch.optim's range."""
    events: List[Dict[str, Any]] = []

    def op(name: str, ts: float, dims: list, types: list, concrete: Any = None, seq: Any = None) -> None:
        args: Dict[str, Any] = {"Input Dims": dims, "Input type": types}
        if concrete is not None:
            args["Concrete Inputs"] = concrete
        if seq is not None:
            args["Sequence number"] = seq
        events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 1, "args": args})

    op("aten::embedding", 1, [[2000, 200], [35, 20]], ["float", "long int"], seq=1)
    lstm_in = [20, 35, 200] if transposed else [35, 20, 200]
    op("aten::lstm", 3, [lstm_in, [], [[800, 200]], [], [], [], [], [], []],
       ["float", "TensorList", "TensorList", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar"],
       ["", "", "", "True", "1", "0", "True", "False", batch_first], seq=2)
    op("autograd::engine::evaluate_function: LstmBackward0", 10, [], [], seq=2)
    op("torch::autograd::AccumulateGrad", 20, [[800, 200]], ["float"])
    op("torch::autograd::AccumulateGrad", 21, [[2000, 200]], ["float"])
    if optimizer:
        events.append({"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#SGD.step", "pid": 1, "tid": 1,
                       "ts": 29, "dur": 5})
    op("aten::add_", 30, [[2000, 200], [2000, 200], []], ["float", "float", "Scalar"])
    return torch_trace.reduce_trace({"traceEvents": events})


def test_a_time_first_recurrent_input_gives_the_batch_its_second_dimension_and_the_length_its_first():
    time_first = _recurrent_step("False", False, False)
    assert (time_first.batch_size, time_first.sequence_length) == (20, 35)
    # batch_first=True, or ids made time first only for the call ([20, 35] ids transposed): the ids' first
    assert _recurrent_step("True", False, False).batch_size == 35
    assert _recurrent_step("False", True, False).batch_size == 35


def test_with_no_optimizers_range_the_weights_are_what_autograd_accumulated_into():
    by_hand = _recurrent_step("False", False, False)
    assert set(by_hand.weight_dims) == {200, 800, 2000}  # the two parameters' dimensions
    in_range = _recurrent_step("False", False, True)  # torch.optim's range: what ran in it, not autograd's
    assert set(in_range.weight_dims) == {200, 2000}


def _gpt_lookups(positions: list, token_rows: int = 65, position_rows: int = 64) -> OpTrace:
    """nanoGPT's forward pass begins so: its tokens [12, 64] looked up in wte, then ``arange(64)`` in wpe
    (``positions``: the ids as recorded), their sum; the update in torch.optim's range reads both tables."""
    events: List[Dict[str, Any]] = []

    def op(name: str, ts: float, dims: list, types: list) -> None:
        numbered = {"Sequence number": ts} if ts < 29 else {}  # autograd numbers the forward pass's ops
        events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 1,
                       "args": {"Input Dims": dims, "Input type": types, **numbered}})

    op("aten::embedding", 1, [[token_rows, 128], [12, 64]], ["float", "long int"])
    op("aten::embedding", 3, [[position_rows, 128], positions], ["float", "long int"])
    op("aten::add", 5, [[12, 64, 128], [64, 128], []], ["float", "float", "Scalar"])
    events.append({"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#AdamW.step", "pid": 1, "tid": 1,
                   "ts": 29, "dur": 5})
    op("aten::add_", 30, [[token_rows, 128], [token_rows, 128], []], ["float", "float", "Scalar"])
    op("aten::add_", 31, [[position_rows, 128], [position_rows, 128], []], ["float", "float", "Scalar"])
    return torch_trace.reduce_trace({"traceEvents": events})


def test_a_table_looked_up_once_per_position_is_a_position_table_and_its_rows_no_feature():
    for positions in ([64], [1, 64]):  # nanoGPT's arange(t); transformers' position_ids [1, t]
        trace = _gpt_lookups(positions)
        assert (trace.batch_size, trace.sequence_length, trace.position_tables) == (12, 64, [[64, 128]])
        assert set(trace.weight_dims) == {65, 128}  # wpe's 64 rows are positions, not a dimension a buffer has
    # looked up per sample ([12, 64] ids), or with more rows than the sequence: a table of its own size
    assert _gpt_lookups([12, 64]).position_tables == []
    assert _gpt_lookups([64], position_rows=1024).position_tables == []
    # a token table of the position table's shape (a vocabulary of 64 characters) is looked up per sample: its
    # rows are a tied head's logits' last dimension, so that shape's 64 stays a weight's dimension
    tokens = _gpt_lookups([64], token_rows=64)
    assert tokens.position_tables == [] and 64 in tokens.weight_dims
    stored = _gpt_lookups([64]).to_dict(compact=True)
    for forged in ([[]], [[64]], [[0, 128]], [[-1, 128]], [[64, 128]] * 17):  # a crafted ops summary's
        with pytest.raises(ValueError, match="position_tables"):
            OpTrace.from_dict(dict(stored, position_tables=forged))
    assert OpTrace.from_dict(stored).position_tables == [[64, 128]]
