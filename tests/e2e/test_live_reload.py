"""Live: a running tensorboard (either loader) picks up breakdowns written after it started."""

from __future__ import annotations

import os
import time

import pytest

from tb_modelmem import summary
from tb_modelmem.schema.names import OPTIMIZER_SLOT, WEIGHT
from tb_modelmem.schema.records import Breakdown, VariableRecord
from tests.support.plugin_harness import write_events
from tests.support.tensorboard_process import TensorBoardProcess


def _record(with_slots: bool) -> Breakdown:
    variables = [VariableRecord("dense/kernel", "dense", [256, 128], "float32", 256 * 128 * 4, WEIGHT)]
    if with_slots:
        variables += [VariableRecord(f"adam/dense_kernel_{s}", "dense", [256, 128], "float32", 256 * 128 * 4,
                                     OPTIMIZER_SLOT, slot=s, slot_of="dense/kernel") for s in ("m", "v")]
    return Breakdown(source="test", variables=variables)


@pytest.mark.parametrize("load_fast", [True, False], ids=["rust-data-server", "python-loader"])
def test_new_steps_appear_while_tensorboard_runs(tmp_path, load_fast):
    run_dir = os.path.join(str(tmp_path), "train")
    write_events(run_dir, [(0, summary.pb("storage", _record(with_slots=False)))])
    with TensorBoardProcess(str(tmp_path), load_fast=load_fast) as tb:
        tb.wait_for_tab()
        time.sleep(1.5)  # a new event file must be newer than the first one
        write_events(run_dir, [(1, summary.pb("storage", _record(with_slots=True)))])
        deadline = time.monotonic() + 90
        steps = []
        while time.monotonic() < deadline and len(steps) < 2:
            steps = tb.get("/data/plugin/modelmem/steps?run=train&tag=storage")["steps"]
            time.sleep(0.5)
        assert [s["step"] for s in steps] == [0, 1], tb.log()
        latest = tb.get("/data/plugin/modelmem/breakdown?run=train&tag=storage")
        assert latest["step"] == 1 and latest["totals"][OPTIMIZER_SLOT] == 2 * 256 * 128 * 4
