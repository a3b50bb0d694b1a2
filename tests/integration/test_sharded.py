"""Steps spread over 8 CPU devices (Keras 3 on JAX): Storage per device, Ops per device, XLA's planned
peak, and What-if over devices, each checked against what JAX itself says (``tests/support/sharded_run``:
the arrays' ``addressable_shards``, the compiled step's ``memory_analysis()``), never against tb_modelmem.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

import tb_modelmem
from tests.support import xla_plan
from tests.support.paths import REPO
from tests.support.plugin_harness import Served

LAYOUTS = ("single", "dp", "dp2", "2x4", "zero1")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each layout's log dir and JAX's truth, trained once for the module (~6 s each)."""
    pytest.importorskip("jax")
    root = tmp_path_factory.mktemp("sharded")
    out = {}
    for layout in LAYOUTS:
        logdir = str(root / layout)
        profiled = [str(root / f"{layout}_profile")] if layout in ("dp", "2x4") else []  # jax.profiler alone
        result = subprocess.run([sys.executable, "-m", "tests.support.sharded_run", layout, logdir, *profiled],
                                cwd=REPO,
                                capture_output=True, text=True, timeout=600,
                                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO))
        assert result.returncode == 0, result.stderr[-3000:]
        assert "tb_modelmem" not in result.stderr, result.stderr[-3000:]  # no capture warning
        out[layout] = (logdir, json.loads(result.stdout.strip().splitlines()[-1]))
    return out


@pytest.mark.parametrize("layout", ["dp", "dp2", "2x4", "zero1"])
def test_each_device_holds_what_its_shards_hold(runs, layout):
    logdir, truth = runs[layout]
    storage = Served(logdir).json("/breakdown", run="train", tag="storage")
    rows = {row["device"]: row["by_role"] for row in storage["devices"]["rows"]}
    assert len(rows) == len(truth["weights"]) == (2 if layout == "dp2" else 8)
    for device, weights in truth["weights"].items():
        held = rows[f"/device:CPU:{device}"]
        assert held["weight"] == weights
        assert held.get("optimizer_slot", 0) + held.get("other", 0) == truth["optimizer"][device]
    assert storage["devices"]["logical"]["weight"] == truth["weights_global"]


def test_a_sharded_variable_says_its_pieces(runs):
    logdir, truth = runs["2x4"]
    variables = {v["name"]: v for v in Served(logdir).all_variables("train", "storage")}
    kernel = variables["mlp/big2/kernel"]
    assert (kernel["shards"], kernel["replicas"]) == (4, 2)
    assert kernel["device_bytes"] == [truth["variables"]["mlp/big2/kernel"]["per_device"][str(i)] for i in range(8)]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_planned_peak_is_xlas_own_plan_per_device(runs, layout):
    """JAX records no allocation on a CPU: the peak is the compiled step's buffer assignment, equal to
    JAX's memory_analysis() of the step Keras compiles, split to the byte."""
    logdir, truth = runs[layout]
    ops = Served(logdir).json("/ops", run="train", tag="ops")
    assert ops["allocations"] == "planned"
    assert ops["peak_bytes"] == xla_plan.peak(truth["planned"]), (ops["peak_bytes"], truth["planned"])
    split = ops["peak_by_category"]
    assert split["total"] == ops["peak_bytes"] and split["unattributed"] <= 64, split
    per_device_weights = truth["weights"]["0"]
    assert split["weights"] == per_device_weights


