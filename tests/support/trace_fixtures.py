"""Traces for tests and benchmarks: a synthetic RunMetadata of any size (no TF), and the
LeNet of docs/USER_PROBLEMS.md #3 traced for real (TF1 session step stats, TF2 train step).

LeNet, batch 1, float32: conv1 output [1,28,28,32] = 100,352 B, conv2 [1,14,14,64] =
50,176 B, dense [1,1024] = 4,096 B.
"""

from __future__ import annotations

import os
import random
from typing import Any, NamedTuple, Tuple

from tensorboard.compat.proto import config_pb2, types_pb2

CONV1_BYTES, CONV2_BYTES, DENSE_BYTES = 100_352, 50_176, 4_096


def assert_stored_as(stored: Any, trace: Any) -> None:
    """``stored`` (a trace read back from its payload) is ``trace``: its op and timeline times to
    0.01 µs, as payloads keep them, everything else exactly."""
    import copy

    stored = copy.deepcopy(stored)
    for before, after in ((trace.ops.column("time_us"), stored.ops.column("time_us")),
                          (trace.timeline.t_us, stored.timeline.t_us)):
        assert len(after) == len(before)
        assert all(abs(a - b) <= 0.005 + 1e-9 * abs(b) for a, b in zip(after, before)), "a time moved past 0.005 µs"
        after[:] = before
    assert stored == trace
# Op types cycled through by the synthetic trace, with their output shapes.
_SYNTHETIC_OPS = (("Conv2D", (8, 56, 56, 64)), ("BiasAdd", (8, 56, 56, 64)), ("Relu", (8, 56, 56, 64)),
                  ("MatMul", (8, 1024)), ("ReadVariableOp", (1024, 1024)))


def synthetic_run_metadata(n_ops: int = 20_000, seed: int = 0) -> config_pb2.RunMetadata:
    """A FULL_TRACE-like RunMetadata with ``n_ops`` nodes on one CPU device, built without TF.

    Every node has a timeline label, timing, one float32 output with its allocation, and an
    allocation record pair (alloc, later free), so reducers see a realistic timeline.
    """
    rng = random.Random(seed)
    rm = config_pb2.RunMetadata()
    dev = rm.step_stats.dev_stats.add(device="/job:localhost/replica:0/task:0/device:CPU:0")
    start = 1_700_000_000_000_000
    t = start
    for i in range(n_ops):
        op_type, shape = _SYNTHETIC_OPS[i % len(_SYNTHETIC_OPS)]
        name = f"model/block_{i // 50}/layer_{i // 5}/{op_type}"
        nbytes = 4
        for d in shape:
            nbytes *= d
        duration = rng.randint(1, 400)
        node = dev.node_stats.add(node_name=name, all_start_micros=t, op_end_rel_micros=duration,
                                  all_end_rel_micros=duration + 1,
                                  timeline_label=f"{name} = {op_type}(model/input_{i})")
        desc = node.output.add(slot=0).tensor_description
        desc.dtype = types_pb2.DT_FLOAT
        desc.shape.dim.extend(desc.shape.Dim(size=d) for d in shape)
        desc.allocation_description.requested_bytes = nbytes
        desc.allocation_description.allocated_bytes = nbytes
        desc.allocation_description.allocator_name = "cpu"
        mem = node.memory.add(allocator_name="cpu", total_bytes=nbytes, peak_bytes=nbytes, live_bytes=nbytes)
        mem.allocation_records.add(alloc_micros=t + duration, alloc_bytes=nbytes)
        mem.allocation_records.add(alloc_micros=t + duration + rng.randint(1, 5_000), alloc_bytes=-nbytes)
        t += duration + 2
    return rm


def lenet_keras() -> Any:
    """The LeNet of docs/USER_PROBLEMS.md #3 (the demo's model), on 28x28x1 float32 input."""
    from demo.models import seed001_convnet

    return seed001_convnet()


class Training(NamedTuple):
    step: Any  # the train_step tf.function, traced once already
    batch: Tuple[Any, Any]  # (x, y)
    optimizer: Any


