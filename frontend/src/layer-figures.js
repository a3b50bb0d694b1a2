// The Ops view's layer rows and join in words, where part of a figure is unknown: a byte sum over
// ops some of which have no figure is a floor ("≥ 1,234 (+ 3 ops unknown)"), a phase none of whose ops
// reached a layer is unknown per layer (its time is in the join's unplaced_time_us), a composite's
// own time is the time of ops on it and in none of its sublayers. Pure, no DOM.

import { isolate } from "./bidi.js";
import { UNKNOWN, formatBytesFull, formatHuman, formatInt, formatMicros, formatShare, isKnown } from "./format.js";
import { PHASES } from "./roles.js";

const plural = (n, one, many = `${one}s`) => `${formatInt(n)} ${n === 1 ? one : many}`;

/**
 * A layer row's bytes summed over its ops when `unknownOps` of them have none (`what`: "output bytes"):
 * {text, title, value (for sorting: null when unknown), floor (the figure is a lower bound)}.
 *   1,234                       every op's figure known
 *   ≥ 1,234 (+ 3 ops unknown)   three ops' figures unknown: the sum is a floor (what the known ones add up to)
 *   unknown (3 ops)             no op's figure known
 * `why` says why an op's figure can be unknown.
 */
export function floorBytes(bytes, unknownOps, what, why = "") {
  const n = Number(unknownOps) || 0;
  const reason = why ? `: ${why}` : "";
  if (!isKnown(bytes)) {
    return { text: n ? `${UNKNOWN} (${plural(n, "op")})` : UNKNOWN, value: null, floor: false,
      title: `unknown: no op under this row has known ${what}${n ? ` (${plural(n, "op")} without a figure)` : ""}${reason}` };
  }
  if (!n) return { text: formatInt(bytes), value: bytes, floor: false, title: formatBytesFull(bytes) };
  return { text: `≥ ${formatInt(bytes)} (+ ${plural(n, "op")} unknown)`, value: bytes, floor: true,
    title: `at least ${formatBytesFull(bytes)}: the ${what} of ${plural(n, "op")} under this row ${n === 1 ? "is" : "are"} unknown${reason}` };
}

/** Why an op's allocated bytes can be unknown, from the answer's `allocations`. */
export function allocationWhy(data) {
  if (data?.allocations === "none") return "the trace recorded no allocation event";
  if (data?.allocations === "large") return "the allocator recorded only its large allocations, none of this op's";
  if (data?.allocations === "planned") return "XLA's buffer assignment plans no buffer of it live at the peak";
  return "the trace recorded no allocation for it";
}

/** Why an op's output bytes can be unknown: the profile's note when it has no graph, else the general reason. */
export function outputWhy(data) {
  const note = graphNote(data);
  return note || "neither measured by the allocator nor derivable from the traced graph (no graph, or a size known only at run time)";
}

/** The note of a profile with no graph (`graph.graphs == 0`): why its output bytes are unknown; "" otherwise. */
export function graphNote(data) {
  const graph = data?.graph;
  if (!graph || typeof graph !== "object" || graph.graphs !== 0) return "";
  return String(graph.note || "the profile has no graph: output bytes are known only where the allocator recorded them");
}

/**
 * A row's time per phase: [{phase, us (null = unknown), text}], the phases the row has time in (a group
 * row of no layer: its own, input and executor too) and, on a layer, those none of whose ops reached a
 * layer (null there: their time is in the join's unplaced_time_us).
 */
export function phaseTimes(row, unplaced = {}) {
  return PHASES.flatMap((phase) => {
    const us = row?.[`${phase}_time_us`];
    if (isKnown(us)) return us > 0 ? [{ phase, us, text: `${phase} ${formatMicros(us)}` }] : [];
    return row?.layer && Number(unplaced?.[phase]) > 0 ? [{ phase, us: null, text: `${phase} ${UNKNOWN}` }] : [];
  });
}

/** A composite's own time (ops on it, in none of its sublayers), or null for a leaf and a row of no layer. */
export function ownTime(row) {
  if (!row?.layer || row.leaf || !isKnown(row.own_time_us)) return null;
  return Number(row.own_time_us);
}

/**
 * The Time cell's tooltip: the total, per phase (unknown phases named, with the time of their ops on no
 * layer), and for a composite how much of it is its own.
 *   "1.20 s: forward 389.18 ms · backward 719.37 ms · optimizer 90.78 ms · loss unknown · metrics unknown"
 */
export function timeTitle(row, join = {}) {
  const unplaced = join?.unplaced_time_us || {};
  const phases = phaseTimes(row, unplaced);
  const lines = [phases.length ? `${formatMicros(row?.time_us)}: ${phases.map((p) => p.text).join(" · ")}` : formatMicros(row?.time_us)];
  const own = ownTime(row);
  if (own !== null) {
    lines.push(own > 0 ? `${formatMicros(own)} of it on ${isolate(row.label || row.layer)} itself, in none of its sublayers`
      : "all of it in its sublayers");
  }
  const unknown = phases.filter((p) => p.us === null);
  if (unknown.length) {
    lines.push(`per layer, ${unknown.map((p) => p.phase).join(", ")} time is unknown: none of those ops was placed on a layer `
      + `(on no layer: ${unknown.map((p) => `${p.phase} ${formatMicros(unplaced[p.phase])}`).join(", ")})`);
  }
  return lines.join("\n");
}

/**
 * The join in words: {fraction, leaf, of, unplaced: [{phase, us, text}], text}. `fraction` is the op time
 * on the model's layers, `leaf` on its leaf layers (an op on a composite, the model's root, is placed less
 * precisely), `unplaced` the time of ops on no layer by phase. `note` follows the first figure (where the
 * layers come from).
 */
