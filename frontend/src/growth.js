// "Growth": the words and figures of a /growth answer. Series names in words, the growth per
// step or build in human units, chart points (a missing value is a gap, never 0), axis
// ranges, the "what explains it" tables to show. Pure, no DOM.

import { byteAxisInterval, formatHuman, formatInt, isKnown } from "./format.js";

// [plural, singular] of the series the backend names; a count of 1 reads singular.
const WORDS = {
  rss_bytes: ["RSS", "RSS"],
  live_variables: ["live variables", "live variable"],
  live_variable_bytes: ["live variable bytes", "live variable bytes"],
  graph_ops: ["graph ops", "graph op"],
  live_models: ["live models", "live model"],
  python_objects: ["Python objects", "Python object"],
};
const DEVICE_WORDS = { bytes_in_use: "bytes in use", peak_bytes: "peak bytes" };

/** "live_variables" -> "live variables" ("live variable" for a count of 1); "GPU:0/bytes_in_use" -> "GPU:0 bytes in use". */
export function seriesLabel(series, count) {
  const name = String(series ?? "");
  const words = WORDS[name];
  if (words) return Math.abs(count) === 1 ? words[1] : words[0];
  const cut = name.lastIndexOf("/");
  if (cut > 0 && DEVICE_WORDS[name.slice(cut + 1)]) return `${name.slice(0, cut)} ${DEVICE_WORDS[name.slice(cut + 1)]}`;
  return name.replace(/_/g, " ");
}

/** A series' unit: the answer's, else what its name says. */
export function seriesUnit(data, series) {
  const unit = data?.series?.[series]?.unit;
  if (unit === "bytes" || unit === "count") return unit;
  return /bytes/.test(String(series)) ? "bytes" : "count";
}

/**
 * What one step of the samples stands for. The answer does not say; MemoryCallback labels its
 * samples ("train begin", "epoch 1 end"), so labelled samples are training steps. Unlabelled
 * samples at consecutive steps are read as one per model build (summary.memory(step=build)).
 */
export function sampleUnit(data) {
  if ((data?.labels || []).some((l) => l?.label)) return "step";
  const steps = allSteps(data);
  return steps.length >= 2 && steps.every((s, i) => i === 0 || s - steps[i - 1] === 1) ? "build" : "step";
}

/** Every step any series has a sample at, in order. */
export function allSteps(data) {
  const steps = new Set();
  for (const s of Object.values(data?.series || {})) for (const step of s?.steps || []) if (isKnown(step)) steps.add(Number(step));
  return [...steps].sort((a, b) => a - b);
}

/** A figure of a count: exact when whole or large, else three significant digits (2.8, 0.239). */
export function formatCount(n) {
  if (!isKnown(n)) return "unknown";
  const v = Number(n);
  if (Number.isInteger(v) || Math.abs(v) >= 100) return formatInt(v);
  return String(Number(v.toPrecision(3)));
}

/** Growth per step in its unit, signed: "+22", "+510.14 KiB", "-0.239", "0"; null -> "unknown". */
export function formatPerStep(perStep, unit) {
  if (!isKnown(perStep)) return "unknown";
  const v = Number(perStep);
  const sign = v > 0 ? "+" : v < 0 ? "-" : "";
  const a = Math.abs(v);
  if (unit !== "bytes") return sign + formatCount(a);
  return sign + (a < 1024 ? `${Number(a.toPrecision(3))} B` : formatHuman(a));
}

/** {series, per_step} -> "+22 live variables per build", "+510.14 KiB live variable bytes per build". */
export function growthPhrase(entry, unit, word) {
  const per = entry?.per_step;
  const label = seriesLabel(entry?.series, unit === "bytes" ? 2 : per);
  return `${formatPerStep(per, unit)} ${label} per ${word}`;
}

/**
 * The summary: the flagged series in the answer's order, each with its phrase and reason;
 * `none` says why nothing is flagged when nothing is.
 */
export function growthSummary(data) {
  const word = sampleUnit(data);
  const growth = (data?.growth || []).filter((g) => g && typeof g.series === "string");
  const flagged = growth.filter((g) => g.flagged).map((g) => ({
    series: g.series, unit: seriesUnit(data, g.series), per_step: g.per_step,
    text: growthPhrase(g, seriesUnit(data, g.series), word), reason: String(g.reason || ""),
  }));
  let none = "";
  if (!flagged.length) {
    const steps = allSteps(data);
    const span = steps.length ? ` (${word}s ${formatInt(steps[0])}–${formatInt(steps[steps.length - 1])})` : "";
    const tooFew = growth.length && growth.every((g) => /too few/.test(String(g.reason || "")));
    none = tooFew ? `Nothing flagged: ${growth[0].reason}.`
      : `Nothing keeps growing over ${formatInt(data?.samples ?? steps.length)} samples${span}.`;
  }
  return { word, flagged, none };
}

/** The series to chart, in the answer's order (series with no sample left out). */
export function chartedSeries(data) {
  return Object.entries(data?.series || {}).filter(([, s]) => (s?.steps || []).length).map(([name]) => name);
}

