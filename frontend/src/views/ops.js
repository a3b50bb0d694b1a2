// "Ops": a traced step's peak by category, its ops joined to the model's layer
// tree (weights, slots, activations and gradients at the peak, time), the top
// ops, and every op in a table the server pages, sorts and filters.

import { el, message, name } from "../dom.js";
import { isolate } from "../bidi.js";
import { formatHuman, formatInt, formatIntKnown, formatMicros, isKnown, shortDevices, UNKNOWN } from "../format.js";
import {
  allocationWhy, floorBytes, graphNote, joinSummary, opTimeWords, outputWhy, timeTitle, topDeviceWords,
} from "../layer-figures.js";
import { fusedText, isUnattributed, opLabel, readableOp, shortLayerNames, UNATTRIBUTED_TYPE } from "../opnames.js";
import { noLayersNote, noModuleRangesNote, recordsOutputShapes, stepKind } from "../framework.js";
import { OTHER_COLORS, PHASE_HINT } from "../roles.js";
import { bytesAxis, createChart, tooltipBox, tooltipLine } from "../charts.js";
import { createTable } from "../components/table.js";
import { filterTerm } from "../table-model.js";
import { chartBox, panel, sourceBadge } from "../components/widgets.js";
import { createItemView } from "../components/item-view.js";
import { runsOfKind, tagLabel } from "../selection.js";
import { createHostsPanel } from "../components/hosts.js";
import { createPeakPanel } from "../components/peak.js";
import { classCell, classText, treeButtons } from "../components/layer-cells.js";
import { banners } from "../components/banners.js";
import { createDevicePicker } from "../components/device-picker.js";

const TOP_N = 12;

/**
 * A measured/derived badge, then "[1,28,28,32] float32 = 100,352 B": the badge and the figure never
 * cut; a shape too long for the cell is cut in the middle, its whole text in the tooltip. `why`: why
 * an output's bytes can be unknown in this answer.
 */
function outputCell(op, why) {
  const shape = [op.output_shape, op.output_dtype].filter(Boolean).join(" ");
  if (op.bytes_source === "unknown") {
    return el("span", { class: "out-cell", title: `${shape ? `${shape} = ` : ""}unknown: ${why}` }, sourceBadge("unknown"),
      shape ? el("span", { class: "out-shape" }, name(shape)) : null, shape ? el("span", { class: "out-bytes" }, " = ", el("i", {}, UNKNOWN))
        : el("i", { class: "out-bytes" }, UNKNOWN));
  }
  if (op.moved_bytes && !op.output_bytes) return movedCell(op);
  if (!op.output_bytes && !op.output_shape) return "";
  return el("span", { class: "out-cell" }, sourceBadge(op.bytes_source), shape ? el("span", { class: "out-shape" }, name(shape)) : null,
    el("span", { class: "out-bytes" }, `${shape ? " = " : ""}${formatInt(op.output_bytes)} B`));
}

/** A collective's message: "moves 66,560 B a call" (an all-gather's gathered tensor, a reduce-scatter's input). */
function movedCell(op) {
  const each = op.moved_bytes / Math.max(op.calls, 1);
  return el("span", { class: "out-cell", title: `${movedText(op)}: the largest tensor each call names (what an all-gather `
    + "gathers, what a reduce-scatter reduces)" }, el("span", { class: "out-bytes" }, `moves ${formatInt(Math.round(each))} B a call`));
}

const movedText = (op) => `moves ${formatInt(op.moved_bytes)} B over ${formatInt(op.calls)} calls`;

function outputText(op) {
  if (op.moved_bytes && !op.output_bytes) return movedText(op);
  const figure = op.bytes_source === "unknown" ? UNKNOWN : `${formatInt(op.output_bytes)} B`;
  return `${op.output_shape || ""} ${op.output_dtype || ""} = ${figure} ${op.bytes_source}`.trim();
}

/** A figure, or "unknown" with why in its tooltip: never 0. */
const knownOrWhy = (value, text, why) => (isKnown(value) ? text : el("i", { class: "why", title: `unknown: ${why}` }, UNKNOWN));

const UNATTRIBUTED_WHY = "kernel time of the XLA program that no rule tied to one of its instructions; "
  + "the row is named after what the kernels carried (a command buffer)";

