// The What-if answer (/whatif, rules/projection.py on the server) in the words the panel shows.
// Pure functions, so they are tested without a browser.

import { formatHuman, formatInt, formatMicros, isKnown } from "./format.js";
import { CATEGORIES, CATEGORY_LABEL } from "./roles.js";
import { devicesWords } from "./devices.js";

// What-if's rows: the peak's categories, then how far the allocator band's middle is from the chunks scaled.
const ROWS = [...CATEGORIES, "allocator_chunking"];
const HOW = { measured: "measured", computed: "computed", scaled: "scaled", kept: "kept", moved: "moved" };

/**
 * The query a form asks: empty fields and the defaults left out (the server keeps what the trace ran with).
 * The device count goes as `devices` (a form of an older tab may still hold `replicas`: the same question).
 */
export function whatifParams(form) {
  const out = {};
  const batch = String(form.batch ?? "").trim();
  if (batch) out.batch = batch;
  const seq = String(form.seq ?? "").trim();
  if (seq) out.seq = seq;
  if (form.optimizer) out.optimizer = form.optimizer;
  if (form.policy) out.policy = form.policy;
  const devices = String(form.devices ?? form.replicas ?? "").trim();
  if (devices && devices !== "1") out.devices = devices;
  if (form.shard) out.shard = form.shard;
  const budget = String(form.budget ?? "").trim();
  if (budget) out.budget = budget;
  return out;
}

/**
 * One row per peak category, in stacking order: traced and projected bytes (null: unknown), the traced bytes
 * at the projected peak's moment where it moved (`then`), how the projection was made, its formula, and why a
 * figure is unknown.
 */
export function projectionRows(whatif) {
  const basis = new Map((whatif?.basis || []).map((b) => [b.category, b]));
  const byCategory = whatif?.by_category || {};
  const unknown = whatif?.unknown || {};
  return ROWS.filter((c) => c in byCategory || basis.has(c)).map((category) => {
    const line = basis.get(category);
    const projected = isKnown(byCategory[category]) ? byCategory[category] : null;
    return {
      category, label: CATEGORY_LABEL[category] || category,
      traced: isKnown(line?.traced_bytes) ? line.traced_bytes : null,
      // what the traced step held at the projected peak's moment, where that is another (the figure's basis)
      then: isKnown(line?.traced_then_bytes) ? line.traced_then_bytes : null,
      projected,
      how: category in unknown ? "unknown" : HOW[line?.how] || "",
      formula: category in unknown ? unknown[category] : line?.formula || "",
    };
  });
}

/**
 * The row under the peak for a CUDA step: what its caching allocator reserved in the trace and would reserve at
 * the asked setting (its requests replayed, `reserved.how` says how and how close it reads at the traced setting);
 * null where the trace's allocator is no caching one.
 */
export function reservedRow(whatif) {
  const reserved = whatif?.reserved;
  if (!reserved) return null;
  return {
    category: "reserved", label: CATEGORY_LABEL.reserved,
    traced: isKnown(reserved.traced_bytes) ? reserved.traced_bytes : null,
    projected: isKnown(reserved.bytes) ? reserved.bytes : null,
    how: isKnown(reserved.bytes) ? "replayed" : "unknown",
    formula: reserved.how || "",
  };
}

/**
 * "Projected peak 245.9 MiB at batch 128 (traced: 37.6 MiB at batch 16)", "... at batch 16 on each of 8 devices,
 * optimizer state sharded (...)", "... at batch 16, under Adam (traced: ... at batch 16, under SGD)" where an
 * optimizer was asked, or why it is unknown. An older answer has `replicas` and no `devices`.
 */
export function projectionHeadline(whatif) {
  if (!whatif) return "";
  const traced = whatif.traced || {};
  const where = devicesWords(whatif.devices ?? whatif.replicas, whatif.shard);
  const seq = (n) => (n ? `, sequence ${formatInt(n)}` : "");
  const under = (name) => (whatif.optimizer && name ? `, under ${name}` : "");
  const at = (whatif.batch_per_replica
    ? ` at batch ${formatInt(whatif.batch_per_replica)}${seq(whatif.seq)}${where ? ` ${where}` : ""}`
    : where ? ` ${where}` : "") + under(whatif.optimizer);
  const was = isKnown(traced.peak_bytes) ? ` (traced: ${formatHuman(traced.peak_bytes)}`
    + `${traced.batch ? ` at batch ${formatInt(traced.batch)}${seq(traced.seq)}` : ""}${under(traced.optimizer)})` : "";
  if (!isKnown(whatif.peak_bytes)) return `Projected peak: unknown${at}${was}`;
  return `Projected peak ${formatHuman(whatif.peak_bytes)}${at}${was}`;
}

/**
 * How far apart the traced steps' own peaks project: "The 2 traced steps peaked at 79.8 MiB and 81.1 MiB: each
 * projects to 114.5–116.7 MiB, a spread of 1.9% (how far one step's trace can be trusted)"; "" for one step.
 */