/**
 * [[step, value]] of one series in step order. A value the sample does not have stays null
 * (the line breaks there): unknown is not 0.
 */
export function seriesPoints(series) {
  const steps = series?.steps || [];
  const values = series?.values || [];
  const out = [];
  for (let i = 0; i < steps.length; i++) {
    if (!isKnown(steps[i])) continue;
    out.push([Number(steps[i]), isKnown(values[i]) ? Number(values[i]) : null]);
  }
  return out.sort((a, b) => a[0] - b[0]);
}

/**
 * The value axis of one small chart: it spans the data (a growth of 10 MiB on 650 MiB of RSS
 * must be visible) on round ticks; a flat series starts at 0. {} when nothing is known.
 */
export function axisRange(values, unit) {
  const known = values.filter(isKnown).map(Number);
  if (!known.length) return {};
  const lo = Math.min(...known);
  const hi = Math.max(...known);
  // bytes and counts are whole: no 0.2 B ticks on a flat series at 0
  if (lo === hi) return lo >= 0 ? { min: 0, minInterval: 1 } : { minInterval: 1 };
  if (unit !== "bytes") return { scale: true, minInterval: 1 };
  const interval = byteAxisInterval(hi - lo, 4);
  return { min: Math.floor(lo / interval) * interval, max: Math.ceil(hi / interval) * interval, interval };
}

/** Sample labels by step ("train end"); two labels at one step are joined. */
export function labelsByStep(labels) {
  const out = new Map();
  for (const l of labels || []) {
    if (!isKnown(l?.step) || !l.label) continue;
    const step = Number(l.step);
    out.set(step, out.has(step) ? `${out.get(step)} · ${l.label}` : String(l.label));
  }
  return out;
}

export const EXPLAIN_TABLES = ["models", "variables_by_owner", "graph_ops_by_function", "objects_by_type"];

/** The "what explains it" tables with rows: [{key, rows, bytes (some row has a byte figure)}]. */
export function explainTables(explained) {
  return EXPLAIN_TABLES.map((key) => {
    const rows = Array.isArray(explained?.[key]) ? explained[key].filter((r) => r && typeof r === "object") : [];
    return { key, rows, bytes: rows.some((r) => isKnown(r.bytes)) };
  }).filter((t) => t.rows.length);
}

/** Samples the server could not read ([{step, error}]): what the series leave out, and why (the first reason). */
export function unreadableNote(unreadable) {
  const list = (Array.isArray(unreadable) ? unreadable : []).filter((u) => u && typeof u === "object");
  if (!list.length) return "";
  const steps = list.map((u) => u.step).filter(isKnown).map(formatInt);
  const which = steps.length ? ` (${steps.length === 1 ? "step" : "steps"} ${steps.slice(0, 5).join(", ")}${steps.length > 5 ? ", …" : ""})` : "";
  const n = list.length === 1 ? "1 sample" : `${formatInt(list.length)} samples`;
  return `${n} could not be read${which} and ${list.length === 1 ? "is" : "are"} left out of the series`
    + `${list[0].error ? `: ${list[0].error}` : "."}`;
}

// A line of a census missing from the first sample after warm-up, when that census was cut to its top
// lines: it may have been below the cut, so how much it grew is unknown (the backend's rules/growth.py).
export const UNKNOWN_GROWTH_WHY = "missing from the census of the first sample after warm-up, which lists only its largest "
  + "lines (the rest summed as \"(other)\"): below that cut or not there at all, the census cannot tell, so how much it grew is unknown";

/** "14 rows: unknown growth, …why": what an explaining table's unknown rows mean, or "" when every row is known. */
export function unknownGrowthNote(rows) {
  const n = (rows || []).filter((r) => r && !isKnown(r.grown)).length;
  if (!n) return "";
  return `${n === 1 ? "1 row" : `${formatInt(n)} rows`} read "unknown": ${UNKNOWN_GROWTH_WHY}.`;
}

/**
 * A row's growth per step or build, in words: a rate for a line that was there after warm-up and grew;
 * "appeared" for one absent then (its growth is its whole count, not a steady rate: 2.8 variables
 * per build for an optimizer built once would mislead); "unknown" when its growth is.
 */
export function perStepText(row) {
  if (!isKnown(row?.grown) || !isKnown(row?.per_step)) return "unknown";
  if (row.new === true) return "appeared";
  return formatCount(row.per_step);
}

/** How many series of a /growth answer keep growing (0 for an answer that is not one). */
export function flaggedCount(answer) {
  return (Array.isArray(answer?.growth) ? answer.growth : []).filter((g) => g && g.flagged).length;
}

/**
 * The item to open Growth on: the one with the most series flagged (the first in the listing's
 * order on a tie); null when nothing is flagged anywhere. `scanned`: [{run, tag, flagged}].
 */
export function mostFlagged(scanned) {
  return (scanned || []).reduce((best, s) => (s.flagged > (best?.flagged ?? 0) ? s : best), null);
}