/** The op's type; kernel time no rule tied to an instruction reads as such, not as an op type. */
function typeCell(op) {
  if (!isUnattributed(op)) return op.op_type;
  return el("span", { class: "badge unattributed", title: UNATTRIBUTED_WHY }, "not attributed");
}

/**
 * An op's layer; for one on no layer, where in the training script it was traced (an XLA program keeps
 * its Python frames: a flax nnx step compiled without scope names reads "model.py:13 CNN.__call__").
 */
function layerCell(op) {
  if (op.layer || !op.source) return name(op.layer);
  const [where, ...inFunction] = op.source.split(" ");
  return el("i", { class: "why", title: `no module scope names this op; the training script traced it at ${where}`
    + (inFunction.length ? `, in ${inFunction.join(" ")}` : "") }, where);
}

/** The ops a fused kernel or an XLA instruction implements, readably; one per line in the tooltip. */
function fusedCell(op) {
  const fused = op.fused || [];
  if (!fused.length) return "";
  return el("span", { title: isolate(fused.map(readableOp).join("\n")) }, fusedText(fused, op.layer));
}

/**
 * The op table's columns; `why`: {output, alloc}, why an op's output and allocated bytes can be unknown in
 * this answer. Widths fit a 1400 px window: no column is cut off and an Output cell shows its shape and bytes whole.
 */
const opColumnList = (why) => [
  { key: "name", label: "Op", width: "minmax(190px, 3fr)", minWidth: 190, cutStart: true, render: (o) => name(o.name) },
  { key: "op_type", label: "Type", width: "minmax(110px, 1fr)", minWidth: 110, render: typeCell,
    text: (o) => (isUnattributed(o) ? `${UNATTRIBUTED_TYPE}: ${UNATTRIBUTED_WHY}` : o.op_type) },
  { key: "fused", label: "Fused ops", width: "minmax(100px, 1.2fr)", minWidth: 100, value: (o) => fusedText(o.fused, o.layer),
    render: fusedCell, title: "the framework ops a fused kernel or an XLA instruction implements" },
  { key: "layer", label: "Layer", width: "minmax(100px, 1fr)", minWidth: 100, cutStart: true, render: layerCell,
    text: (o) => [o.layer, o.source && `traced at ${o.source}`].filter(Boolean).join("\n") },
  { key: "phase", label: "Phase", width: "76px", minWidth: 76, text: (o) => (PHASE_HINT[o.phase] ? `${o.phase}: ${PHASE_HINT[o.phase]}` : o.phase),
    render: (o) => o.phase ?? "" },
  { key: "device", label: "Device", width: "72px", minWidth: 72, text: (o) => o.device, render: (o) => shortDevices(o.device) },
  { key: "calls", label: "Calls", width: "60px", minWidth: 60, numeric: true, text: (o) => formatInt(o.calls) },
  { key: "time_us", label: "Total time", width: "90px", minWidth: 90, numeric: true, text: (o) => formatMicros(o.time_us) },
  { key: "mean_us", label: "Mean time", width: "90px", minWidth: 90, numeric: true, text: (o) => formatMicros(o.mean_us) },
  { key: "output_bytes", label: "Output", filterKey: "output_shape", width: "minmax(300px, 2fr)", minWidth: 300, numeric: true, left: true,
    text: outputText, value: (o) => (o.bytes_source === "unknown" ? null : o.output_bytes), render: (o) => outputCell(o, why.output) },
  { key: "new_bytes", label: "New bytes", width: "96px", minWidth: 96, numeric: true,
    title: "bytes the op newly allocated for its output (views of variables add none)",
    text: (o) => formatIntKnown(o.new_bytes), render: (o) => knownOrWhy(o.new_bytes, formatInt(o.new_bytes), why.output) },
  { key: "alloc_bytes", label: "Alloc bytes", width: "96px", minWidth: 96, numeric: true, title: "bytes the allocator handed out for this op",
    text: (o) => formatIntKnown(o.alloc_bytes), render: (o) => knownOrWhy(o.alloc_bytes, formatInt(o.alloc_bytes), why.alloc) },
];
const TIME_KEYS = new Set(["time_us", "mean_us"]);

