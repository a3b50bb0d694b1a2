"""A PyTorch job's ranks as one item (issue 50): a 2-rank DDP run on gloo, each rank's trace written by
``tensorboard_trace_handler`` (``tests/support/torch_ddp_run.py``, no tb_modelmem code). Truth: each rank's
trace read with ``json`` (the rows keep float32 times: sums agree to 1e-5)."""

from __future__ import annotations

import glob
import json
import math
import os

import pytest

import tb_modelmem
from tb_modelmem.readers.logdir import read_run
from tests.support import run_worker
from tests.support.plugin_harness import Served


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    logdir = str(tmp_path_factory.mktemp("ddp"))
    run_worker("tests.support.torch_ddp_run", logdir)
    events = {}
    for path in glob.glob(os.path.join(logdir, "ddp", "*.pt.trace.json")):
        with open(path) as f:
            trace = json.load(f)
        events[os.path.basename(path).split(".")[0]] = trace
    return Served(logdir), events, logdir


def _collective_us(events: list) -> float:
    """The c10d ops and the backend's own work ranges, as the trace holds them."""
    return sum(e["dur"] for e in events if e.get("ph") == "X" and (
        (e.get("cat") == "cpu_op" and e["name"].startswith("c10d::"))
        or (e.get("cat") == "user_annotation" and e["name"].startswith("gloo:"))))


def test_the_ranks_are_one_item_a_host_each(job):
    served, traces, _ = job
    assert {tag for run, tag in served.tags() if run == "ddp"} == {"torch/ranks"}
    (item,) = [t for r in served.json("/runs")["runs"] if r["run"] == "ddp" for t in r["tags"]]
    assert item["hosts"] == ["rank0", "rank1"] and item["kind"] == "ops"
    assert {trace["distributedInfo"]["rank"] for trace in traces.values()} == {0, 1}  # what torch says of them


def test_each_ranks_figures_are_its_own_traces(job):
    served, traces, _ = job
    rows = {row["host"]: row for row in served.hosts("ddp", "torch/ranks")["rows"]}
    for rank, trace in traces.items():
        events = trace["traceEvents"]
        highest = max(e["args"]["Total Allocated"] for e in events if e.get("name") == "[memory]")
        assert rows[rank]["peak_bytes"] == highest  # a first profile in its process: counted from 0
        assert rows[rank]["collective_us"] == pytest.approx(_collective_us(events), rel=1e-5)
        assert rows[rank]["collective_us"] > 0
        body = served.json("/ops", run="ddp", tag="torch/ranks", host=rank)
        assert body["peak_bytes"] == highest and body["total_time_us"] == pytest.approx(rows[rank]["time_us"])
    # rank 1 trained on twice rank 0's batch: its peak is the job's highest
    assert rows["rank1"]["peak_bytes"] > rows["rank0"]["peak_bytes"]


def test_the_command_line_reads_the_rank_the_tab_opens_on(job):
    """The CLI read a job's newest trace file, whichever rank wrote last, where the tab's item opens on rank0;
    rank 1 trained on twice rank 0's batch, so the two told two peaks. Both read rank0 now, and say so."""
    served, traces, logdir = job
    highest = max(e["args"]["Total Allocated"] for e in traces["rank0"]["traceEvents"] if e.get("name") == "[memory]")
    tab = served.json("/whatif", run="ddp", tag="torch/ranks")["whatif"]
    cli = tb_modelmem.estimate(logdir, run="ddp")
    assert tab["traced"]["peak_bytes"] == cli["traced"]["peak_bytes"] == highest
    assert read_run(logdir, "ddp").source.endswith("(worker rank0, 1 of 2)")


def test_no_collective_time_is_left_in_a_backward_row(job):
    served, traces, _ = job
    for rank, trace in traces.items():
        ops = served.all_ops("ddp", "torch/ranks", host=rank)
        by_phase = {}
        for row in ops:
            by_phase[row["phase"]] = by_phase.get(row["phase"], 0.0) + row["time_us"]
        assert by_phase["collective"] == pytest.approx(_collective_us(trace["traceEvents"]), rel=1e-5)
        assert not [row for row in ops if row["phase"] != "collective" and row["name"].startswith(("c10d::", "gloo:"))]
        accumulate = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"
                      and e["name"] == "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"]
        inside = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op" and e["name"].startswith("c10d::")
                  and any(a["tid"] == e["tid"] and a["ts"] <= e["ts"] < a["ts"] + a["dur"] for a in accumulate)]
        launched = sum(e["dur"] for e in inside)
        row_time = sum(row["time_us"] for row in ops if row["name"].endswith("torch::autograd::AccumulateGrad"))
        assert launched > 0  # DDP launched its all-reduce inside AccumulateGrad's backward op
        # a time is an end less a start, each ~5.8e12 us as the trace stamps them, where a float64 resolves 0.001 us;
        # what is left of AccumulateGrad (~130 us, a twentieth of it) held to 1e-5 was held to about that
        resolution = len(accumulate + inside) * math.ulp(max(e["ts"] + e["dur"] for e in accumulate + inside))
        assert row_time == pytest.approx(sum(e["dur"] for e in accumulate) - launched, rel=1e-5, abs=resolution)


@pytest.fixture(scope="module")
def fsdp2_job(tmp_path_factory):
    """The same MLP sharded with FSDP2 (``fully_shard`` on each Linear and on the model), Adam, 2 gloo ranks."""
    logdir = str(tmp_path_factory.mktemp("fsdp2"))
    run_worker("tests.support.torch_ddp_run", logdir, "fsdp2")
    traces = {}
    for path in glob.glob(os.path.join(logdir, "fsdp2", "*.pt.trace.json")):
        with open(path) as f:
            traces[os.path.basename(path).split(".")[0]] = json.load(f)
    return Served(logdir), traces


