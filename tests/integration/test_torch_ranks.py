"""A PyTorch job's ranks as one item (issue 50): a 2-rank DDP run on gloo, each rank's trace written by
``tensorboard_trace_handler`` (``tests/support/torch_ddp_run.py``, no tb_modelmem code). Truth: each rank's
trace read with ``json`` (the rows keep float32 times: sums agree to 1e-5)."""

from __future__ import annotations

import glob
import json
import os

import pytest

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
    return Served(logdir), events


def _collective_us(events: list) -> float:
    """The c10d ops and the backend's own work ranges, as the trace holds them."""
    return sum(e["dur"] for e in events if e.get("ph") == "X" and (
        (e.get("cat") == "cpu_op" and e["name"].startswith("c10d::"))
        or (e.get("cat") == "user_annotation" and e["name"].startswith("gloo:"))))


def test_the_ranks_are_one_item_a_host_each(job):
    served, traces = job
    assert {tag for run, tag in served.tags() if run == "ddp"} == {"torch/ranks"}
    (item,) = [t for r in served.json("/runs")["runs"] if r["run"] == "ddp" for t in r["tags"]]
    assert item["hosts"] == ["rank0", "rank1"] and item["kind"] == "ops"
    assert {trace["distributedInfo"]["rank"] for trace in traces.values()} == {0, 1}  # what torch says of them


def test_each_ranks_figures_are_its_own_traces(job):
    served, traces = job
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


def test_no_collective_time_is_left_in_a_backward_row(job):
    served, traces = job
    for rank, trace in traces.items():
        ops = served.all_ops("ddp", "torch/ranks", host=rank)
        by_phase = {}
        for row in ops:
            by_phase[row["phase"]] = by_phase.get(row["phase"], 0.0) + row["time_us"]
        assert by_phase["collective"] == pytest.approx(_collective_us(trace["traceEvents"]), rel=1e-5)
        assert not [row for row in ops if row["phase"] != "collective" and row["name"].startswith(("c10d::", "gloo:"))]
        accumulate = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"
                      and e["name"] == "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"]
        launched = sum(e["dur"] for e in trace["traceEvents"] if e.get("cat") == "cpu_op"
                       and e["name"].startswith("c10d::") and any(
                           a["tid"] == e["tid"] and a["ts"] <= e["ts"] < a["ts"] + a["dur"] for a in accumulate))
        row_time = sum(row["time_us"] for row in ops if row["name"].endswith("torch::autograd::AccumulateGrad"))
        assert launched > 0  # DDP launched its all-reduce inside AccumulateGrad's backward op
        assert row_time == pytest.approx(sum(e["dur"] for e in accumulate) - launched, rel=1e-5)