/** A byte sum over a row's ops: a floor where some are unknown ("≥ 1,234 (3 unknown)"), "unknown" where all are. */
function floorColumn(key, count, what, why, column) {
  const figure = (l) => floorBytes(l[key], l[count], what, why);
  return { ...column, key, numeric: true, value: (l) => figure(l).value, text: (l) => figure(l).title,
    render: (l) => {
      const f = figure(l);
      return isKnown(f.value) ? f.text : el("i", { class: "why", title: f.title }, f.text);
    } };
}

/** A figure at the peak: "unknown" (and why) when the trace recorded no allocation. */
const peakColumn = (key, label, width, title, why) => ({ key, label, width, numeric: true, title, text: (l) => formatIntKnown(l[key]),
  render: (l) => knownOrWhy(l[key], formatInt(l[key]), why) });

/**
 * The layer table's columns for one answer: why its unknown figures are unknown and where the time of
 * phases on no layer went (`data`) go into their tooltips.
 */
const layerColumnList = (data) => [
  { key: "layer", label: "Layer", width: "minmax(200px, 2fr)", minWidth: 200, text: (l) => l.layer || l.label,
    render: (l) => (l.layer ? name(l.label) : el("i", { title: "ops that belong to no layer of the model" }, l.label)) },
  { key: "class_name", label: "Class", width: "minmax(100px, 1fr)", minWidth: 100, text: (l) => classText(l, false),
    render: (l) => classCell(l, false) },
  { key: "weight_bytes", label: "Param bytes", width: "110px", numeric: true, text: (l) => formatInt(l.weight_bytes),
    title: "bytes of the layer's parameters (trainable and non-trainable weights, from the breakdown): "
      + "no RNG seed state, no activations" },
  { key: "slot_bytes", label: "Optimizer slots", width: "120px", numeric: true, text: (l) => formatInt(l.slot_bytes) },
  peakColumn("peak_activations_bytes", "Activations at peak", "140px", "the layer's forward outputs in use at the peak",
    allocationWhy(data)),
  peakColumn("peak_gradients_bytes", "Gradients at peak", "130px", "the layer's gradients in use at the peak", allocationWhy(data)),
  floorColumn("output_bytes", "unknown_output_ops", "output bytes", outputWhy(data), { label: "Outputs", width: "200px",
    title: "bytes newly allocated by the layer's ops over the trace; \"≥\" where some ops' figures are unknown" }),
  { key: "time_us", label: "Time", width: "96px", numeric: true, text: (l) => timeTitle(l, data.join),
    render: (l) => formatMicros(l.time_us) },
  { key: "ops", label: "Op calls", width: "80px", numeric: true, text: (l) => formatInt(l.ops) },
];
// Column sets by the data shape they are for: the same array for the same shape, so a refresh keeps the
// sort. Their keys hold an answer's reasons and times, so each cache is bounded.
const LAYER_SETS = new Map();
const MAX_SETS = 16;

function columnSet(cache, key, make) {
  if (!cache.has(key)) {
    if (cache.size >= MAX_SETS) cache.clear();
    cache.set(key, make());
  }
  return cache.get(key);
}

/** The layer table's columns: no time without op times; no class column when the breakdown names no classes (a TF1 checkpoint). */
function layerColumns(data) {
  const classes = (data.layers || []).some((l) => l.class_name || (l.layer && !l.leaf));
  const key = JSON.stringify([Boolean(data.timed), classes, outputWhy(data), allocationWhy(data), data.join?.unplaced_time_us ?? null]);
  return columnSet(LAYER_SETS, key,
    () => layerColumnList(data).filter((c) => (data.timed || c.key !== "time_us") && (classes || c.key !== "class_name")));
}

/** The op filter a layer-table row lists: the model's own row every op, a layer's its ops and its sublayers'
 *  (layer^=path), a group row the ops of no layer in that phase. */
function opsOfRow(row) {
  if (row.whole_model) return "";
  if (row.layer) return filterTerm("layer", "^=", row.layer) || row.layer;
  return `layer= ${filterTerm("phase", "=", row.group) || ""}`.trim();
}

