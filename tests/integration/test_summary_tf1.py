"""The summary API in a TF1 session script (issue 7.2): FileWriter-style, never a crash."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf

from demo.models import mnist_like, seed001_tf1_graph
from tb_modelmem import summary
from tests.support.layer_time import rows_on_layers
from tests.support.plugin_harness import Served

v1 = tf.compat.v1


def _bytes(variables) -> int:
    return sum(int(np.prod(v.shape.as_list())) * v.dtype.base_dtype.size for v in variables)


@pytest.fixture(scope="module")
def session_logdir(tmp_path_factory):
    """A TF1 training loop as TensorFlow's mnist_with_summaries.py writes one, with tb_modelmem's calls."""
    logdir = str(tmp_path_factory.mktemp("tf1"))
    with tf.Graph().as_default(), v1.Session() as sess:
        x, y, loss, train_op = seed001_tf1_graph("adam")
        sess.run(v1.global_variables_initializer())
        writer = v1.summary.FileWriter(os.path.join(logdir, "train"), sess.graph)
        truth = {"weights": _bytes(v1.trainable_variables()), "all": _bytes(v1.global_variables())}
        for step in range(1, 4):
            xs, ys = mnist_like(2, seed=step)
            run_metadata = v1.RunMetadata()
            sess.run(train_op, {x: xs, y: ys}, options=v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE),
                     run_metadata=run_metadata)
            writer.add_run_metadata(run_metadata, f"step{step}", step)
            assert summary.run_metadata("ops", run_metadata, step=step, writer=writer) is True
            assert summary.variables("storage", step=step, writer=writer) is True
        with pytest.raises(ValueError, match="writer=<your tf.compat.v1.summary.FileWriter>"):
            summary.variables("storage", step=9)  # graph mode, no writer: said at once, clearly
        writer.close()
    return logdir, truth


def test_breakdown_of_a_session_graph_is_its_global_variables(session_logdir):
    logdir, truth = session_logdir
    body = Served(logdir).json("/breakdown", run="train", tag="storage")
    assert body["totals"]["weight"] == truth["weights"] == 13_098_536
    assert body["total_bytes"] == truth["all"] == 39_295_616
    assert body["totals"]["optimizer_slot"] == 26_197_072


def test_ops_are_joined_to_the_variables_they_update(session_logdir):
    logdir, _ = session_logdir
    served = Served(logdir)
    body = served.json("/ops", run="train", tag="ops")
    assert body["step"] == 3
    ops = served.all_ops("train", "ops")
    fraction, elsewhere = rows_on_layers(ops, {"conv1", "conv2", "fc1", "fc2"})
    assert fraction >= 0.9, (fraction, elsewhere)
    updates = {op["name"]: op for op in ops if op["op_type"].endswith("ApplyAdam")}
    assert {name.split("update_")[1].split("/")[0]: op["layer"] for name, op in updates.items()} == \
        {"conv1": "conv1", "conv2": "conv2", "fc1": "fc1", "fc2": "fc2"}
    grads = [op for op in ops if op["name"].startswith("gradients/fc1/")]
    assert grads and {op["layer"] for op in grads} == {"fc1"} and {op["phase"] for op in grads} == {"backward"}
    # the TF1 log dir's own RunMetadata (add_run_metadata, no tb_modelmem) is an item too, joined the same way
    plain = served.all_ops("train", "step3")
    assert {op["layer"] for op in plain if op["op_type"].endswith("ApplyAdam")} == {"conv1", "conv2", "fc1", "fc2"}
