"""Big but realistic records for the serving benchmarks, built without TensorFlow.

A model of N layers (paths "model/block_i/layer_j", each a kernel and a bias with Adam's two
slots) and a trace of a training step over it: forward, backward and optimizer ops in each
layer's renamed scopes, as ``tb_modelmem.trace`` records them (layer and phase joined).
"""

from __future__ import annotations

import random
from typing import List

from tb_modelmem.schema.names import BACKWARD, FORWARD, MEASURED, OPTIMIZER, OPTIMIZER_SLOT, WEIGHT
from tb_modelmem.schema.records import Breakdown, BufferRecord, LayerRecord, OpRecord, OpTable, OpTrace, Timeline

_OPS = (("Conv2D", FORWARD, "[32,56,56,64]"), ("BiasAdd", FORWARD, "[32,56,56,64]"), ("Relu", FORWARD, "[32,56,56,64]"),
        ("Conv2DBackpropInput", BACKWARD, "[32,56,56,64]"), ("Conv2DBackpropFilter", BACKWARD, "[3,3,64,64]"),
        ("BiasAddGrad", BACKWARD, "[64]"), ("Mul", OPTIMIZER, "[3,3,64,64]"), ("AssignSubVariableOp", OPTIMIZER, ""))


def layer_paths(n_layers: int) -> List[str]:
    return [f"model/block_{i // 25}/layer_{i}" for i in range(n_layers)]


def breakdown(n_variables: int = 10_000) -> Breakdown:
    """A model with ``n_variables`` variables: weights and Adam slots, two weights per layer."""
    layers = layer_paths(max(1, n_variables // 6))
    variables, records = [], []
    for path in layers:
        for name, shape in (("kernel", [3, 3, 64, 64]), ("bias", [64])):
            size = 4
            for d in shape:
                size *= d
            weight = f"{path}/{name}"
            variables.append((weight, path, shape, size, WEIGHT, None, None))
            for slot in ("m", "v"):
                variables.append((f"adam/{weight}/{slot}", path, shape, size, OPTIMIZER_SLOT, slot, weight))
        records.append(LayerRecord(path, "Conv2D", 3 * 3 * 64 * 64 + 64, "(3*3*64+1)*64 = 36,928"))
    from tb_modelmem.schema.records import VariableRecord

    return Breakdown(source="keras", model_name="model", layers=records, variables=[
        VariableRecord(name=n, layer=layer, shape=s, dtype="float32", bytes=b, role=r, slot=sl, slot_of=so)
        for n, layer, s, b, r, sl, so in variables[:n_variables]])


def trace(n_ops: int = 200_000, n_layers: int = 1_666, seed: int = 0) -> OpTrace:
    """One training step of ``n_ops`` ops spread over the layers of ``breakdown``."""
    rng = random.Random(seed)
    layers = layer_paths(n_layers)
    rows = []
    for i in range(n_ops):
        layer = layers[i % n_layers]
        op_type, phase, shape = _OPS[i % len(_OPS)]
        scope = layer.replace("layer_", "layer_1_").replace("model", "model_1")  # as Keras 3 renames scopes
        prefix = {FORWARD: "", BACKWARD: "gradient_tape/", OPTIMIZER: "adam/"}[phase]
        size = 4 * 32 * 56 * 56 * 64 if shape.startswith("[32") else 4 * 3 * 3 * 64 * 64
        rows.append(OpRecord(name=f"StatefulPartitionedCall/{prefix}{scope}/{op_type}_{i // n_layers}", op_type=op_type,
                             layer=layer, phase=phase, device="/host:CPU", calls=1, time_us=rng.uniform(1, 400),
                             output_bytes=size, output_shape=shape, output_dtype="float32", bytes_source=MEASURED,
                             alloc_bytes=size))
    points = 2000
    timeline = Timeline([float(t) for t in range(points)], [float(1e8 + (t * 7919) % 10**7) for t in range(points)],
                        [rows[t * (n_ops // points)].name for t in range(points)])
    buffers = [BufferRecord(op=rows[i].name, bytes=rows[i].output_bytes, shape=rows[i].output_shape, dtype="float32",
                            region="output", category="activations") for i in range(0, n_ops, max(1, n_ops // 500))]
    return OpTrace(source="xspace", ops=OpTable.by_name(rows), peak_bytes=int(max(timeline.bytes)), peak_time_us=1.0,
                   timeline=timeline, devices=["/host:CPU"], steps=1, counts_resident=True, peak_buffers=buffers,
                   layers=layers)