export function createOpsView({ api, loader, shared }) {
  const notes = el("div", { class: "notes" });
  const peakPanel = createPeakPanel();
  const hosts = createHostsPanel({ api, onPick: (host) => view.pick({ host }) });
  const tops = createTopCharts((op) => op && ops.setFilter(filterTerm("name", "=", op) || op));
  const join = el("span", { class: "pill", testid: "join-fraction" });
  const layers = createTable({ testid: "op-layer-table", mode: "tree", columns: layerColumnList({}), label: "Layers",
    placeholder: "Filter layers", pinLast: (row) => !row.layer, toolbar: treeButtons(() => layers), rowAction: "lists the layer's ops",
    onRowClick: (row) => ops.setFilter(opsOfRow(row)) });
  const ops = createTable({ testid: "op-table", mode: "remote", columns: opColumns({}), label: "Ops", maxHeight: 520,
    sort: { key: "time_us", direction: "desc" }, placeholder: "Filter ops, e.g. conv type:fused layer^=model/dense",
    rowClass: (row) => (isUnattributed(row) ? "unattributed" : "") });
  const layersPanel = panel("Layers", "the model's layer tree; click a layer to list its ops", join, layers.element);
  const { opsPanel, devicePicker } = opsParts(ops);
  const charts = el("div", { class: "grid2", style: { marginBottom: "12px" } }, tops.timePanel, tops.memPanel);
  const figures = [peakPanel.element, charts, layersPanel, opsPanel];
  const body = el("div", {}, notes, peakPanel.element, hosts.element, charts, layersPanel, opsPanel);
  let treeOf = "";
  let shownKey = ""; // the answer whose pages the table shows: pages of another stop being asked for

  function render(data, item) {
    // a profile with no graph: why most output bytes read "unknown" and ops reach layers by name only
    const noGraph = graphNote(data);
    notes.replaceChildren(...banners(data),
      noGraph ? el("div", { class: "msg info", testid: "graph-note" }, "No graph for this profile: ", message(noGraph), ".") : "");
    hosts.show(item, data);
    // A trace that holds no op (the profiler could not start): its note says why, and where a profile of the
    // run is, if another profiler wrote one; no empty figures under it.
    const empty = data.op_count === 0 && !(data.peak_bytes > 0);
    for (const part of figures) part.hidden = empty;
    if (empty) {
      const profiles = (runsOfKind(listing, "ops").find((r) => r.run === item.run)?.tags || []).filter((t) => t.origin === "profile");
      if (profiles.length) {
        notes.append(el("div", { class: "msg info", testid: "other-profiles" }, "Profiles of this run the tab reads: ",
          profiles.flatMap((t, i) => [i ? ", " : "", el("button", { class: "link-button", type: "button", onclick: () => view.pick({ tag: t.tag }) },
            name(tagLabel(t)))])));
      }
      return metaLine(data);
    }
    peakPanel.render(data);
    tops.show(data);
    const joined = joinText(data);
    join.replaceChildren(...joined.parts);
    join.title = joined.title;
    const tree = `${item.run}\u0000${item.tag}\u0000${data.breakdown?.tag ?? ""}`;
    layers.setColumns(layerColumns(data), { key: "" });
    layers.setRows(data.layers || [], tree !== treeOf);
    treeOf = tree;
    // Pages of this very answer: its step, host and joined breakdown, even when "latest" moves on.
    const pinned = { ...item, step: data.step ?? "", host: data.host ?? item.host, breakdown: data.breakdown?.tag ?? item.breakdown };
    const key = JSON.stringify([pinned.run, pinned.tag, pinned.step, pinned.host, pinned.breakdown, data.wall_time]);
    shownKey = key;
    ops.setItem(key, (page) => loader.get(`op_rows\u0000${key}\u0000${JSON.stringify(page)}`, () => api.opRows(pinned, page),
      { keep: () => shownKey === key }), data.ops);
    ops.setColumns(opColumns(data), { key: "new_bytes" });
    devicePicker.show(data.devices);
    return metaLine(data);
  }

  const view = createItemView({ api, loader, kind: "ops", route: "ops", fetch: api.ops, body, render, shared: shared.ops, joins: true });
  let listing = null;
  return { ...view, update(next) {
    listing = next;
    return view.update(next);
  } };
}

