"""Keras 3 on JAX over 8 CPU devices, data-parallel or model-parallel, recorded by ``MemoryCallback``;
prints what JAX itself says of each device as JSON (the ground truth, never tb_modelmem's).

The model is the issue's MLP (784 -> 2048 -> 2048 -> 2048 -> 10, 10.5M parameters) trained with
Adam. ``LAYOUT`` is ``single`` (one device), ``dp`` (``DataParallel`` over 8; ``dp2`` over 2 of them), a model-parallel
mesh ``2x4`` / ``1x8`` (``ModelParallel``: the dense kernels sharded over the ``model`` axis), or data
parallel over 8 with the optimizer's slots sharded over the batch axis (``zero1``: ZeRO-1), or the
slots and the weights (``fsdp``: ZeRO-3), by a ``LayoutMap`` on the variables' paths.

    python -m tests.support.sharded_run LAYOUT LOGDIR [PROFILE_LOGDIR]

With PROFILE_LOGDIR, two more steps are profiled with ``jax.profiler.trace`` alone (no tb_modelmem
code: what TensorBoard's profile plugin reads) into that log dir.

Truth per device: each variable's ``addressable_shards`` sizes (weights and optimizer state) and
the compiled training step's ``memory_analysis()`` (XLA's own plan: arguments, outputs, aliases,
temporaries per device) for the step Keras runs.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from tests.support import xla_plan

DEVICES = 8
BATCH = 64


def _configure() -> None:
    os.environ["KERAS_BACKEND"] = "jax"
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={DEVICES}".strip()


def _distribution(layout: str) -> Any:
    import keras

    if layout == "single":
        return None
    if layout == "dp":
        return keras.distribution.DataParallel()
    if layout == "dp2":  # data parallel over 2 of the 8 devices
        return keras.distribution.DataParallel(devices=keras.distribution.list_devices()[:2])
    if layout == "zero1":  # data parallel; the slots are sharded after they are built (_shard_slots)
        return keras.distribution.DataParallel()
    if layout == "fsdp":  # data parallel over 8, the weights (and so their slots) sharded over the batch axis
        sharded = keras.distribution.LayoutMap(keras.distribution.DeviceMesh((DEVICES,), ("batch",)))
        sharded[".*big.*kernel.*"] = sharded[".*out.*kernel.*"] = ("batch", None)
        sharded[".*big.*bias.*"] = ("batch",)  # out/bias (10 elements) stays whole: 10 does not split 8 ways
        return keras.distribution.ModelParallel(layout_map=sharded, batch_dim_name="batch")
    data, model = (int(n) for n in layout.split("x"))
    mesh = keras.distribution.DeviceMesh((data, model), ("batch", "model"))
    layouts = keras.distribution.LayoutMap(mesh)
    layouts[".*big.*kernel"] = (None, "model")
    layouts[".*big.*bias"] = ("model",)
    layouts[".*out.*kernel"] = ("model", None)
    return keras.distribution.ModelParallel(layout_map=layouts, batch_dim_name="batch")


def _shard_slots(model: Any) -> None:
    """ZeRO-1 on Keras: each Adam slot split over the 8 devices along its first axis (Keras gives a slot
    its weight's layout, replicated under DataParallel); the weights stay whole on every device."""
    import keras

    mesh = keras.distribution.distribution().device_mesh
    model.optimizer.build(model.trainable_variables)
    for slot in model.optimizer.variables:
        if len(slot.shape) and slot.shape[0] % DEVICES == 0:
            slot._layout = keras.distribution.TensorLayout(("batch",) + (None,) * (len(slot.shape) - 1), mesh)
            slot._direct_assign(slot.value)  # Keras' JAX variable lays its value out by its _layout


def _per_device(variables: list) -> dict[str, int]:
    """Bytes each device holds of these variables, from JAX's own shards."""
    held: dict[str, int] = {}
    for variable in variables:
        for shard in variable.value.addressable_shards:
            key = str(shard.device.id)
            held[key] = held.get(key, 0) + int(shard.data.nbytes)
    return held


def main(layout: str, logdir: str, profile_logdir: str = "") -> None:
    _configure()
    import keras
    import numpy as np

    import tb_modelmem

    distribution = _distribution(layout)
    if distribution is not None:
        keras.distribution.set_distribution(distribution)
    rng = np.random.default_rng(0)
    x = rng.random((BATCH * 6, 784), dtype=np.float32)
    y = rng.integers(0, 10, BATCH * 6).astype("int32")
    model = keras.Sequential([
        keras.Input((784,)),
        keras.layers.Dense(2048, activation="relu", name="big0"),
        keras.layers.Dense(2048, activation="relu", name="big1"),
        keras.layers.Dense(2048, activation="relu", name="big2"),
        keras.layers.Dense(10, name="out"),
    ], name="mlp")
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    if layout == "zero1":
        _shard_slots(model)
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0,
              callbacks=[tb_modelmem.MemoryCallback(logdir, profile_steps=(3, 4))])
    if profile_logdir:
        import jax

        with jax.profiler.trace(profile_logdir):
            model.fit(x[:BATCH * 2], y[:BATCH * 2], batch_size=BATCH, epochs=1, verbose=0)
    print(json.dumps({
        "layout": layout,
        "batch": BATCH,
        "devices": len(__import__("jax").devices()),
        "count_params": model.count_params(),
        "weights": _per_device(model.trainable_variables),
        "non_trainable": _per_device(model.non_trainable_variables),
        "optimizer": _per_device(model.optimizer.variables),
        "weights_global": sum(int(np.prod(v.shape)) * 4 for v in model.trainable_variables),
        "optimizer_global": sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in model.optimizer.variables),
        "variables": {v.path: {"shape": list(v.shape), "per_device": _per_device([v])}
                      for v in model.trainable_variables},
        "planned": xla_plan.memory_analysis(model, x[:BATCH], y[:BATCH]),
    }))


if __name__ == "__main__":
    main(*sys.argv[1:4])
