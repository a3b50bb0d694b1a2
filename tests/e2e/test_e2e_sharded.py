"""Keras 3 on JAX over 8 CPU devices (a 2x4 ModelParallel mesh, ``tests.support.sharded_run``) as a user sees it in
Chromium: Storage's Per device table holds, for each device, the weights JAX itself says that device holds, and the
Ops view offers each of the 8 devices, whose pick narrows the op table to that device's rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.browser import TABLE_FIT, Tab
from tests.support.tensorboard_process import TensorBoardProcess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEVICE_CELLS = "row => [...row.querySelectorAll('.cell')].map(c => c.textContent.trim())"


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    """A 2x4 run's log dir and JAX's own truth per device (~10 s)."""
    pytest.importorskip("jax")
    logdir = str(tmp_path_factory.mktemp("sharded") / "2x4")
    result = subprocess.run([sys.executable, "-m", "tests.support.sharded_run", "2x4", logdir], cwd=REPO,
                            capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO))
    assert result.returncode == 0, result.stderr[-3000:]
    return logdir, json.loads(result.stdout.strip().splitlines()[-1])


def test_storage_per_device_and_the_ops_device_picker(mesh, browser, tmp_path):
    logdir, truth = mesh
    with TensorBoardProcess(logdir, load_fast=False) as tb:
        tb.wait_for_tab(expect=[("train", "storage"), ("train", "ops")])
        tab = Tab(browser, tb, str(tmp_path))
        tab.open("storage", "train", "storage")
        tab.text("device-summary", "8 devices")
        tab.filter("device-table", "CPU:0")
        cells = tab.row("device-table", "/device:CPU:0").evaluate(DEVICE_CELLS)
        # Device, then Weights as the table writes it
        assert cells[:2] == ["/device:CPU:0", f"{truth['weights']['0']:,}"], cells
        # the cards count each variable once (its global size), and say what the busiest device holds
        tab.text("total-weight", f"{truth['weights_global']:,} B")
        tab.text("total-weight", "on the busiest device")
        tab.text("replicas-note", "Sharded variables over 8 devices")
        tab.row("variable-table", "4 shards ×2 replicas")  # a kernel split over the mesh's model axis
        for table in ("variable-table", "device-table"):  # at 1400 px, no table scrolls sideways
            assert tab.testid(table).evaluate(TABLE_FIT)["sideways"] == 0, table

        tab.view("ops")
        tab.testid("device-select").locator("option").nth(8).wait_for(state="attached", timeout=60_000)
        options = tab.testid("device-select").locator("option").evaluate_all("os => os.map(o => o.value)")
        assert options == [""] + [f"/device:CPU:{i}" for i in range(truth["devices"])], options
        tab.text("device-note", "sum every device")
        tab.text("peak-title", "Planned peak")
        tab.testid("device-select").select_option("/device:CPU:3")
        tab.text("op-table-count", " of ")  # the server's answer for that device: some of all the rows
        tab.row("op-table", "CPU:3")
        rows = tab.testid("op-table").locator(".table-row:not(.pending)")
        devices = set(rows.evaluate_all("rs => rs.map(r => [...r.querySelectorAll('.cell')].map(c => c.title))"
                                        ".flat().filter(t => t.startsWith('/device:'))"))
        assert devices == {"/device:CPU:3"}, devices
        tab.page.screenshot(path=os.path.join(str(tmp_path), "ops-cpu3.png"))
        tab.close()
