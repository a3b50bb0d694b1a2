// A synthetic ops response with many ops, to check the op table stays smooth.

const TYPES = ["Conv2D", "MatMul", "Relu", "BiasAdd", "AddV2", "Mul", "ReadVariableOp", "Identity", "Cast", "Sum"];

export function bigTrace(count) {
  const ops = [];
  let seed = 7;
  const rand = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
  for (let i = 0; i < count; i++) {
    const type = TYPES[i % TYPES.length];
    const n = 1 + Math.floor(rand() * 256);
    const time = rand() * 500;
    ops.push({
      name: `model/block_${Math.floor(i / 200)}/layer_${i % 200}/${type}_${i}`, op_type: type, layer: `block_${Math.floor(i / 200)}/layer_${i % 200}`,
      device: "/device:CPU:0", calls: 1 + (i % 3), time_us: time, mean_us: time / (1 + (i % 3)),
      output_bytes: n * 1024, output_shape: `[1,${n},256]`, output_dtype: "float32", bytes_source: i % 5 ? "derived" : "measured",
      alloc_bytes: i % 5 ? 0 : n * 1024, fused: type === "Conv2D" ? ["Conv2D", "BiasAdd"] : [],
    });
  }
  const timeline = [];
  let bytes = 1 << 26;
  for (let i = 0; i < 2000; i++) {
    bytes += Math.round((rand() - 0.48) * 1e6);
    timeline.push([i * 50, bytes]);
  }
  const peak = timeline.reduce((a, b) => (b[1] > a[1] ? b : a));
  return {
    run: "big_trace", tag: "trace", step: 0, wall_time: 1795400000, source: "xspace", steps: 2, devices: ["/device:CPU:0"],
    peak_bytes: peak[1], peak_time_us: peak[0], timeline, ops, layers: [],
    peak_by_role: { weight: 0, optimizer_slot: 0, activations: 0, unattributed: peak[1], total: peak[1] },
  };
}
