"""The runs of issue 10's acceptance, in a fresh process (the allocator is chosen at TensorFlow's start):

    TF_CPU_ALLOCATOR_USE_BFC=true python -m tests.support.peak_run LOGDIR

Seed 002's LeNet, batch 32, Adam: profiled by MemoryCallback(profile_steps) in a Keras fit (run
"keras"), and the same model in a TF1 session traced with FULL_TRACE (run "tf1").
"""

from __future__ import annotations

import os
import sys


def main(logdir: str) -> None:
    import keras
    import tensorflow as tf

    import tb_modelmem
    from demo.models import mnist_like, seed001_convnet, seed001_tf1_graph

    model = seed001_convnet()
    model.compile(keras.optimizers.Adam(), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
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