/** The op table's panel, with the device picker over it (its device a filter term beside what the user typed). */
/** The two top-ops charts (by time, by new bytes); a bar click finds its op (``showOp``). */
function createTopCharts(showOp) {
  const timeEl = chartBox(300);
  const memEl = chartBox(300);
  const timeChart = createChart(timeEl, showOp);
  const memChart = createChart(memEl, showOp);
  const timeEmpty = el("div", { class: "hint chart-empty" }, "No op time recorded in this trace.");
  const memEmpty = el("div", { class: "hint chart-empty" }, "No op allocated new bytes for its output in this trace (or none is known).");
  const durations = el("div", { class: "hint", testid: "ops-durations" });
  const timePanel = panel(`Top ${TOP_N} ops by time`, "total over all calls; bars name the layer, then the op under it; click a bar to find the op",
    durations, timeEmpty, timeEl);
  const memDevice = el("div", { class: "hint", testid: "ops-top-device" });
  const memPanel = panel(`Top ${TOP_N} ops by memory`, "bytes newly allocated for outputs (views of variables left out)",
    memDevice, memEmpty, memEl);
  function show(data) {
    timePanel.hidden = !data.timed;
    const onDevice = topDeviceWords(data);
    durations.textContent = [opTimeWords(data), onDevice].filter(Boolean).join(" · ");
    memDevice.textContent = onDevice;
    memDevice.hidden = !onDevice;
    if (data.timed) showTop(timeChart, timeEl, timeEmpty, data.top_time, "time_us", formatMicros, OTHER_COLORS[0], data.op_count);
    showTop(memChart, memEl, memEmpty, data.top_bytes, "new_bytes", formatHuman, OTHER_COLORS[1], data.op_count);
  }
  return { timePanel, memPanel, show };
}

function opsParts(ops) {
  const devicePicker = createDevicePicker((term) => ops.setScope(term));
  const opsPanel = panel("Ops", "one row per op or fused kernel (per device where several ran it); sorted and filtered by the server",
    devicePicker.element, ops.element);
  return { opsPanel, devicePicker };
}

// An XLA step's rows are instructions with short names ("gemm_fusion_dot.96") implementing long framework ops:
// the width goes to what they implement and to their layers.
const XLA_WIDTHS = { name: ["minmax(140px, 1fr)", 140], fused: ["minmax(150px, 2.6fr)", 150], layer: ["minmax(120px, 1.6fr)", 120] };
const xlaWidth = (c) => (XLA_WIDTHS[c.key] ? { ...c, width: XLA_WIDTHS[c.key][0], minWidth: XLA_WIDTHS[c.key][1] } : c);
// A trace that records no output shapes (PyTorch's): nothing is fused, an Output cell is a badge and a figure,
// and the width goes to the op, its layer and bytes in the GiB (13 characters).
const NO_SHAPE_WIDTHS = { output_bytes: ["minmax(190px, 1fr)", 190], new_bytes: ["118px", 118], alloc_bytes: ["118px", 118] };
const noShapeWidth = (c) => (NO_SHAPE_WIDTHS[c.key] ? { ...c, width: NO_SHAPE_WIDTHS[c.key][0], minWidth: NO_SHAPE_WIDTHS[c.key][1] } : c);
const COLUMN_SETS = new Map();

/**
 * The op table's columns: no time without op times; no Device column when every op ran on one (the meta line names it);
 * why an unknown output or allocation is unknown, in this answer.
 */
function opColumns(data) {
  const why = { output: outputWhy(data), alloc: allocationWhy(data) };
  const shapes = recordsOutputShapes(data);
  const layers = data.join?.vocabulary !== "none";
  const tracedAt = Boolean(data.join?.traced_at_ops);
  const key = JSON.stringify([Boolean(data.xla), Boolean(data.timed), (data.devices || []).length <= 1, shapes, layers, tracedAt,
    why.output, why.alloc]);
  return columnSet(COLUMN_SETS, key, () => {
    const columns = opColumnList(why).map((c) => (c.key === "layer" && !layers ? { ...c, label: "Traced at" } : c));
    return (data.xla ? columns.map(xlaWidth) : shapes ? columns : columns.map(noShapeWidth))
      .filter((c) => (data.timed || !TIME_KEYS.has(c.key)) && ((data.devices || []).length > 1 || c.key !== "device")
        && (shapes || c.key !== "fused") && (layers || tracedAt || c.key !== "layer"));
  });
}

