"""rules/devices.py: which device holds which bytes, on the layouts capture records (a JAX array's
sharding, a TF mirrored variable's copies, a variable on one device of several, an old record)."""

from __future__ import annotations

from tb_modelmem.rules import devices

# Two devices: a kernel [4, 8] float32 sharded in 2 (64 B each), a bias [8] mirrored on both (32 B each),
# a counter that lives on device 1 only, and a record written before per-device bytes were kept.
COLUMNS = {
    "name": ["kernel", "bias", "counter", "old"],
    "role": ["weight", "weight", "other", "optimizer_slot"],
    "shape": [[4, 8], [8], [], [2, 4]],
    "dtype": ["float32", "float32", "int64", "float32"],
    "bytes": [128, 64, 8, 64],
    "replicas": [1, 2, 1, 2],
    "shards": [2, 1, 1, 1],
    "device": ["/device:CPU:0,/device:CPU:1", "/device:CPU:0,/device:CPU:1", "/device:CPU:1",
               "/device:CPU:0,/device:CPU:1"],
    "device_bytes": [[64, 64], [32, 32], [], []],
}


def test_each_device_holds_its_piece_its_copy_and_only_what_lives_there():
    held = devices.per_device(COLUMNS)
    assert held == {"/device:CPU:0": {"weight": 96, "optimizer_slot": 32},
                    "/device:CPU:1": {"weight": 96, "other": 8, "optimizer_slot": 32}}
    assert devices.busiest(COLUMNS) == "/device:CPU:1"
    assert devices.on_device(COLUMNS, "/device:CPU:0") == [64, 32, 0, 32]
    assert devices.on_device(COLUMNS, "/device:CPU:1") == [64, 32, 8, 32]


def test_each_variable_once_is_its_elements_times_its_dtype():
    assert devices.logical_bytes(COLUMNS) == [128, 32, 8, 32]
    assert devices.spread(COLUMNS)


def test_a_run_on_one_device_is_not_spread_and_counts_each_variable_whole():
    one = {**COLUMNS, "device": ["/job:localhost/device:GPU:0"] * 4, "replicas": [1] * 4, "device_bytes": [[]] * 4,
           "bytes": [128, 32, 8, 32]}
    assert not devices.spread(one)
    assert devices.on_device(one, None) == [128, 32, 8, 32]
