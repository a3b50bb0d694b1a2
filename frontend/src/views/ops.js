// "Ops": per-op memory and compute time of a traced step, per-layer roll-up,
// and what the allocator's peak holds by role.

import { el } from "../dom.js";
import { ellipsize, formatHuman, formatInt, formatMicros, shortDevice } from "../format.js";
import { OTHER_COLORS, PEAK_ROLES, ROLE_COLOR } from "../roles.js";
import { topN } from "../aggregate.js";
import { axisTooltip, bytesAxis, createChart } from "../charts.js";
import { createTable } from "../components/table.js";
import { bytesCard, chartBox, panel } from "../components/widgets.js";
import { createItemView } from "./item-view.js";

const TOP_N = 12;

/** A measured/derived badge, then "[1,28,28,32] float32 = 100,352 B" (badge first: never cut off). */
function outputCell(op) {
  if (!op.output_bytes && !op.output_shape) return "";
  const shape = [op.output_shape, op.output_dtype].filter(Boolean).join(" ");
  return el("span", {}, el("span", { class: `badge ${op.bytes_source}` }, op.bytes_source),
    `${shape ? `${shape} = ` : ""}${formatInt(op.output_bytes)} B`);
}

const OP_COLUMNS = [
  { key: "name", label: "Op", width: "minmax(240px, 3fr)", minWidth: 240 },
  { key: "op_type", label: "Type", width: "minmax(140px, 1fr)", minWidth: 140 },
  { key: "fused", label: "Fused ops", width: "minmax(140px, 1fr)", minWidth: 140, value: (o) => (o.fused || []).join(", ") },
  { key: "layer", label: "Layer", width: "minmax(110px, 1fr)", minWidth: 110 },
  { key: "device", label: "Device", width: "80px", minWidth: 80, render: (o) => shortDevice(o.device) },
  { key: "calls", label: "Calls", width: "64px", minWidth: 64, numeric: true, text: (o) => formatInt(o.calls) },
  { key: "time_us", label: "Total time", width: "96px", numeric: true, text: (o) => formatMicros(o.time_us) },
  { key: "mean_us", label: "Mean time", width: "96px", numeric: true, text: (o) => formatMicros(o.mean_us) },
  { key: "output_bytes", label: "Output", width: "minmax(270px, 2fr)", minWidth: 270, numeric: true, left: true,
    text: (o) => `${o.output_shape || ""} ${o.output_dtype || ""} = ${formatInt(o.output_bytes)} B ${o.bytes_source}`.trim(),
    value: (o) => o.output_bytes, render: outputCell },
  { key: "alloc_bytes", label: "Alloc bytes", width: "110px", numeric: true, text: (o) => formatInt(o.alloc_bytes) },
];

const LAYER_COLUMNS = [
  { key: "layer", label: "Layer", width: "minmax(160px, 2fr)", minWidth: 160 },
  { key: "weight_bytes", label: "Weights", width: "120px", numeric: true, text: (l) => formatInt(l.weight_bytes) },
  { key: "slot_bytes", label: "Optimizer slots", width: "120px", numeric: true, text: (l) => formatInt(l.slot_bytes) },
  { key: "output_bytes", label: "Activations", width: "120px", numeric: true, text: (l) => formatInt(l.output_bytes) },
  { key: "alloc_bytes", label: "Alloc bytes", width: "120px", numeric: true, text: (l) => formatInt(l.alloc_bytes) },
  { key: "time_us", label: "Time", width: "100px", numeric: true, text: (l) => formatMicros(l.time_us) },
  { key: "ops", label: "Op calls", width: "80px", numeric: true, text: (l) => formatInt(l.ops) },
];

export function createOpsView(api) {
  const peakCards = el("div", { class: "cards", testid: "peak-by-role" });
  const timeEl = chartBox(300);
  const memEl = chartBox(300);
  const timeChart = createChart(timeEl);
  const memChart = createChart(memEl);
  // A layer's ops sit under scopes that end with its name (forward, gradients/..., optimizer updates).
  const layers = createTable({ testid: "op-layer-table", columns: LAYER_COLUMNS, sort: { key: "time_us", direction: "desc" },
    onRowClick: (row) => row.layer !== "(no layer)" && ops.setFilter(row.layer.split("/").pop()) });
  const ops = createTable({ testid: "op-table", columns: OP_COLUMNS, sort: { key: "time_us", direction: "desc" }, maxHeight: 520,
    placeholder: "Filter ops, e.g. conv type:fused" });
  const body = el("div", {}, peakCards,
    el("div", { class: "grid2", style: { marginBottom: "12px" } },
      panel(`Top ${TOP_N} ops by time`, "total over all calls", timeEl),
      panel(`Top ${TOP_N} ops by memory`, "bytes newly allocated for outputs (views of variables left out)", memEl)),
    panel("Layers", "activations and time joined with the layer's weights and slots; click a layer to list its ops", layers.element),
    panel("Ops", "one row per op or fused kernel", ops.element));

  function render(data) {
    peakCards.replaceChildren(...peakCardList(data));
    const rows = data.ops || [];
    timeChart.set(topChartOption(topN(rows, "time_us", TOP_N), "time_us", formatMicros, OTHER_COLORS[0]));
    memChart.set(topChartOption(topN(rows, "new_bytes", TOP_N), "new_bytes", formatHuman, ROLE_COLOR.activations));
    layers.setRows(data.layers || []);
    ops.setRows(rows);
    return [
      `${data.source} · step ${formatInt(data.step)} · ${formatInt(data.steps)} traced step${data.steps === 1 ? "" : "s"} · `,
      `${formatInt(rows.length)} ops · ${(data.devices || []).map(shortDevice).join(", ") || "no device recorded"}`,
    ];
  }

  return createItemView({ api, kind: "ops", fetch: api.ops, body, render });
}

/**
 * What is live at the peak, by role. The parts sum to peak_by_role.total, which
 * exceeds the allocator's own peak when the trace (RunMetadata) counted only the
 * step's allocations and the run's weights and slots were added from its breakdown.
 */
function peakCardList(data) {
  const peak = data.peak_by_role || {};
  const total = peak.total ?? data.peak_bytes ?? 0;
  const share = (bytes) => (total ? `${((100 * bytes) / total).toFixed(1)}% of peak` : "");
  const note = total === data.peak_bytes
    ? "allocator's high-water mark"
    : `step's own allocations peak at ${formatHuman(data.peak_bytes)}; weights and slots added`;
  return [
    ...PEAK_ROLES.map((role) => bytesCard(`peak-${role}`, role, peak[role] || 0, share(peak[role] || 0))),
    bytesCard("peak-all", "total", total, note, "Peak in use"),
  ];
}

function topChartOption(rows, key, format, color) {
  return {
    grid: { left: 8, right: 56, top: 4, bottom: 4, containLabel: true },
    tooltip: { trigger: "axis", axisPointer: { type: "shadow" }, formatter: axisTooltip(format) },
    xAxis: format === formatHuman ? bytesAxis(rows[0]?.[key] || 0)
      : { type: "value", axisLabel: { formatter: format, hideOverlap: true }, splitLine: { lineStyle: { color: "#eee" } } },
    yAxis: { type: "category", inverse: true, data: rows.map((o) => o.name), axisLabel: { formatter: (n) => ellipsize(n, 26) },
      axisTick: { show: false } },
    series: [{ name: key === "time_us" ? "time" : "output bytes", type: "bar", barMaxWidth: 16, itemStyle: { color },
      label: { show: true, position: "right", formatter: (p) => format(p.value), fontSize: 10, color: "#616161" },
      data: rows.map((o) => o[key]) }],
  };
}