def _unit_bytes() -> dict:
    """Each FSDP2 unit's parameters in bytes, from the model itself (the worker's MLP): what an all-gather
    of the unit gathers and a reduce-scatter of its gradients reduces."""
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
    return {name: sum(p.numel() * p.element_size() for p in model[int(name)].parameters()) for name in ("0", "2")}


def _calls_by_pass(events: list, name: str) -> dict:
    """{(message bytes, pass): calls} of the c10d op ``name``, its pass told by json alone, by when it runs:
    backward from its iteration's first autograd engine op on (the backward pass, its end-of-pass callbacks
    included), forward before it."""
    iterations = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("ph") == "X"
                        and str(e.get("name", "")).startswith("ProfilerStep#"))
    engine = [e["ts"] for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"
              and e["name"].startswith("autograd::engine::evaluate_function")]
    found: dict = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e["name"] == name:
            start, end = next(span for span in iterations if span[0] <= e["ts"] < span[1])
            backward_from = min(ts for ts in engine if start <= ts < end)
            size = max(d[0] * 4 for d in e["args"]["Input Dims"] if d)
            key = (size, "backward" if e["ts"] >= backward_from else "forward")
            found[key] = found.get(key, 0) + 1
    return found


def test_fsdp2s_ranks_and_collective_time_are_their_traces(fsdp2_job):
    served, traces = fsdp2_job
    assert {tag for run, tag in served.tags() if run == "fsdp2"} == {"torch/ranks"}
    rows = {row["host"]: row for row in served.hosts("fsdp2", "torch/ranks")["rows"]}
    assert set(rows) == {"rank0", "rank1"}
    for rank, trace in traces.items():
        events = trace["traceEvents"]
        assert rows[rank]["peak_bytes"] == max(e["args"]["Total Allocated"] for e in events
                                               if e.get("name") == "[memory]")
        truth = _collective_us(events)
        assert rows[rank]["collective_us"] == pytest.approx(truth, rel=0.05)
        ops = served.all_ops("fsdp2", "torch/ranks", host=rank)
        assert sum(r["time_us"] for r in ops if r["phase"] == "collective") == pytest.approx(truth, rel=0.05)
        assert not [r for r in ops if r["phase"] != "collective" and r["op_type"].startswith(("c10d::", "gloo:"))]


def test_fsdp2s_gathers_are_on_their_units_in_their_pass_and_reduce_scatters_backward(fsdp2_job):
    served, traces = fsdp2_job
    units = _unit_bytes()
    unit_of = {size: unit for unit, size in units.items()}
    assert len(unit_of) == 2  # the two units' sizes tell them apart
    for rank, trace in traces.items():
        ops = served.all_ops("fsdp2", "torch/ranks", host=rank)
        for op, passes in (("c10d::_allgather_base_", ("forward", "backward")),
                           ("c10d::_reduce_scatter_base_", ("backward",))):
            truth = _calls_by_pass(trace["traceEvents"], op)
            assert {p for _, p in truth} == set(passes), truth
            for (size, serves), calls in truth.items():
                unit = unit_of[size]
                (row,) = [r for r in ops if r["op_type"] == op and r["layer"] == unit
                          and r["name"].endswith(f"({serves} pass)")]
                assert row["calls"] == calls and row["moved_bytes"] == calls * units[unit], (row, calls)


def test_tb_modelmems_own_capture_writes_once_and_keeps_each_ranks_trace(tmp_path):
    """``tb_modelmem.pytorch.profile`` on every rank of a DDP job: rank 0 alone writes the event files (both
    ranks would write the same tags), and each rank's window trace is kept in <log dir>/ranks, the job's
    Ranks item, with each op on its module."""
    import torch

    logdir = str(tmp_path)
    run_worker("tests.support.torch_ddp_run", logdir, "profiled")
    events = glob.glob(os.path.join(logdir, "profiled", "events.out.tfevents.*"))
    assert len(events) == 1  # rank 0's
    kept = sorted(os.path.basename(p) for p in glob.glob(os.path.join(logdir, "profiled", "ranks", "*")))
    assert kept == ["rank0.4.pt.trace.json", "rank1.4.pt.trace.json"]
    served = Served(logdir)
    tags = set(served.tags())
    assert {("profiled", "storage"), ("profiled", "ops"), ("profiled/ranks", "torch/ranks")} <= tags
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
    storage = served.json("/breakdown", run="profiled", tag="storage")
    assert storage["totals"]["weight"] == sum(p.numel() * 4 for p in model.parameters())  # DDP's replica: whole
    rows = {row["host"]: row for row in served.hosts("profiled/ranks", "torch/ranks")["rows"]}
    for rank in ("rank0", "rank1"):
        with open(os.path.join(logdir, "profiled", "ranks", f"{rank}.4.pt.trace.json")) as f:
            trace = json.load(f)["traceEvents"]
        highest = max(e["args"]["Total Allocated"] for e in trace if e.get("name") == "[memory]")
        assert rows[rank]["peak_bytes"] == highest
        ops = served.all_ops("profiled/ranks", "torch/ranks", host=rank)
        assert {"module/0", "module/2"} <= {r["layer"] for r in ops}  # DDP's module paths, as Storage names them
        assert any(r["phase"] == "collective" and r["name"].endswith("(backward pass)") for r in ops)
