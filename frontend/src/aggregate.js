// Reshaping of API responses for charts and comparison tables. Pure.

import { CATEGORIES, ROLES } from "./roles.js";

/**
 * Breakdown responses of several runs -> one row per run with bytes by role,
 * and each total as a multiple of the smallest ("Adam: 3.00× SGD").
 */
export function compareTotals(breakdowns) {
  const rows = breakdowns.map((b) => {
    const row = { run: b.run, tag: b.tag, step: b.step, optimizer: b.optimizer?.class_name || "" };
    for (const role of ROLES) row[role] = b.totals?.[role] ?? 0;
    row.total = b.total_bytes ?? ROLES.reduce((sum, role) => sum + row[role], 0);
    return row;
  });
  const base = Math.min(...rows.map((r) => r.total).filter((t) => t > 0));
  for (const row of rows) row.ratio = Number.isFinite(base) ? row.total / base : null;
  return rows;
}

// What the allocator held from before the trace, named only where the trace can tell it apart: a zero
// there says "not this kind of trace" (RunMetadata, a default allocator), not a measured nothing.
const NAMED_WHEN_HELD = new Set(["earlier_steps", "held_between_steps"]);

/**
 * The peak's parts in display order: [{category, bytes (null = unknown), reason, share}],
 * then any category a newer backend adds. The parts sum to peak.total.
 */
export function peakParts(peak) {
  const unknown = peak?.unknown || {};
  const known = new Set(CATEGORIES);
  const extra = Object.keys(peak || {}).filter((k) => !known.has(k) && !["total", "unknown", "step_peak_bytes"].includes(k)
    && (peak[k] === null || typeof peak[k] === "number"));
  const total = peak?.total ?? 0;
  return [...CATEGORIES, ...extra].filter((c) => (c in (peak || {}) || c in unknown)
    && !(NAMED_WHEN_HELD.has(c) && !peak[c] && !(c in unknown))).map((category) => {
    const bytes = peak[category] ?? null;
    return { category, bytes, reason: unknown[category] || (bytes === null ? "not in this data" : ""),
      share: bytes !== null && total ? bytes / total : null };
  });
}

/** The n layers with the most bytes, in model order (a chart of 300 layers is unreadable). */
export function largestLayers(layers, n) {
  if (layers.length <= n) return layers;
  const keep = new Set(topN(layers, "total_bytes", n));
  return layers.filter((l) => keep.has(l));
}

/** The n largest rows by `key` (ties keep input order), largest first. */
export function topN(rows, key, n) {
  return rows
    .map((row, index) => ({ row, index }))
    .filter(({ row }) => Number(row[key]) > 0)
    .sort((a, b) => b.row[key] - a.row[key] || a.index - b.index)
    .slice(0, n)
    .map(({ row }) => row);
}

/**
 * Load results -> one bar per load ("keras · compile=True"), in the results' order, and the modes
 * (a bar's colour). A failed load's value is null: its bar is absent rather than zero.
 */
export function loadBars(results, metric) {
  const bars = results.map((r) => ({ label: `${r.format} · ${r.mode}`, mode: r.mode, value: r.error ? null : r[metric] ?? null,
    error: r.error || "" }));
  return { bars, modes: unique(results.map((r) => r.mode)) };
}

/**
 * Split off the "baseline" row (a process that only imports TensorFlow): it is
 * the floor every load's peak RSS stands on, not a format to compare.
 */
export function splitBaseline(results) {
  const baseline = results.find((r) => r.format === "baseline" && !r.error) || null;
  const formats = results.filter((r) => r.format !== "baseline");
  const floor = baseline?.peak_rss_bytes;
  return {
    baseline,
    results: formats.map((r) => ({ ...r, rss_above_baseline: floor && !r.error ? r.peak_rss_bytes - floor : null })),
  };
}

function unique(values) {
  return [...new Set(values)];
}

/**
 * How many replicas the variables on hand have (MirroredStrategy keeps one copy per device and a
 * breakdown counts them all): {min, max}; {min: 1, max: 1} when none is mirrored.
 */
export function replicaSpan(rows) {
  const counts = (rows || []).map((r) => Number(r?.replicas)).filter((n) => Number.isInteger(n) && n >= 1);
  return counts.length ? { min: Math.min(...counts), max: Math.max(...counts) } : { min: 1, max: 1 };
}

/** 2,768,896 B over 2 replicas -> "2 × 1,384,448 = 2,768,896"; one replica: "2,768,896". */
export function replicaBytes(bytes, replicas, formatInt) {
  const n = Number(replicas);
  if (!(n > 1) || !Number.isFinite(Number(bytes))) return formatInt(bytes);
  return `${n} × ${formatInt(bytes / n)} = ${formatInt(bytes)}`;
}
