"""MirroredStrategy over two logical CPUs: every replica's copy is counted.

Logical devices must be configured before TensorFlow initialises, so the
model runs in a fresh subprocess that prints the breakdown as JSON.
"""

import json
import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import json
    import numpy as np
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    from tb_modelmem.capture.variables import breakdown_of

    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, name="fc1"),
                                  keras.layers.BatchNormalization(name="bn"), keras.layers.Dense(2, name="fc2")],
                                 name="mirrored")
        model.compile(keras.optimizers.Adam(), "mse")
    model.fit(np.zeros((4, 4)), np.zeros((4, 2)), batch_size=4, verbose=0)
    single = sum(int(np.prod(v.shape)) * tf.as_dtype(v.dtype).size
                 for v in model.variables + model.optimizer.variables)
    print(json.dumps({"single_copy_bytes": single, "breakdown": breakdown_of(model).to_dict()}))
    """
)


def test_mirrored_variables_count_every_replica():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=root, env=env, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    columns = result["breakdown"]["variables"]  # the payload stores the table as columns
    variables = [dict(zip(columns, values)) for values in zip(*columns.values())]
    assert {v["replicas"] for v in variables} == {2}
    assert sum(v["bytes"] for v in variables) == 2 * result["single_copy_bytes"]
    kernel = next(v for v in variables if v["name"] == "mirrored/fc1/kernel")
    assert kernel["bytes"] == 4 * 3 * 4 * 2 and kernel["role"] == "weight"
    assert "CPU:0" in kernel["device"] and "CPU:1" in kernel["device"]
    slots = [v for v in variables if v["role"] == "optimizer_slot"]
    assert len(slots) == 2 * 6 and all(v["slot_of"] for v in slots)
    moving = [v["name"] for v in variables if v["role"] == "non_trainable"]
    assert moving == ["mirrored/bn/moving_mean", "mirrored/bn/moving_variance"]
