"""The runs of issue 10's acceptance, in a fresh process (the allocator is chosen at TensorFlow's start):

    TF_CPU_ALLOCATOR_USE_BFC=true python -m tests.support.peak_run LOGDIR

Seed 002's LeNet, batch 32, Adam: profiled by MemoryCallback(profile_steps) in a Keras fit (run
"keras"), and the same model in a TF1 session traced with FULL_TRACE (run "tf1"). The model and its
optimizer are built inside a profile of their own, read with TensorFlow's xplane proto: what the allocator
handed the variables past the bytes they asked for (``chunk_slack.json``), the truth for the peak's
held-between-steps part.
"""

from __future__ import annotations

import os
import sys


def _built_with_slack(logdir: str):
    """The model and its Adam, built inside a profile; ``chunk_slack.json``: of the allocations still live
    when they are built (the variables'), the bytes handed out and asked for, from BFC's own events."""
    import glob
    import json
    import tempfile

    import keras
    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    from demo.models import seed001_convnet

    with tempfile.TemporaryDirectory() as raw:
        tf.profiler.experimental.start(raw)
        model = seed001_convnet()
        optimizer = keras.optimizers.Adam()
        optimizer.build(model.trainable_variables)
        tf.profiler.experimental.stop()
        space = xplane_pb2.XSpace()
        with open(glob.glob(os.path.join(raw, "**", "*.xplane.pb"), recursive=True)[0], "rb") as f:
            space.ParseFromString(f.read())
    events = []
    for plane in space.planes:
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        kinds = {k: m.name for k, m in plane.event_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                if kinds.get(event.metadata_id) in ("MemoryAllocation", "MemoryDeallocation"):
                    stats = {names[s.metadata_id]: getattr(s, s.WhichOneof("value")) for s in event.stats}
                    events.append((line.timestamp_ns * 1000 + event.offset_ps, kinds[event.metadata_id], stats))
    live = {}
    for _, kind, stats in sorted(events, key=lambda e: e[0]):
        if kind == "MemoryAllocation":
            live[stats["addr"]] = (stats["allocation_bytes"], stats["requested_bytes"])
        else:
            live.pop(stats["addr"], None)
    with open(os.path.join(logdir, "chunk_slack.json"), "w") as f:
        json.dump({"handed": sum(a for a, _ in live.values()), "asked": sum(r for _, r in live.values()),
                   "chunks": sorted(live.values(), reverse=True),  # (handed, asked) of each
                   "variables": int(sum(v.numpy().nbytes for v in model.variables + optimizer.variables))}, f)
    return model, optimizer


def main(logdir: str) -> None:
    import keras
    import tensorflow as tf

    import tb_modelmem
    from demo.models import mnist_like, seed001_tf1_graph

    model, optimizer = _built_with_slack(logdir)
    model.compile(optimizer, keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = mnist_like(32 * 4)
    model.fit(x, y, batch_size=32, epochs=1, verbose=0,
              callbacks=[tb_modelmem.MemoryCallback(os.path.join(logdir, "keras"), subdir="", profile_steps=(3, 3),
                                                    memory_every=0)])
    tf.profiler.experimental.start(os.path.join(logdir, "raw"))  # a raw profile too (plain TF, no tb_modelmem)
    model.train_on_batch(x[:32], y[:32])
    tf.profiler.experimental.stop()
    v1 = tf.compat.v1
    with tf.Graph().as_default(), v1.Session() as sess:
        xs, ys, _, train_op = seed001_tf1_graph("adam")
        sess.run(v1.global_variables_initializer())
        writer = v1.summary.FileWriter(os.path.join(logdir, "tf1"), sess.graph)
        for step in (1, 2):
            data_x, data_y = mnist_like(32, seed=step)
            run_metadata = v1.RunMetadata()
            sess.run(train_op, {xs: data_x, ys: data_y}, run_metadata=run_metadata,
                     options=v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE))
        tb_modelmem.summary.run_metadata("ops", run_metadata, step=2, writer=writer)
        tb_modelmem.summary.variables("storage", step=2, writer=writer)
        writer.close()


if __name__ == "__main__":
    main(sys.argv[1])
