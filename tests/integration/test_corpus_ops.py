"""Runtime figures for real public training scripts (tests/corpus/): most of the time of a profiled
step's forward and backward ops, and all but the counters of its optimizer's ops, land on a layer of
the model, named as the live model names its layers; nothing unknown is shown as 0. The layer paths
are the live model's own (harness ground truth), not tb_modelmem's."""

from __future__ import annotations

from typing import Any, Dict, Set

import pytest

from tb_modelmem.schema.names import BACKWARD, FORWARD, OPTIMIZER
from tests.corpus import SCRIPTS, run
from tests.support.layer_time import rows_on_layers
from tests.support.plugin_harness import Served

ALIASING = {"ReadVariableOp", "Identity", "Reshape", "Squeeze", "ExpandDims", "_Arg", "_Retval", "VarHandleOp",
            "Const", "NoOp", "StopGradient"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    base = tmp_path_factory.mktemp("corpus_ops")
    return lambda name: run(name, "modelmem", base)


def model_layers(result: Dict[str, Any]) -> Set[str]:
    """Every layer path of the script's models (composites included), as Keras names them; for
    TF1, every variable scope of the graph's variables."""
    if result["tf1"] is not None:
        paths: Set[str] = set()
        for v in result["tf1"]["global_variables"]:
            parts = v["name"].split("/")[:-1]
            paths |= {"/".join(parts[:i]) for i in range(1, len(parts) + 1)}
        return paths
    return {m["name"] for m in result["models"]} | {layer["path"] for m in result["models"] for layer in m["layers"]}


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_most_op_time_is_on_the_layers_of_the_model(corpus, name):
    """Forward and backward op time is on the model's layers (``layer_time.on_layers``), and so are
    the optimizer's ops but its own counters (Keras 3's iteration count, 3 ops per optimizer; TF1
    Adam's two beta powers, 6 ops): counted, not timed."""
    result = corpus(name)
    assert result["error"] is None, f"{name} did not run:\n{result['error']['traceback']}"
    served = Served(result["logdir"])
    body = served.json("/ops", run=result["run"], tag="ops")
    ops = served.all_ops(result["run"], "ops")
    layers = model_layers(result)
    fraction, elsewhere = rows_on_layers(ops, layers, leave_out_longest=True)
    assert fraction >= 0.9, f"{name}: {fraction:.1%} of forward and backward op time on layers; elsewhere {elsewhere}"
    # a summary serialized in the step (TF1's image of the batch: 0.9-4 ms) is logging, not the model's pass
    logged = [(op["name"], op["phase"]) for op in ops if op["op_type"].endswith("Summary")]
    assert all(phase not in (FORWARD, BACKWARD) for _, phase in logged), logged
    updates = [op for op in ops if op["phase"] == OPTIMIZER]
    unplaced = [op["name"] for op in updates if op["layer"] not in layers]
    assert len(updates) > 0 and len(unplaced) <= 8, (
        f"{name}: {len(unplaced)} of {len(updates)} optimizer ops on no layer: {unplaced[:12]}")
    # the summary the tab shows over the table is the table's own sum
    assert body["join"]["joined_time_us"] == pytest.approx(sum(op["time_us"] for op in ops if op["layer"] in layers))


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_no_unknown_figure_is_shown_as_zero(corpus, name):
    result = corpus(name)
    served = Served(result["logdir"])
    ops = served.all_ops(result["run"], "ops")
    for op in ops:
        if op["bytes_source"] == "unknown" and op["op_type"] not in ALIASING:
            assert op["new_bytes"] is None, op
    peak = served.json("/ops", run=result["run"], tag="ops")["peak_by_category"]
    for category, value in peak.items():
        if category in peak["unknown"]:
            assert value is None, (category, peak)
