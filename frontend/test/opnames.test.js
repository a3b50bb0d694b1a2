import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { cutLeft, fusedText, isUnattributed, opLabel, readableOp, shortLayerNames } from "../src/opnames.js";

const fixture = async (name) => JSON.parse(await readFile(new URL(`./fixtures/${name}`, import.meta.url), "utf8"));

test("a chart names an op by its layer, then its path under the layer (the layer never cut off)", async () => {
  const lenet = await fixture("ops-lenet.json");
  const labels = lenet.top_time.map((o) => opLabel(o.name, o.layer));
  assert.equal(labels[0], "fc1 · adam_1/Sqrt_9"); // was "…rtitionedCall/adam_1/Sqrt_9": which layer?
  assert.equal(opLabel("StatefulPartitionedCall/gradient_tape/lenet_1/fc1_1/MatMul/MatMul_1", "lenet/fc1"), "fc1 · grad MatMul/MatMul_1");
  assert.equal(opLabel("StatefulPartitionedCall/gradient_tape/lenet_1/conv2_1/convolution/Conv2DBackpropInput", "lenet/conv2"),
    "conv2 · grad convolution/Conv2DBackpropInput");
  for (const [i, o] of lenet.top_time.entries()) assert.ok(labels[i].startsWith(`${o.layer.split("/").pop()} · `), labels[i]);
  // TF1: the gradient's own scope says it already; an op on no layer keeps its path's end
  assert.equal(opLabel("gradients/conv2/Conv2D_grad/Conv2DBackpropInput", "conv2"), "conv2 · Conv2D_grad/Conv2DBackpropInput");
  assert.equal(opLabel("gradients/pool1_grad/MaxPoolGrad", ""), "gradients/pool1_grad/MaxPoolGrad");
  assert.equal(opLabel("Adam/update_fc1/kernel/ResourceApplyAdam", "fc1", 32), "fc1 · …/kernel/ResourceApplyAdam");
  // XLA: an instruction's name under its layer
  const xla = await fixture("ops-xla-lenet.json");
  assert.equal(opLabel(xla.top_time[0].name, xla.top_time[0].layer), "conv2 · cudnn-conv-bw-filter.3");
});

test("layers of the same name on one chart are told apart by their enclosing layers", () => {
  const names = shortLayerNames(["transformer_block/multi_head_attention/query", "transformer_block_1/multi_head_attention_1/query",
    "transformer_block/dense_2", "", "transformer_block/dense_2"]);
  assert.deepEqual([...names.values()], ["multi_head_attention/query", "multi_head_attention_1/query", "dense_2"]);
  assert.equal(opLabel("gemm_fusion_dot.96", "transformer_block_1/multi_head_attention_1/query", 50,
    names.get("transformer_block_1/multi_head_attention_1/query")), "multi_head_attention_1/query · gemm_fusion_dot.96");
});

test("the framework ops an XLA instruction implements read without the program's jit and the JAX transforms", async () => {
  assert.equal(readableOp("jit(train_step)/transpose(jvp(conv2))/conv_general_dilated"), "grad conv2/conv_general_dilated");
  assert.equal(readableOp("jit(train_step)/jvp(transformer_block)/layer_normalization/jit(_var)/div"),
    "transformer_block/layer_normalization/_var/div");
  assert.equal(readableOp("state[2][6]"), "state[2][6]"); // a program parameter
  assert.equal(readableOp("BiasAdd"), "BiasAdd"); // a TF op a oneDNN kernel fused
  const xla = await fixture("ops-xla-lenet.json");
  const [bwFilter, adam] = xla.ops.rows;
  assert.equal(fusedText(bwFilter.fused, bwFilter.layer), "grad conv_general_dilated"); // the Layer column says conv2
  assert.equal(fusedText(adam.fused, adam.layer), "adam/sub");
  const update = xla.ops.rows.find((r) => r.fused.length === 8);
  assert.equal(fusedText(update.fused, update.layer), `8 ops: adam/mul, adam/add, adam/sub, ${update.fused[3]}, ${update.fused[4]}, `
    + "adam/square, adam/sqrt, adam/div");
  assert.equal(fusedText(["Conv2D", "BiasAdd", "Relu"], "conv1"), "3 ops: Conv2D, BiasAdd, Relu");
  assert.equal(fusedText([], "conv1"), "");
});

test("kernel time no rule tied to an instruction is told from an op type", () => {
  assert.ok(isUnattributed({ op_type: "(not attributed)" }));
  assert.ok(!isUnattributed({ op_type: "fusion" }));
  assert.equal(cutLeft("abcdef", 4), "…def");
});
