// Which framework a trace comes from (the /ops, /timeline answers' `source`), and the words that
// depend on it: a PyTorch trace is not TensorFlow's executor, a PyTorch memory snapshot records no
// op times and no shapes. Pure, no DOM.

import { TORCH_BREAKDOWN_SOURCES } from "./roles.js";

/** "torch profiler", "torch memory snapshot", a PyTorch breakdown's source ("transformers Trainer checkpoint"):
 * written by PyTorch (or Keras on torch). */
export const isTorch = (data) => {
  const source = String(data?.source ?? "");
  return TORCH_BREAKDOWN_SOURCES.includes(source) || /\b(py)?torch\b/i.test(source);
};

/** A PyTorch allocator snapshot (torch.cuda.memory._dump_snapshot): allocations and their stacks, no ops run. */
export const isSnapshot = (data) => isTorch(data) && /memory snapshot/i.test(String(data?.source ?? ""));

/** What ran the step, for the meta line: "XLA-compiled", "op by op (PyTorch)", "" when the data does not say. */
export function stepKind(data) {
  if (data?.xla) return "XLA-compiled";
  if (data?.xla !== null || isSnapshot(data)) return "";
  return isTorch(data) ? "op by op (PyTorch)" : "op by op (TensorFlow's executor)";
}

/** Why a trace shows no op times: "" when it has them. */
export function untimedNote(data) {
  if (data?.timed !== false) return "";
  if (isSnapshot(data)) {
    return "A PyTorch memory snapshot records the allocator's actions and the code that made each, not op times: "
      + "no times are shown, and each op row is a place in the code that allocated.";
  }
  return "This profile holds memory only (a TF 2.3–2.10 memory profile): it records no op times, so none are shown.";
}

/** Why no op is on a layer, and what would put them there. */
const NO_MODULE_RANGES = "the trace names no nn.Module (profile with with_stack=True to record each module's name)";

export function noLayersNote(data) {
  if (isTorch(data)) return `no layers known: ${NO_MODULE_RANGES}`;
  return "no layers known: record a breakdown (tb_modelmem.summary.variables) to join ops to layers";
}

/** A PyTorch trace whose ops sit on none of the model's layers a checkpoint names: why, and what to do. */
export function noModuleRangesNote(data) {
  return isTorch(data) && data?.timed && data?.join?.fraction === 0
    ? `0% of op time on the model's layers: ${NO_MODULE_RANGES}` : "";
}

/** A PyTorch profiler trace records bytes per allocation, never a shape: no Fused ops, a narrow Output column. */
export const recordsOutputShapes = (data) => !isTorch(data);