export function stepsLine(whatif) {
  const steps = (whatif?.steps || []).filter((s) => isKnown(s?.peak_bytes) && isKnown(s?.traced_peak_bytes));
  if (steps.length < 2) return "";
  const projected = steps.map((s) => s.peak_bytes);
  const low = Math.min(...projected);
  const high = Math.max(...projected);
  const traced = steps.map((s) => formatHuman(s.traced_peak_bytes));
  return `The ${steps.length} traced steps peaked at ${traced.slice(0, -1).join(", ")} and ${traced.at(-1)}:`
    + ` each projects to ${formatHuman(low)}–${formatHuman(high)}, a spread of ${(100 * (high - low) / high).toFixed(1)}%`
    + " (how far one step's trace can be trusted)";
}

/**
 * How far the allocator's chunking alone can move the figure (a BFC allocator's trace): "Allocator band:
 * 392.78 MiB–536.61 MiB. A BFC allocator hands ..."; "" when the answer has none.
 */
export function bandLine(whatif) {
  const band = whatif?.band;
  if (!band || !isKnown(band.low_bytes) || !isKnown(band.high_bytes)) return "";
  const traced = `${band.op || "an unnamed buffer"}${band.shape ? ` (${band.shape} as traced)` : ""}`;
  const buffer = band.copy ? `the loss's float32 copy of ${traced}` : traced;
  const most = isKnown(band.most_bytes) ? `the most BFC would: ${formatHuman(band.most_bytes)}` : "twice that";
  return `Allocator band: ${formatHuman(band.low_bytes)}–${formatHuman(band.high_bytes)}. A BFC allocator hands a `
    + "request a free chunk whole when it is under twice the request and less than 128 MiB over it, so a buffer "
    + "holds from its size to the lesser of twice it and 128 MiB more, and runs of one setting differ by which it "
    + "gets: from every buffer at the traced peak handed just its request "
    + `(${formatHuman(band.slack_bytes)} less) to the largest, ${buffer}, asking `
    + `${formatHuman(band.requested_bytes)} here (counted at ${formatHuman(band.counted_bytes)}), handed ${most}.`
    + (isKnown(whatif.by_category?.allocator_chunking)
      ? " Where the asked setting changes the step or the state, the projected peak is the band's middle (the Allocator chunking row)."
      : "");
}

/** What the traced step ran with, in one line: "Adam · float32 · batch 32" (" · sequence 128" for a sequence). */
export function tracedLine(whatif) {
  const traced = whatif?.traced || {};
  return [traced.optimizer || "optimizer not recorded", traced.policy || "", traced.batch ? `batch ${formatInt(traced.batch)}`
    : "batch not recorded", traced.seq ? `sequence ${formatInt(traced.seq)}` : ""].filter(Boolean).join(" · ");
}

/** "Largest batch within 16.0 GiB: 1,024, projected 15.8 GiB (0.2 GiB to spare)", or "none" (unknown) or "none fits" (not one sample) and why. */
export function budgetLine(budget) {
  if (!budget) return "";
  const found = !isKnown(budget.largest_batch) ? "none"
    : budget.largest_batch === 0 ? "none fits" : formatInt(budget.largest_batch);
  const within = budget.cautious_by === "reserved"
    ? "what the caching allocator reserves" : "the allocator band's high end";
  const cautious = isKnown(budget.cautious_batch) && isKnown(budget.largest_batch)
    && budget.cautious_batch < budget.largest_batch
    ? `; ${formatInt(budget.cautious_batch)} with ${within} within it too` : "";
  const at = budget.largest_batch > 0 && isKnown(budget.largest_batch_peak_bytes)
    ? `, projected ${formatHuman(budget.largest_batch_peak_bytes)} (${formatHuman(budget.bytes - budget.largest_batch_peak_bytes)} to spare)`
    : "";
  return `Largest batch within ${formatHuman(budget.bytes)}: ${found}${at}${budget.note ? ` (${budget.note})` : ""}${cautious}`;
}

/**
 * Where the projected peak falls when the replay moves it: "The projected peak falls 27.09 ms into the trace,
 * the traced one at 21.34 ms: ...", saying which moment each column is taken at; "" when it does not move.
 */
export function movedLine(whatif) {
  if (!whatif?.peak_moved) return "";
  const traced = whatif.traced?.peak_time_us;
  return `The projected peak falls ${formatMicros(whatif.peak_time_us)} into the trace`
    + (isKnown(traced) ? `, the traced one at ${formatMicros(traced)}` : ", not where the traced one does")
    + ": each Projected figure is what would be in use then, and its Basis is taken at that moment, on what the"
    + " traced step held then (Traced then); each Traced figure is the traced peak's (no allocator band: the trace"
    + " keeps the buffers of its own peak only).";
}