function metaLine(data) {
  return [
    `${data.source} · step ${formatIntKnown(data.step)} · ${formatInt(data.steps)} traced step${data.steps === 1 ? "" : "s"} · `,
    `${formatInt(data.op_count)} ops`, data.timed ? el("span", { title: opTimeWords(data) }, ` · ${formatMicros(data.total_time_us)} op time`) : "",
    ` · ${(data.devices || []).map(shortDevices).join(", ") || "no device recorded"}`,
    stepKind(data) ? ` · ${stepKind(data)}` : "",
  ];
}


/**
 * {parts, title}: "99.9% of op time on the model's layers (…), 99.7% on leaf layers; on no layer: loss 37 µs",
 * or why there is no such figure; the whole line in the tooltip (the pill cuts it).
 */
function joinText(data) {
  const j = data.join || {};
  const plain = (text) => ({ parts: [text], title: text });
  if (j.vocabulary === "none") return plain(noLayersNote(data));
  if (noModuleRangesNote(data)) return plain(noModuleRangesNote(data));
  const source = j.vocabulary === "trace" ? " (layers from the trace's own scopes: no breakdown in this run)" : "";
  const summary = joinSummary(data, source);
  if (!data.timed || !summary.fraction) return plain("ops joined to layers by what they read and write");
  return { parts: [el("b", {}, summary.fraction), summary.text.slice(summary.fraction.length)], title: summary.text };
}

/** A top-N bar chart (with its bars in words for a screen reader), or a line saying there is nothing to chart. */
function showTop(chart, box, empty, rows, key, format, color, opCount) {
  const data = (rows || []).filter((r) => isKnown(r[key]) && r[key] > 0);
  box.hidden = !data.length;
  empty.hidden = Boolean(data.length);
  if (!data.length) return;
  const what = key === "time_us" ? "time" : "new bytes";
  const shown = shortLayerNames(data.map((o) => o.layer));
  const words = (o) => `${opLabel(o.name, o.layer, 50, shown.get(o.layer))}: ${format(o[key])}${o.layer ? "" : ", on no layer"}`;
  chart.set(topChartOption(data, key, format, color), {
    label: `Top ${data.length} ops by ${key === "time_us" ? "time" : "memory"}${isKnown(opCount) ? ` of ${formatInt(opCount)}` : ""}`,
    summary: `${what} per op, largest first: ${data.map(words).join("; ")}.`,
    items: data.map((o, i) => ({ name: o.name, text: `${i + 1} of ${data.length}: ${words(o)} (op ${o.name})` })),
    action: "find the op in the table",
  });
}

function topChartOption(data, key, format, color) {
  const shown = shortLayerNames(data.map((o) => o.layer));
  const labels = new Map(data.map((o) => [o.name, opLabel(o.name, o.layer, 50, shown.get(o.layer))]));
  return {
    grid: { left: 8, right: 64, top: 4, bottom: 4, containLabel: true },
    tooltip: {
      trigger: "axis", axisPointer: { type: "shadow" },
      formatter: (params) => {
        const row = data[params[0]?.dataIndex];
        return row ? tooltipBox(row.name, [tooltipLine(color, key === "time_us" ? "time" : "new bytes", format(row[key]))],
          row.layer ? ["layer ", name(row.layer)] : "no layer") : "";
      },
    },
    xAxis: format === formatHuman ? bytesAxis(data[0]?.[key] || 0)
      : { type: "value", axisLabel: { formatter: format, hideOverlap: true }, splitLine: { lineStyle: { color: "#eee" } } },
    // the op's layer, then its path under the layer: cut from the left, a scope path loses its layer first
    yAxis: { type: "category", inverse: true, data: data.map((o) => o.name), axisLabel: { formatter: (n) => isolate(labels.get(n) ?? n) },
      axisTick: { show: false } },
    series: [{ name: key === "time_us" ? "time" : "new bytes", type: "bar", barMaxWidth: 16, itemStyle: { color },
      label: { show: true, position: "right", formatter: (p) => format(p.value), fontSize: 10, color: "#616161" },
      data: data.map((o) => o[key]) }],
  };
}
