// Many devices in words: the Storage view's per-device panel and a sharded variable's cells, the Ops view's
// device filter, the What-if sharding choices. Pure, no DOM.

import { formatHuman, formatInt, isKnown } from "./format.js";
import { filterTerm } from "./table-model.js";
import { ROLES, ROLE_LABEL } from "./roles.js";

const plural = (n, one, many = `${one}s`) => `${formatInt(n)} ${n === 1 ? one : many}`;

/** A breakdown's `devices` when it has rows, else null (every variable on one device). */
export function devicesOf(data) {
  const devices = data?.devices;
  return devices && Array.isArray(devices.rows) && devices.rows.length ? devices : null;
}

/** Some variable is split over devices (not only copied whole to each). */
export const isSharded = (devices) => Number(devices?.sharded_variables) > 0;

/** The table's rows: one per device, a role missing from `by_role` is 0. */
export function deviceRows(devices) {
  return (devices?.rows || []).map((r) => {
    const row = { device: String(r.device ?? ""), total_bytes: Number(r.total_bytes) || 0 };
    for (const role of ROLES) row[role] = Number(r.by_role?.[role]) || 0;
    return row;
  });
}

/** The busiest device's row (the answer names it; else the one holding most). */
export function busiestRow(devices) {
  const rows = deviceRows(devices);
  return rows.find((r) => r.device === devices?.busiest)
    || rows.reduce((best, r) => (!best || r.total_bytes > best.total_bytes ? r : best), null);
}

/** "weights 9.56 MiB, optimizer slots 19.11 MiB": a row's roles that hold bytes. */
export function rolesText(row) {
  return ROLES.filter((role) => row?.[role] > 0).map((role) => `${ROLE_LABEL[role].toLowerCase()} ${formatHuman(row[role])}`).join(", ");
}

/**
 * The panel's headline: "8 devices · busiest /device:CPU:0 holds 28.67 MiB (weights 9.56 MiB, optimizer slots
 * 19.11 MiB) · every variable once: 114.68 MiB". Devices holding alike say "each device holds".
 */
export function deviceHeadline(devices) {
  const rows = deviceRows(devices);
  if (!rows.length) return "";
  const top = busiestRow(devices);
  const alike = rows.every((r) => r.total_bytes === top.total_bytes);
  const roles = rolesText(top);
  const holds = `${alike && rows.length > 1 ? "each device holds" : `busiest ${top.device} holds`} ${formatHuman(top.total_bytes)}`
    + `${roles ? ` (${roles})` : ""}`;
  const once = isKnown(devices.logical_total) ? ` · every variable once: ${formatHuman(devices.logical_total)}` : "";
  return `${plural(rows.length, "device")} · ${holds}${once}`;
}

/** How the variables lie: "21 variables sharded, 5 variables replicated". */
export function layoutText(devices) {
  const sharded = Number(devices?.sharded_variables) || 0;
  const replicated = Number(devices?.replicated_variables) || 0;
  return [sharded ? `${plural(sharded, "variable")} sharded` : "", replicated ? `${plural(replicated, "variable")} replicated` : ""]
    .filter(Boolean).join(", ");
}

/** The bytes one device holds of a variable, `{bytes, even}` (even: every device holds as much), or null. */
export function perDevice(row) {
  const bytes = (Array.isArray(row?.device_bytes) ? row.device_bytes : []).map(Number).filter((b) => Number.isFinite(b));
  if (!bytes.length) return null;
  const most = Math.max(...bytes);
  return { bytes: most, even: bytes.every((b) => b === most) };
}

/**
 * A sharded variable's Device cell: "4 shards ×2 replicas · 4.00 MiB per device" ("up to" where the pieces
 * differ); "" for a variable that is not sharded (its cell says what it said before).
 */
export function shardText(row) {
  const shards = Number(row?.shards);
  if (!(shards > 1)) return "";
  const replicas = Number(row?.replicas);
  const each = perDevice(row);
  const per = each ? ` · ${each.even ? "" : "up to "}${formatHuman(each.bytes)} per device` : "";
  return `${formatInt(shards)} shards${replicas > 1 ? ` ×${formatInt(replicas)} replicas` : ""}${per}`;
}

/** The op table's filter term for one device ("device=/device:CPU:3"); "" for all devices. */
export function deviceFilterTerm(device) {
  const d = String(device ?? "").trim();
  return (d && filterTerm("device", "=", d)) || "";
}

/** The user's filter and a term the view adds, as one server filter. */
export function withTerm(query, term) {
  return [String(query ?? "").trim(), String(term ?? "").trim()].filter(Boolean).join(" ");
}

// What if: what is split over the devices besides the batch (the backend's rules/projection.py SHARDINGS).
export const SHARDINGS = ["replicated", "optimizer", "gradients", "weights"];

export const SHARDING_LABEL = {
  replicated: "replicated (data parallel)",
  optimizer: "optimizer state (ZeRO-1)",
  gradients: "+ gradients (ZeRO-2)",
  weights: "+ weights (ZeRO-3 / FSDP)",
};

const SHARDING_WORDS = {
  replicated: "each holding the whole state",
  optimizer: "optimizer state sharded",
  gradients: "optimizer state and gradients sharded",
  weights: "optimizer state, gradients and weights sharded",
};

/** "on each of 8 devices, optimizer state sharded"; "" on one device with nothing sharded. */
export function devicesWords(devices, shard) {
  const n = Number(devices) || 1;
  const words = SHARDING_WORDS[shard] || "";
  if (n <= 1) return shard && shard !== "replicated" && words ? `on one device, ${words}` : "";
  return `on each of ${formatInt(n)} devices${words ? `, ${words}` : ""}`;
}
