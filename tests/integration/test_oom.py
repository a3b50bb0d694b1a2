"""An OOM explained (issue 28): a step that runs out of memory is recorded before the error goes on up,
with what it asked for, and the tab shows it beside the projection of what would fit. Real steps
that ask TensorFlow's and JAX's CPU allocators for 256 GiB; what they asked for is checked against
Keras' own output shape of the layer, never against tb_modelmem."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

import tb_modelmem
from tb_modelmem.readers import oom
from tests.support.plugin_harness import Served

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(logdir: str) -> dict:
    truth = logdir + ".json"
    done = subprocess.run([sys.executable, "-m", "tests.support.oom_run", logdir, truth], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env=dict(os.environ, KERAS_BACKEND="tensorflow", PYTHONPATH=REPO,
                                                           TF_CPU_ALLOCATOR_USE_BFC="true", TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ran out of memory; recorded under tag 'oom'" in done.stderr
    with open(truth) as f:
        return json.load(f)


def test_a_step_out_of_memory_is_recorded_and_still_raised(tmp_path):
    logdir = str(tmp_path / "widening")
    truth = _run(logdir)
    error = "ResourceExhaustedError"
    assert truth["raised"] == error  # never swallowed
    served = Served(logdir)
    answer = served.json("/oom", run="train", tag="oom")
    report = answer["oom"]
    assert report["requested_bytes"] == truth["requested_bytes"] == 2**18 * 262_144 * 4
    assert answer["step"] == truth["failed_step"] and report["error_type"] == error
    assert report["shape"] == f"[{','.join(map(str, truth['shape']))}]" and report["dtype"] == "float32"
    assert "expand" in report["op"]
    # What would have fit: the traced batch-32 step, projected to the failing batch, asks for at least
    # the allocation that failed, and the largest batch within 16 GiB is below it. The tiled buffer is at the
    # traced peak as the layer's output or as its gradient: which one the executor keeps differs by machine.
    tag = [t["tag"] for r in served.json("/runs")["runs"] if r["run"] == "train" for t in r["tags"]
           if t["kind"] == "ops"][0]
    whatif = served.json("/whatif", run="train", tag=tag, batch=2**18, budget="16GiB")
    parts = whatif["whatif"]["by_category"]
    assert max(parts["activations"], parts["gradients"]) >= report["requested_bytes"]
    assert 32 < whatif["budget"]["largest_batch"] < 2**18


def test_inside_trace_the_error_propagates_after_it_is_recorded(tmp_path):
    @tf.function
    def step(x):
        return tf.reduce_sum(tf.tile(x, [1, 2**20]))  # [256, 2**30] float32: 1 TiB

    writer = tf.summary.create_file_writer(str(tmp_path))
    with writer.as_default(), pytest.raises(tf.errors.ResourceExhaustedError):
        with tb_modelmem.trace("ops", step=7, function=step):
            step(tf.zeros((256, 1024)))
    writer.flush()
    report = Served(str(tmp_path)).json("/oom", run=".", tag="oom")
    assert report["step"] == 7 and report["oom"]["where"] == "trace('ops')"
    assert report["oom"]["requested_bytes"] == 256 * 2**30 * 4


def test_jax_running_out_of_memory_is_told_by_its_own_error():
    """XLA's error (JAX, Keras on JAX) names only the bytes: a real one, from JAX's CPU allocator."""
    jnp = pytest.importorskip("jax.numpy")
    with pytest.raises(Exception) as raised:
        jnp.zeros((2**18, 2**18), jnp.float32).block_until_ready()
    assert oom.is_oom(raised.value)
    assert oom.parse(str(raised.value))["requested_bytes"] == 2**36 * 4


def test_what_an_oom_message_says_is_read_and_nothing_more():
    tf_text = ("OOM when allocating tensor with shape[64,1048576] and type half on "
               "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n"
               "\t [[{{node model/dense/MatMul}}]]")
    assert oom.parse(tf_text) == {"requested_bytes": 64 * 1048576 * 2, "shape": "[64,1048576]", "dtype": "float16",
                                  "device": "/job:localhost/replica:0/task:0/device:GPU:0", "allocator": "GPU_0_bfc",
                                  "op": "model/dense/MatMul"}
    xla_text = "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1,234 bytes."
    assert oom.parse(xla_text)["requested_bytes"] == 1234
    assert oom.parse("<script>alert(1)</script>") == {"requested_bytes": None, "shape": "", "dtype": "", "device": "",
                                                       "allocator": "", "op": ""}
    assert not oom.is_oom(ValueError("Out of memory while trying to allocate 5 bytes? no: a ValueError"))
