// A step that ran out of memory (/oom, records.OomReport) in the words the tab shows. Pure.

import { formatHuman, formatInt, isKnown, shortDevice } from "./format.js";

/** "Step 1 ran out of memory allocating 256.00 GiB ([64,1073741824] float32) for functional/blowup/Tile on CPU:0". */
export function oomHeadline(report, step) {
  const r = report || {};
  const what = isKnown(r.requested_bytes) ? ` allocating ${formatHuman(r.requested_bytes)}` : "";
  const shape = r.shape ? ` (${[r.shape, r.dtype].filter(Boolean).join(" ")})` : "";
  const op = r.op ? ` for ${r.op}` : "";
  const device = r.device ? ` on ${shortDevice(r.device)}` : "";
  const at = isKnown(step) ? `Step ${formatInt(step)}` : "A step";
  return `${at} ran out of memory${what}${shape}${op}${device}`;
}

/** What was in use then, and what the device may hold: the lines under the headline. */
export function oomDetails(report) {
  const r = report || {};
  const lines = [];
  if (r.where) lines.push(`in ${r.where}${r.allocator ? `, allocator ${r.allocator}` : ""}`);
  for (const d of r.devices || []) {
    lines.push(`${shortDevice(d.name)}: ${formatHuman(d.current_bytes)} in use then, at most ${formatHuman(d.peak_bytes)} so far`);
  }
  if (isKnown(r.bytes_limit)) lines.push(`the device holds ${formatHuman(r.bytes_limit)}`);
  if (isKnown(r.rss_bytes)) lines.push(`process RSS ${formatHuman(r.rss_bytes)}`);
  return lines;
}

/** The budget to project against: what the device holds, else the most its allocator ever held ("" if neither is known). */
export function oomBudget(report) {
  const r = report || {};
  if (isKnown(r.bytes_limit)) return String(r.bytes_limit);
  const peaks = (r.devices || []).map((d) => d.peak_bytes).filter(isKnown);
  return peaks.length ? String(Math.max(...peaks)) : "";
}
