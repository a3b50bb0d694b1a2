// Op names as people read them. Pure, no DOM.
//
// A traced op's full name is its scope path ("StatefulPartitionedCall/gradient_tape/lenet_1/conv2_1/
// convolution/Conv2DBackpropInput"); cut from the left to fit a chart's axis it loses its layer. Charts
// name an op by its layer, then its path under the layer ("conv2 · grad convolution/Conv2DBackpropInput").
// An XLA instruction lists the framework ops it implements as JAX names them
// ("jit(train_step)/transpose(jvp(conv2))/conv_general_dilated"); those read "grad conv2/conv_general_dilated".

// The function-call scopes every op of a tf.function is under: they say nothing about the op.
const CALL_SCOPES = /^(?:(?:Stateful)?PartitionedCall(?:_\d+)?\/|__inference_[^/]*\/)+/;
const BACKWARD_SCOPE = /(?:^|\/)(?:gradient_tape|gradients)(?:\/|$)/;

/** The kernel time of an XLA step no rule tied to an instruction (the backend's schema.names.UNATTRIBUTED_TYPE). */
export const UNATTRIBUTED_TYPE = "(not attributed)";

export const isUnattributed = (row) => row?.op_type === UNATTRIBUTED_TYPE;

/** Cut `text` to `max` characters from the left ("…/Conv2DBackpropInput"): a path's end says the most. */
export function cutLeft(text, max) {
  const s = String(text ?? "");
  return s.length > max ? `…${s.slice(s.length - max + 1)}` : s;
}

/**
 * A chart label for an op: its layer's name, then the op's path under that layer
 * ("fc1 · adam_1/Sqrt_9", "conv2 · grad convolution/Conv2DBackpropInput"); at most `max`
 * characters, the layer kept. `shown`: the layer's name on the chart (its own name, longer when
 * another charted layer has the same one, see shortLayerNames). An op on no layer keeps its path's end.
 */
export function opLabel(opName, layer, max = 50, shown = "") {
  const name = String(opName ?? "").replace(CALL_SCOPES, "");
  const leaf = String(layer ?? "").split("/").pop();
  if (!leaf) return cutLeft(name, max);
  const parts = name.split("/");
  // Keras names a layer's scope "fc1" on its first call and "fc1_1" on later ones (the traced step).
  const scope = parts.slice(0, -1).reduce((found, p, i) => (p === leaf || (p.startsWith(`${leaf}_`) && /^\d+$/.test(p.slice(leaf.length + 1)))
    ? i : found), -1);
  const under = scope >= 0 ? parts.slice(scope + 1).join("/") : name;
  const grad = scope >= 0 && BACKWARD_SCOPE.test(parts.slice(0, scope).join("/")) && !/_grad(\/|$)/.test(under) ? "grad " : "";
  const head = `${cutLeft(shown || leaf, 30)} · ${grad}`;
  return head + cutLeft(under, Math.max(12, max - head.length));
}

/**
 * Each layer path's name on a chart: its own name ("query"), with as many enclosing layers as it
 * takes to tell it from the other paths ("multi_head_attention_1/query" beside
 * "multi_head_attention/query"). A Map path -> name.
 */
export function shortLayerNames(paths) {
  const distinct = [...new Set((paths || []).filter(Boolean).map(String))];
  const depth = new Map(distinct.map((p) => [p, 1]));
  const short = (p) => p.split("/").slice(-depth.get(p)).join("/");
  for (let clash = true; clash;) {
    clash = false;
    const byName = new Map();
    for (const p of distinct) byName.set(short(p), [...(byName.get(short(p)) || []), p]);
    for (const group of byName.values()) {
      for (const p of group.length > 1 ? group : []) {
        if (depth.get(p) < p.split("/").length) {
          depth.set(p, depth.get(p) + 1);
          clash = true;
        }
      }
    }
  }
  return new Map(distinct.map((p) => [p, short(p)]));
}

/**
 * A framework op an XLA instruction implements, readably: the program's own jit dropped,
 * "transpose(jvp(conv2))" (the backward pass of conv2) read "grad conv2", "jvp(conv2)" read "conv2",
 * "jit(_var)" read "_var". Other names (a TF op, a program parameter "state[2][6]") stay as they are.
 */
export function readableOp(name) {
  const text = String(name ?? "");
  if (!text.startsWith("jit(")) return text;
  let grad = false;
  const parts = text.split("/").slice(1).map((part) => {
    let p = part;
    for (;;) {
      const m = /^(transpose|jvp|jit|pjit|remat|checkpoint)\((.*)\)$/.exec(p);
      if (!m) break;
      if (m[1] === "transpose") grad = true;
      p = m[2];
    }
    return p;
  }).filter(Boolean);
  return `${grad ? "grad " : ""}${parts.join("/")}`;
}

/**
 * The Fused ops cell: the ops a kernel or an XLA instruction implements, readable, each once, and
 * under the row's `layer` named from it ("grad conv_general_dilated" on layer conv2: the Layer
 * column says the rest).
 */
export function fusedText(fused, layer = "") {
  const under = (text) => {
    const grad = text.startsWith("grad ") ? "grad " : "";
    const path = text.slice(grad.length);
    return layer && path.startsWith(`${layer}/`) ? `${grad}${path.slice(layer.length + 1)}` : text;
  };
  const names = [...new Set((Array.isArray(fused) ? fused : []).map((f) => under(readableOp(f))))];
  if (names.length <= 1) return names.join("");
  return `${names.length} ops: ${names.join(", ")}`;
}