export function joinSummary(data, note = "") {
  const join = data?.join || {};
  const unplaced = Object.entries(join.unplaced_time_us || {}).filter(([, us]) => Number(us) > 0)
    .sort((a, b) => PHASES.indexOf(a[0]) - PHASES.indexOf(b[0]))
    .map(([phase, us]) => ({ phase, us, text: `${phase} ${formatMicros(us)}` }));
  const fraction = formatShare(join.fraction);
  const leaf = formatShare(join.leaf_fraction);
  let of = "";
  if (isKnown(join.joined_time_us) && isKnown(data?.total_time_us)) {
    const [joined, total] = [formatMicros(join.joined_time_us), formatMicros(data.total_time_us)];
    const left = data.total_time_us - join.joined_time_us;
    of = joined === total && left > 0 ? `all but ${formatMicros(left)} of ${total}` : `${joined} of ${total}`; // not "1.20 s of 1.20 s"
  }
  const parts = [];
  if (fraction) parts.push(`${fraction} of op time on the model's layers${of ? ` (${of})` : ""}${note}`);
  if (leaf) parts.push(`${leaf} on leaf layers`);
  const none = unplaced.length ? `on no layer: ${unplaced.map((p) => p.text).join(", ")}` : "";
  const compiled = compiledWords(join.compiled_layers);
  return { fraction, leaf, of, unplaced, none, compiled,
    text: [parts.join(", "), none, compiled].filter(Boolean).join("; ") };
}

/** "Net ran as a torch.compile graph: its sublayers' ops ran inside it, unnamed (their figures unknown)", or "". */
export function compiledWords(layers) {
  const names = (Array.isArray(layers) ? layers : []).map(String).filter(Boolean);
  if (!names.length) return "";
  const which = names.length === 1 ? `${names[0]} ran as a torch.compile graph` : `${names.join(", ")} ran as torch.compile graphs`;
  return `${which}: its sublayers' ops ran inside, where no module is named (their figures unknown)`;
}

/**
 * The step's two durations, named: the op time summed over every op (ops on several threads overlap, so it
 * can exceed the wall time) and the wall time the Timeline spans, with their ratio:
 * "47.12 ms of op time, summed over ops on all threads · the Timeline spans 28.75 ms of wall time (1.64x)".
 */
export function opTimeWords(data) {
  if (!data?.timed || !isKnown(data.total_time_us)) return "";
  const sum = `${formatMicros(data.total_time_us)} of op time, summed over ops on all threads`;
  const span = data.timeline_span_us;
  if (!isKnown(span) || span <= 0) return sum;
  const ratio = data.total_time_us / span;
  return `${sum} · the Timeline spans ${formatMicros(span)} of wall time (op time ${ratio.toFixed(2)}x it`
    + `${ratio > 1.005 ? ": ops ran side by side" : ""})`;
}

/** Whose ops the top charts list when ops ran on several devices (the answer's top_device, the busiest). */
export function topDeviceWords(data) {
  if (!data?.top_device) return "";
  const count = (data.devices || []).length;
  return `the top ops are ${data.top_device}'s, the busiest of ${count > 1 ? `the ${count} devices` : "the devices"} (an XLA step runs the same instructions on each)`;
}

/**
 * The warning of a trace that missed allocations, leading with what to do: a trace of TensorFlow's default CPU
 * allocator ("large": only its large allocations recorded) counts the small buffers as nothing, so its peak and
 * split undercount (and its unattributed share is large); tracing again with the BFC allocator records them.
 */
export function allocationsWarning(data) {
  if (!data?.allocations || data.allocations === "all" || data.allocations === "planned") return "";
  if (data.allocations === "large") {
    return "To see this peak split to the byte, call tb_modelmem.enable_full_memory_trace() first thing in the"
      + " training script (before TensorFlow runs an op) and trace the step again. Why: "
      + (data.allocations_note || "this trace recorded only the allocator's large allocations: the peak and its"
        + " split undercount the rest.");
  }
  return data.allocations_note || "This trace recorded no allocations: the peak and its split are unknown.";
}

/**
 * Where no allocation was recorded and XLA's plan stands in (`allocations` "planned"): the figures are complete,
 * just planned rather than measured. "" for any other answer.
 */
export function plannedNote(data) {
  if (data?.allocations !== "planned") return "";
  const note = String(data.allocations_note || "").trim();
  return `Planned by XLA's buffer assignment, per device${note ? `: ${note}` : "."}`;
}

/**
 * What a caching allocator (torch's on CUDA) held reserved at the peak beyond the tensors in use: cached free
 * blocks, which an out-of-memory error counts too (`reserved_at_peak_bytes` of the counted allocator). "" where
 * no allocator reported it.
 */
export function reservedNote(data) {
  const caching = (data?.allocators || []).find((a) => a.counted !== false && isKnown(a.reserved_at_peak_bytes)
    && isKnown(a.peak_bytes));
  if (!caching) return "";
  const cached = caching.reserved_at_peak_bytes - caching.peak_bytes;
  return `${caching.name}'s caching allocator held ${formatHuman(caching.reserved_at_peak_bytes)} reserved at the peak: `
    + `${formatHuman(cached)} (${formatShare(cached / caching.reserved_at_peak_bytes)}) in cached free blocks beyond `
    + `the ${formatHuman(caching.peak_bytes)} of tensors in use, which an out-of-memory error counts too`
    + (isKnown(caching.max_reserved_bytes) && caching.max_reserved_bytes > caching.reserved_at_peak_bytes
      ? ` (at most ${formatHuman(caching.max_reserved_bytes)} reserved in the window).` : ".");
}

/** The peak is XLA's plan, not a measurement. */
export const isPlanned = (data) => data?.allocations === "planned";
