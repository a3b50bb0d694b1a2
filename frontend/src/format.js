// Number formatting shared by cards, tables and chart labels. Pure, no DOM.

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

/** 13098536 -> "13,098,536" (exact, locale-independent so tests can match it). */
export function formatInt(n) {
  if (n === null || n === undefined || !Number.isFinite(Number(n))) return "—";
  const sign = n < 0 ? "-" : "";
  const digits = String(Math.round(Math.abs(n)));
  return sign + digits.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

/** 13098536 -> "12.49 MiB"; binary units, two decimals above bytes. */
export function formatHuman(bytes) {
  return human(bytes, (value) => value.toFixed(2));
}

/** Axis labels: "10 MiB", "12.5 MiB" (no trailing zeros). */
export function formatHumanShort(bytes) {
  return human(bytes, (value) => String(Number(value.toFixed(2))));
}

/**
 * Axis labels on ticks `interval` bytes apart: as many decimals as the ticks need to differ
 * ("2.005 GiB", "2.01 GiB" five MiB apart, not "2 GiB" twice), at most three.
 */
export function formatHumanTick(bytes, interval) {
  return human(bytes, (value, unit) => {
    const step = interval > 0 ? interval / 1024 ** unit : 0.01;
    const decimals = Math.min(3, Math.max(0, Math.ceil(-Math.log10(step) - 1e-9)));
    return String(Number(value.toFixed(decimals)));
  });
}

function human(bytes, digits) {
  if (bytes === null || bytes === undefined || !Number.isFinite(Number(bytes))) return "—";
  let value = Math.abs(bytes);
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  const sign = bytes < 0 ? "-" : "";
  return unit === 0 ? `${sign}${value} B` : `${sign}${digits(value, unit)} ${UNITS[unit]}`;
}

/** 13098536 -> "13,098,536 B (12.49 MiB)": exact and readable at once. */
export function formatBytesFull(bytes) {
  if (bytes === null || bytes === undefined) return "—";
  if (Math.abs(bytes) < 1024) return `${formatInt(bytes)} B`;
  return `${formatInt(bytes)} B (${formatHuman(bytes)})`;
}

/** Figures the data cannot give are null: they read "unknown", never 0. */
export const UNKNOWN = "unknown";

export function isKnown(value) {
  return value !== null && value !== undefined && Number.isFinite(Number(value));
}

/** formatBytesFull, or "unknown" for a figure the data cannot give. */
export function formatBytesKnown(bytes) {
  return isKnown(bytes) ? formatBytesFull(bytes) : UNKNOWN;
}

/** formatInt, or "unknown". */
export function formatIntKnown(n) {
  return isKnown(n) ? formatInt(n) : UNKNOWN;
}

/** 0.9712 -> "97%", 0.0041 -> "0.4%", 1e-7 -> "<0.1%" (a share that is not 0 never reads 0); null -> "". */
export function formatPercent(fraction) {
  if (!isKnown(fraction)) return "";
  const pct = 100 * fraction;
  if (pct > 0 && pct < 0.05) return "<0.1%";
  if (pct > 0 && pct < 1) return `${pct.toFixed(1)}%`;
  return `${Math.round(pct)}%`;
}

/** A share of op time with one decimal; one that is not all never reads 100%, one that is not none never 0%. */
export function formatShare(fraction) {
  if (!isKnown(fraction)) return "";
  const pct = 100 * fraction;
  if (pct > 0 && pct < 0.05) return "<0.1%";
  if (pct >= 100) return "100%";
  const text = pct.toFixed(1);
  return `${text === "100.0" ? "99.9" : text}%`;
}

/** A 202 answer's state -> "Reducing… 40% (parsing)". */
export function formatProgress(state) {
  const pct = Math.round(100 * Math.max(0, Math.min(1, Number(state?.progress) || 0)));
  const what = state?.message ? ` (${state.message})` : "";
  const elapsed = isKnown(state?.elapsed_s) && state.elapsed_s >= 2 ? ` · ${Math.round(state.elapsed_s)} s` : "";
  return `Reducing… ${pct}%${what}${elapsed}`;
}

/** Microseconds -> "850 µs", "12.3 ms", "1.42 s". */
export function formatMicros(us) {
  if (us === null || us === undefined || !Number.isFinite(Number(us))) return "—";
  if (Math.abs(us) < 1000) return `${Number(us.toFixed(us < 10 ? 2 : 0))} µs`;
  if (Math.abs(us) < 1e6) return `${(us / 1000).toFixed(2)} ms`;
  return `${(us / 1e6).toFixed(2)} s`;
}

export function formatSeconds(s) {
  if (s === null || s === undefined || !Number.isFinite(Number(s))) return "—";
  return s < 1 ? `${(s * 1000).toFixed(0)} ms` : `${s.toFixed(2)} s`;
}

/** [1, 28, 28, 32] -> "[1,28,28,32]"; scalars -> "[]". */
export function formatShape(shape) {
  if (!Array.isArray(shape)) return String(shape ?? "");
  return `[${shape.join(",")}]`;
}

/** Wall time in seconds since the epoch -> "2026-11-22 04:30:12" (UTC). */
export function formatWallTime(seconds) {
  if (!Number.isFinite(Number(seconds))) return "";
  return new Date(seconds * 1000).toISOString().replace("T", " ").slice(0, 19);
}

/**
 * Optimizer config values: compact JSON for objects; floats to 7 significant
 * digits, as configs read from graphs are float32 (0.0001 not 0.00009999999747).
 */
export function formatConfigValue(value) {
  if (value === null || value === undefined) return "None";
  if (typeof value === "object") return JSON.stringify(value);
  if (typeof value === "number" && !Number.isInteger(value)) return String(Number(value.toPrecision(7)));
  return String(value);
}

/** "tf.compat.v1.train.AdamOptimizer" -> "AdamOptimizer". */
export function shortClassName(name) {
  return String(name || "").split(".").pop();
}

/** Keep the end of long names (the distinctive part of a scope path) for axis labels. */
export function ellipsize(text, max = 28) {
  const s = String(text);
  return s.length > max ? `…${s.slice(s.length - max + 1)}` : s;
}

/** "/job:localhost/replica:0/task:0/device:CPU:0" -> "CPU:0" for narrow columns. */
export function shortDevice(device) {
  return String(device || "").replace(/^(\/job:[^/]+\/replica:\d+\/task:\d+)?\/device:/, "");
}

/** A variable's devices (comma-separated, one per replica) -> "CPU:0, CPU:1". */
export function shortDevices(devices) {
  return String(devices || "").split(",").map((d) => shortDevice(d.trim())).filter(Boolean).join(", ");
}

/**
 * Tick spacing for a byte axis that lands on round binary units (200 MiB, not
 * 286.10 MiB): a 1/2/5 x 10^n step in the largest unit below `max`.
 */
export function byteAxisInterval(max, ticks = 5) {
  if (!(max > 0)) return undefined;
  const unit = 1024 ** Math.min(Math.max(0, Math.floor(Math.log(max) / Math.log(1024))), UNITS.length - 1);
  const raw = max / unit / ticks;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].find((m) => m * power >= raw) * power;
  return Math.max(1, step * unit);
}
