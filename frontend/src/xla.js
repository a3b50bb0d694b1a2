// What kind of step a trace shows, in words: an XLA-compiled program (its name, its runs, how its
// kernels were tied to HLO instructions) or TensorFlow's executor running op by op. Pure, no DOM.

import { formatBytesFull, formatHuman, formatInt, formatPercent, isKnown } from "./format.js";

// How a kernel's time was tied to its instruction (the /ops answer's xla.time_us_by_method keys), best first.
const METHODS = [
  ["hlo_op", "by HLO op name"],
  ["graph_node", "by graph node"],
  ["kernel_name", "by kernel name"],
  ["schedule_gap", "by place in the schedule"],
];
export const METHOD_HINT = {
  hlo_op: "the kernel's hlo_op names its instruction",
  graph_node: "the kernel's node in its command buffer (CUDA graph) places it after its instruction",
  kernel_name: "one instruction of the program launches a kernel of that name",
  schedule_gap: "it ran between two kernels already placed, where the program's schedule has one instruction",
  unattributed: "no rule tied it to an instruction: its rows read \"(not attributed)\"",
};

/**
 * The headline of an XLA step: "XLA program jit_train_step, 2 runs; kernels in command buffers,
 * tied to instructions by graph node (54%), by HLO op name (46%)", and what each part rests on.
 * `xla` is the /ops answer's field (null for a step TF's executor ran op by op: then null).
 */
export function xlaSummary(xla) {
  if (!xla || typeof xla !== "object") return null;
  const programs = (Array.isArray(xla.programs) ? xla.programs : []).map((p) => String(p?.name ?? p?.id ?? "")).filter(Boolean);
  const runs = isKnown(xla.executions) ? `, ${formatInt(xla.executions)} run${Number(xla.executions) === 1 ? "" : "s"}` : "";
  const what = programs.length ? `XLA program${programs.length > 1 ? "s" : ""} ${programs.join(", ")}${runs}` : `XLA-compiled step${runs}`;
  const by = xla.time_us_by_method && typeof xla.time_us_by_method === "object" ? xla.time_us_by_method : {};
  const total = Object.values(by).filter(isKnown).reduce((s, v) => s + Number(v), 0);
  const share = (key) => (total > 0 && isKnown(by[key]) ? Number(by[key]) / total : 0);
  const methods = METHODS.filter(([key]) => share(key) > 0).sort((a, b) => share(b[0]) - share(a[0]))
    .map(([key, words]) => ({ key, text: `${words} (${formatPercent(share(key))})`, hint: METHOD_HINT[key] }));
  const launch = xla.command_buffers === true ? "kernels in command buffers" : xla.command_buffers === false
    ? "kernels launched one by one" : "kernels";
  let headline = `${what}; ${launch}`;
  if (methods.length) headline += `, tied to instructions ${methods.map((m) => m.text).join(", ")}`;
  const left = share("unattributed");
  const unattributed = left > 0 ? `${formatPercent(left)} of kernel time not attributed to an instruction` : "";
  return { headline, methods, unattributed, note: String(xla.note || ""), temps: tempAllocations(xla) };
}

/** The programs' temp allocations: "one 21.38 MiB allocation, at most 21.25 MiB of it live at once (20 buffers)". */
export function tempAllocations(xla) {
  return (Array.isArray(xla?.temp_allocations) ? xla.temp_allocations : []).filter((t) => t && typeof t === "object").map((t) => {
    const live = isKnown(t.live_bytes) ? `, at most ${formatHuman(t.live_bytes)} of it live at once` : ", how much of it is live at once unknown";
    const buffers = isKnown(t.buffers) ? ` (${formatInt(t.buffers)} buffer${Number(t.buffers) === 1 ? "" : "s"})` : "";
    return {
      program: String(t.program ?? ""),
      text: `one ${formatHuman(t.allocation_bytes)} allocation${live}${buffers}`,
      title: `${formatBytesFull(t.allocation_bytes)} allocated for the program's temporaries before it runs; `
        + `${isKnown(t.live_bytes) ? formatBytesFull(t.live_bytes) : "unknown"} of it live at once at most`
        + `${t.source ? ` (from the ${t.source})` : ""}`,
    };
  });
}