@pytest.mark.parametrize("layout", ["dp", "2x4"])
def test_ops_count_steps_per_device_and_collectives_apart(runs, layout):
    logdir, _ = runs[layout]
    served = Served(logdir)
    ops = served.json("/ops", run="train", tag="ops")
    assert ops["steps"] == 2 and ops["devices"] == [f"/device:CPU:{i}" for i in range(8)]
    # the same program on each device: the top charts list one device's ops, each once
    assert ops["top_device"] in ops["devices"]
    assert len({row["name"] for row in ops["top_bytes"]}) == len(ops["top_bytes"]) > 5
    rows = [row for row in served.all_ops("train", "ops") if row["device"] == "/device:CPU:0"]
    assert {row["calls"] for row in rows} == {2}  # the train step, run twice on each device
    collectives = [row for row in rows if row["phase"] == "collective"]
    assert collectives and all(row["op_type"].startswith(("all-", "reduce-", "collective-")) or "all" in row["name"]
                               for row in collectives), collectives
    # each Adam update that moves a weight-sized buffer is on its weight's layer
    updates = [row for row in rows if row["phase"] == "optimizer" and (row["output_bytes"] or 0) > 1024]
    assert updates and all(row["layer"] for row in updates), [r["name"] for r in updates if not r["layer"]]


@pytest.mark.parametrize("layout, shard, replicas", [("dp", None, 8), ("dp2", None, 2), ("zero1", "optimizer", 8)])
def test_a_single_device_trace_projects_to_a_real_sharded_run(runs, layout, shard, replicas):
    """What if the one-device step ran data parallel over 8 or 2 devices (optimizer state sharded for
    zero1): the projection against XLA's own plan of that real run, per device."""
    single, _ = runs["single"]
    _, truth = runs[layout]
    projected = tb_modelmem.estimate(single, batch=truth["batch"], replicas=replicas, shard=shard)
    real = xla_plan.peak(truth["planned"])
    assert abs(projected["peak_bytes"] - real) <= 0.05 * real, (projected["peak_bytes"], real)
    assert projected["by_category"]["optimizer_slots"] <= truth["optimizer"]["0"]


def test_a_weights_piece_is_no_batch(runs):
    """A (2, 4) mesh's per-device gradient of big1/kernel is [2048, 512]: no weight has that global shape,
    yet it is a piece of one, so it does not grow with the batch."""
    logdir, _ = runs["2x4"]
    whatif = Served(logdir).json("/whatif", run="train", tag="ops", devices=8, shard="optimizer")["whatif"]
    (gradients,) = [line for line in whatif["basis"] if line["category"] == "gradients"]
    assert gradients["formula"].startswith("none carries the batch"), gradients


def test_estimate_json_gives_a_sharded_runs_per_device_peak(runs):
    logdir, truth = runs["2x4"]
    result = subprocess.run([sys.executable, "-m", "tb_modelmem.cli", "estimate", logdir, "--json"], cwd=REPO,
                            capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=REPO))
    assert result.returncode == 0, result.stderr[-2000:]
    body = json.loads(result.stdout)
    assert body["peak_bytes"] == xla_plan.peak(truth["planned"])
    assert body["by_category"]["weights"] == truth["weights"]["0"]


def test_a_multi_host_session_gives_each_hosts_devices_and_planned_peak(runs, tmp_path):
    """One profile session of two hosts (each file a real 8-device jax.profiler profile, written with no
    tb_modelmem code): a row per host with its devices and its planned per-device peak."""
    session = tmp_path / "logs" / "job" / "plugins" / "profile" / "2026_11_28_00_00_00"
    session.mkdir(parents=True)
    for host, layout in (("worker0", "dp"), ("worker1", "2x4")):
        (found,) = glob.glob(os.path.join(runs[layout][0] + "_profile", "**", "*.xplane.pb"), recursive=True)
        shutil.copy(found, session / f"{host}.xplane.pb")
    served = Served(str(tmp_path / "logs"))
    body = served.hosts("job", "profile/2026_11_28_00_00_00")  # each host reduced, not only the first
    rows = {row["host"]: row for row in body["rows"]}
    assert set(rows) == {"worker0", "worker1"} and not body["errors"]
    for host, layout in (("worker0", "dp"), ("worker1", "2x4")):
        assert rows[host]["planned"] and len(rows[host]["devices"]) == 8
        assert rows[host]["peak_bytes"] == xla_plan.peak(runs[layout][1]["planned"])
