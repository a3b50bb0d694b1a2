// The Timeline view's stacked areas: bytes in use over the trace by category.
// The backend's stacks add up to the total at every point; this orders them
// (weights and slots at the bottom), finds the peak and thins long traces for drawing without losing it. Pure.

import { formatBytesFull, formatHuman, formatInt, formatPercent } from "./format.js";
import { CATEGORIES } from "./roles.js";

/**
 * timeline: {t_us, bytes, op, stacks: {category: [bytes per point]}, peak_time_us}
 * -> {t, total, op, series: [{category, values}] bottom first, peak (index into t)}
 * with at most maxPoints points: per bucket of time the point of the highest
 * total is kept, so the drawn peak is the true one.
 */
export function stackTimeline(timeline, maxPoints = 2000) {
  const t = timeline?.t_us || [];
  const stacks = timeline?.stacks || {};
  const order = [...CATEGORIES.filter((c) => c !== "unattributed"), ...Object.keys(stacks).filter((c) => !CATEGORIES.includes(c)),
    "unattributed"].filter((c) => Array.isArray(stacks[c]) && stacks[c].length === t.length);
  // The stacks' sum is the total (RunMetadata: the step's bytes plus the breakdown's, on top of `bytes`).
  const total = order.length ? t.map((_, i) => order.reduce((sum, c) => sum + stacks[c][i], 0)) : (timeline?.bytes || []);
  const peak = peakIndex(t, total, timeline?.peak_time_us);
  const keep = thin(total, maxPoints, peak);
  // An allocator that records only its large allocations (timeline.allocations "large") counts no small
  // variable, while the bands hold the breakdown's variables whole: where they pass its count, that count is
  // drawn too (`counted`, null otherwise).
  const bytes = timeline?.bytes || [];
  const above = timeline?.allocations === "large" && order.length > 0 && bytes.length === t.length
    && total.some((v, i) => v > bytes[i] + 0.5);
  return {
    t: keep.map((i) => t[i]),
    total: keep.map((i) => total[i]),
    op: keep.map((i) => timeline?.op?.[i] || ""),
    series: order.map((category) => ({ category, values: keep.map((i) => stacks[category][i]) })),
    peak: keep.indexOf(peak),
    counted: above ? keep.map((i) => bytes[i]) : null,
  };
}

/** The point of the peak: the highest total, the one nearest peak_time_us among equals. */
export function peakIndex(t, total, peakTimeUs) {
  let best = -1;
  for (let i = 0; i < total.length; i++) {
    if (best < 0 || total[i] > total[best]) best = i;
    else if (total[i] === total[best] && Number.isFinite(peakTimeUs)
      && Math.abs(t[i] - peakTimeUs) < Math.abs(t[best] - peakTimeUs)) best = i;
  }
  return best;
}

/** Indices to draw: all of them, or per bucket the highest, the peak always. */
export function thin(total, maxPoints, peak = -1) {
  const n = total.length;
  if (n <= maxPoints) return Array.from({ length: n }, (_, i) => i);
  const buckets = Math.max(2, maxPoints - 2);
  const keep = [0];
  for (let b = 0; b < buckets; b++) {
    const from = Math.max(1, Math.floor((b * n) / buckets));
    const to = Math.min(n - 1, Math.floor(((b + 1) * n) / buckets));
    let best = -1;
    for (let i = from; i < to; i++) if (best < 0 || total[i] > total[best]) best = i;
    if (peak >= from && peak < to) best = peak;
    if (best >= 0) keep.push(best);
  }
  keep.push(n - 1);
  return [...new Set(keep)].sort((a, b) => a - b);
}

/** Each series' value at point i plus the total: what the tooltip lists. */
export function breakdownAt(stacked, i) {
  return {
    t: stacked.t[i], total: stacked.total[i], op: stacked.op[i],
    parts: stacked.series.map((s) => ({ category: s.category, bytes: s.values[i] })).filter((p) => p.bytes > 0),
  };
}

/**
 * What the allocator handed out beyond what the buffers at the peak asked for (the "Bytes" column
 * sums to the peak; "Requested" is shape x dtype), and its own fragmentation figure there; "" when
 * the profile recorded no request.
 */
export function handedOutNote(handedOut, allocators = []) {
  if (!handedOut || !(handedOut.buffers > 0)) return "";
  const extra = handedOut.bytes - handedOut.requested_bytes;
  const frag = (allocators || []).find((a) => a.counted !== false && Number.isFinite(a.fragmentation_at_peak));
  return `Bytes is the chunk the allocator handed out (these sum to the peak); Requested is what the op asked for. `
    + `For the ${formatInt(handedOut.buffers)} buffers whose request the profile recorded: ${formatHuman(handedOut.bytes)} `
    + `handed out for ${formatHuman(handedOut.requested_bytes)} asked, ${formatHuman(extra)} more `
    + `(${formatPercent(handedOut.requested_bytes ? extra / handedOut.requested_bytes : 0)}: the allocator's size classes, `
    + "and free chunks it handed out whole rather than split)"
    + (frag ? `; ${frag.name} reports ${formatPercent(frag.fragmentation_at_peak)} fragmentation at its peak.` : ".");
}

/** Where the bands pass the allocator's own count (`stacked.counted`): by how much, and why, in words; "" elsewhere. */
export function countedNote(stacked) {
  if (!stacked?.counted) return "";
  const gap = stacked.total.reduce((most, v, i) => Math.max(most, v - stacked.counted[i]), 0);
  return `The dashed line is the allocator's own count of bytes in use. The bands pass it by up to ${formatBytesFull(gap)}: `
    + "it records only its large allocations, so it counts none of the model's small variables; the bands hold the "
    + "variables the breakdown lists whole, as they are all step.";
}
