// "Timeline": bytes in use over the traced step(s), the peak marked, and the
// allocator events around it.

import { el } from "../dom.js";
import { formatHuman, formatInt, formatMicros } from "../format.js";
import { ROLE_COLOR } from "../roles.js";
import { aroundPeak, peakIndex } from "../aggregate.js";
import { bytesAxis, createChart } from "../charts.js";
import { createTable } from "../components/table.js";
import { chartBox, infoBox, panel } from "../components/widgets.js";
import { createItemView } from "./item-view.js";

const RADIUS = 12; // points listed either side of the peak

// "op" is filled when the trace names the op behind each allocator event.
const COLUMNS = [
  { key: "t_us", label: "Time from start", width: "130px", numeric: true, text: (r) => formatMicros(r.t_us) },
  { key: "bytes", label: "Bytes in use", width: "150px", numeric: true, text: (r) => formatInt(r.bytes) },
  { key: "delta", label: "Change", width: "150px", numeric: true, text: (r) => `${r.delta > 0 ? "+" : ""}${formatInt(r.delta)}` },
  { key: "op", label: "Op", width: "minmax(200px, 3fr)", minWidth: 200 },
];

export function createTimelineView(api) {
  const chartEl = chartBox(340);
  const chart = createChart(chartEl);
  const note = el("div");
  const table = createTable({ testid: "peak-table", columns: COLUMNS, sort: { key: "t_us", direction: "asc" },
    highlight: (r) => r.isPeak });
  const body = el("div", {}, panel("Bytes in use", "allocator, over the traced step(s)", note, chartEl),
    panel("Around the peak", `${RADIUS} allocator events either side; the peak is highlighted`, table.element));

  function render(data) {
    const timeline = data.timeline || [];
    const t0 = timeline.length ? timeline[0][0] : 0;
    const relative = timeline.map(([t, bytes, op]) => [t - t0, bytes, op]);
    const index = peakIndex(relative, data.peak_time_us ? data.peak_time_us - t0 : NaN);
    note.replaceChildren(timeline.length ? "" : infoBox("This trace recorded no memory timeline (no allocator events)."));
    chart.set(timelineOption(relative, index));
    const rows = aroundPeak(relative, index, RADIUS);
    table.setColumns(rows.some((r) => r.op) ? COLUMNS : COLUMNS.filter((c) => c.key !== "op"));
    table.setRows(rows);
    return [`${data.source} · step ${formatInt(data.step)} · peak `, el("b", { testid: "timeline-peak" }, `${formatInt(data.peak_bytes)} B`),
      ` (${formatHuman(data.peak_bytes)}) at ${formatMicros((data.peak_time_us || 0) - t0)}`];
  }

  return createItemView({ api, kind: "ops", fetch: api.ops, body, render });
}

function timelineOption(points, index) {
  const peak = points[index];
  return {
    grid: { left: 8, right: 24, top: 24, bottom: 8, containLabel: true },
    tooltip: {
      trigger: "axis",
      formatter: (params) => {
        const p = params[0];
        const op = points[p.dataIndex]?.[2];
        return el("div", { style: { fontSize: "12px" } }, el("div", {}, formatMicros(p.value[0])),
          el("b", {}, `${formatInt(p.value[1])} B (${formatHuman(p.value[1])})`), op ? el("div", {}, op) : null);
      },
    },
    xAxis: { type: "value", max: "dataMax", axisLabel: { formatter: formatMicros, hideOverlap: true },
      splitLine: { show: false } },
    yAxis: bytesAxis(points.reduce((m, p) => Math.max(m, p[1]), 0)),
    series: [{
      name: "bytes in use", type: "line", step: "end", symbol: "none", sampling: "lttb",
      lineStyle: { color: ROLE_COLOR.activations, width: 1.5 }, areaStyle: { color: "rgba(56,142,60,0.12)" },
      data: points.map(([t, b]) => [t, b]),
      markPoint: peak ? {
        symbol: "circle", symbolSize: 9, itemStyle: { color: "#f57c00" },
        label: { show: true, position: "right", formatter: () => `peak ${formatHuman(peak[1])}`, color: "#e65100", fontWeight: 500 },
        data: [{ coord: [peak[0], peak[1]] }],
      } : undefined,
      markLine: peak ? {
        symbol: "none", silent: true, label: { show: false }, lineStyle: { color: "#f57c00", type: "dashed" },
        data: [{ xAxis: peak[0] }],
      } : undefined,
    }],
  };
}