def lenet_train_step(model: Any, batch_size: int = 1) -> Training:
    """A custom training loop's train_step (tf.GradientTape + Adam) for ``model``."""
    import numpy as np
    import tensorflow as tf

    optimizer = tf.keras.optimizers.Adam()
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    batch = (tf.constant(np.ones((batch_size, 28, 28, 1), np.float32)), tf.constant(np.zeros((batch_size,), np.int32)))
    train_step(*batch)
    return Training(train_step, batch, optimizer)


class TracedSession(NamedTuple):
    run_metadata: Any  # tf.compat.v1.RunMetadata
    graph_info: Any  # capture.opgraph.GraphInfo of the session's graph
    vocabulary: Any  # join.Vocabulary of its global variables


def lenet_tf1_run_metadata(partition_graphs: bool = False) -> Any:
    """A ``tf.compat.v1.RunMetadata`` of one LeNet inference step in a TF1 session (FULL_TRACE)."""
    return lenet_tf1_traced(partition_graphs).run_metadata


def lenet_tf1_traced(partition_graphs: bool = False) -> TracedSession:
    """One LeNet inference step in a TF1 session (FULL_TRACE), with the session's graph and layers.

    Written as TF1 users did (tf.nn ops under one name scope per layer), named like the
    Keras layers so the scopes join the model's layer names.
    """
    import numpy as np
    import tensorflow as tf

    from tb_modelmem.capture.opgraph import graph_info
    from tb_modelmem.capture.variables import breakdown_of
    from tb_modelmem.rules.join import Vocabulary

    v1 = tf.compat.v1
    with tf.Graph().as_default() as graph:
        x = v1.placeholder(tf.float32, [1, 28, 28, 1], name="x")

        def weights(shape: Tuple[int, ...]) -> Tuple[Any, Any]:
            return (v1.get_variable("kernel", shape, initializer=v1.truncated_normal_initializer(stddev=0.1)),
                    v1.get_variable("bias", shape[-1:], initializer=v1.constant_initializer(0.1)))

        def conv(h: Any, scope: str, shape: Tuple[int, ...]) -> Any:
            with v1.variable_scope(scope):
                w, b = weights(shape)
                return tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(h, w, 1, "SAME"), b))

        def pool(h: Any, scope: str) -> Any:
            with v1.variable_scope(scope):
                return tf.nn.max_pool2d(h, 2, 2, "SAME")

        def dense(h: Any, scope: str, shape: Tuple[int, ...], relu: bool) -> Any:
            with v1.variable_scope(scope):
                w, b = weights(shape)
                out = tf.nn.bias_add(tf.matmul(h, w), b)
                return tf.nn.relu(out) if relu else out

        h = pool(conv(x, "conv2d", (5, 5, 1, 32)), "max_pooling2d")
        h = pool(conv(h, "conv2d_1", (5, 5, 32, 64)), "max_pooling2d_1")
        with v1.variable_scope("flatten"):
            h = tf.reshape(h, [1, 7 * 7 * 64])
        logits = dense(dense(h, "dense", (3136, 1024), True), "dense_1", (1024, 10), False)
        vocabulary = Vocabulary.from_breakdown(breakdown_of())
        info = graph_info(graph)
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            options = v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE,
                                    output_partition_graphs=partition_graphs)
            run_metadata = v1.RunMetadata()
            sess.run(logits, {x: np.ones((1, 28, 28, 1), np.float32)}, options=options,
                     run_metadata=run_metadata)
    return TracedSession(run_metadata, info, vocabulary)


LENET_STEPS = 2  # profiled LeNet training steps (batch 1)


class ProfiledLeNet(NamedTuple):
    model: Any
    train_step: Any
    optimizer: Any
    path: str  # the .xplane.pb


def profile_lenet(logdir: str) -> ProfiledLeNet:
    """LENET_STEPS LeNet training steps (batch 1) profiled by the TF2 profiler into ``logdir``."""
    import glob

    import tensorflow as tf

    model = lenet_keras()
    training = lenet_train_step(model)
    tf.profiler.experimental.start(logdir)
    for _ in range(LENET_STEPS):
        training.step(*training.batch)
    tf.profiler.experimental.stop()
    (path,) = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
    return ProfiledLeNet(model, training.step, training.optimizer, path)
