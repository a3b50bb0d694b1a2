// A synthetic op table with many ops, to check the op table stays smooth.

const TYPES = ["Conv2D", "MatMul", "Relu", "BiasAdd", "AddV2", "Mul", "ReadVariableOp", "Identity", "Cast", "Sum"];
const PHASES = ["forward", "backward", "optimizer"];

export function bigOps(count) {
  const ops = [];
  let seed = 7;
  const rand = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
  for (let i = 0; i < count; i++) {
    const type = TYPES[i % TYPES.length];
    const n = 1 + Math.floor(rand() * 256);
    const time = rand() * 500;
    const calls = 1 + (i % 3);
    const unknown = i % 97 === 0;
    ops.push({
      name: `model/block_${Math.floor(i / 200)}/layer_${i % 200}/${type}_${i}`, op_type: type, layer: `model/block_${Math.floor(i / 200)}`,
      phase: PHASES[i % 3], device: "/device:CPU:0", calls, time_us: time, mean_us: time / calls,
      output_bytes: unknown ? 0 : n * 1024, output_shape: unknown ? "[?,256]" : `[1,${n},256]`, output_dtype: "float32",
      bytes_source: unknown ? "unknown" : i % 5 ? "derived" : "measured", alloc_bytes: i % 5 ? 0 : n * 1024,
      new_bytes: unknown ? null : n * 1024, fused: type === "Conv2D" ? ["Conv2D", "BiasAdd"] : [],
    });
  }
  return ops;
}

/** Layer rows of the synthetic model: one composite over its blocks. */
export function bigLayers(ops) {
  const blocks = new Map();
  for (const op of ops) {
    const b = blocks.get(op.layer) || { time_us: 0, ops: 0, output_bytes: 0 };
    b.time_us += op.time_us;
    b.ops += op.calls;
    b.output_bytes += op.new_bytes || 0;
    blocks.set(op.layer, b);
  }
  const leaves = [...blocks].map(([layer, b]) => ({ layer, label: layer.split("/").pop(), depth: 1, leaf: true, class_name: "Block",
    weight_bytes: 0, slot_bytes: 0, peak_activations_bytes: 0, peak_gradients_bytes: 0, alloc_bytes: 0, ...b }));
  const sum = (k) => leaves.reduce((s, l) => s + l[k], 0);
  return [{ layer: "model", label: "model", depth: 0, leaf: false, class_name: "", weight_bytes: 0, slot_bytes: 0,
    peak_activations_bytes: 0, peak_gradients_bytes: 0, alloc_bytes: 0, time_us: sum("time_us"), ops: sum("ops"),
    output_bytes: sum("output_bytes") }, ...leaves];
}
