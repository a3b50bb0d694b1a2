// "Load": what each save format costs to load in a fresh process.

import { el, message, name } from "../dom.js";
import { formatHuman, formatInt, formatSeconds } from "../format.js";
import { loadGrid, splitBaseline } from "../aggregate.js";
import { axisTooltip, bytesAxis, createChart } from "../charts.js";
import { createTable } from "../components/table.js";
import { chartBox, legendItem, panel } from "../components/widgets.js";
import { OTHER_COLORS } from "../roles.js";
import { createItemView } from "./item-view.js";

const MODE_COLORS = OTHER_COLORS; // modes are not roles: keep role colours unambiguous

const METRICS = [
  { key: "file_bytes", title: "File size", format: formatHuman },
  { key: "load_seconds", title: "Load time", format: formatSeconds },
  { key: "peak_rss_bytes", title: "Peak RSS", format: formatHuman },
];

// A failed format has no figures: sort it last rather than as zero.
const measured = (key) => (r) => (r.error ? null : r[key]);

const COLUMNS = [
  { key: "format", label: "Format", width: "minmax(100px, 1fr)" },
  { key: "mode", label: "Mode", width: "minmax(130px, 1.3fr)", minWidth: 130 },
  { key: "file_bytes", label: "File bytes", width: "130px", numeric: true, value: measured("file_bytes"), text: (r) => (r.error ? "" : formatInt(r.file_bytes)) },
  { key: "load_seconds", label: "Load time", width: "100px", numeric: true, value: measured("load_seconds"), text: (r) => (r.error ? "" : formatSeconds(r.load_seconds)) },
  { key: "peak_rss_bytes", label: "Peak RSS", width: "130px", numeric: true, value: measured("peak_rss_bytes"), text: (r) => (r.error ? "" : formatHuman(r.peak_rss_bytes)) },
  { key: "rss_above_baseline", label: "RSS above baseline", width: "140px", numeric: true,
    text: (r) => (r.rss_above_baseline === null ? "" : formatHuman(r.rss_above_baseline)) },
  { key: "repeats", label: "Repeats", width: "70px", numeric: true },
  { key: "error", label: "Problem", width: "minmax(200px, 3fr)", minWidth: 200, render: (r) => el("span", { class: "err-text" }, message(r.error || "")) },
];

export function createLoadView({ api, loader, shared }) {
  const charts = METRICS.map((m) => {
    const box = chartBox(260);
    return { ...m, box, chart: createChart(box) };
  });
  const table = createTable({ testid: "load-table", columns: COLUMNS, sort: { key: "load_seconds", direction: "asc" } });
  const legend = el("div", { class: "legend" });
  const body = el("div", {}, legend,
    el("div", { class: "grid2", style: { gridTemplateColumns: "repeat(auto-fit, minmax(320px, 1fr))", marginBottom: "12px" } },
      charts.map((c) => panel(c.title, "median over repeats", c.box))),
    panel("Formats", "each loaded in a fresh process", table.element));

  function render(data) {
    const { baseline, results } = splitBaseline(data.results || []);
    for (const c of charts) {
      const floor = c.key === "peak_rss_bytes" ? baseline?.peak_rss_bytes : null;
      c.chart.set(groupedOption(loadGrid(results, c.key), c.format, floor));
    }
    legend.replaceChildren(...loadGrid(results, "file_bytes").series.map((s, i) => legendItem(s.mode, MODE_COLORS[i % MODE_COLORS.length])));
    table.setRows(results);
    return [data.model_name ? el("b", {}, name(data.model_name)) : "", ` · step ${formatInt(data.step)} · ${results.length} loads`,
      baseline ? ` · baseline (${baseline.mode}): ${formatHuman(baseline.peak_rss_bytes)} peak RSS` : ""];
  }

  return createItemView({ api, loader, kind: "loadbench", route: "loadbench", fetch: api.loadbench, body, render,
    shared: shared.loadbench });
}

/** Grouped bars; `floor` (the baseline RSS) is drawn as a dashed line. */
function groupedOption(grid, format, floor) {
  return {
    grid: { left: 8, right: 16, top: 16, bottom: 8, containLabel: true },
    tooltip: { trigger: "axis", axisPointer: { type: "shadow" }, formatter: axisTooltip(format) },
    xAxis: { type: "category", data: grid.formats, axisTick: { show: false }, axisLabel: { interval: 0, hideOverlap: true } },
    yAxis: format === formatHuman ? bytesAxis(Math.max(floor || 0, ...grid.series.flatMap((s) => s.values)))
      : { type: "value", axisLabel: { formatter: format }, splitLine: { lineStyle: { color: "#eee" } } },
    series: grid.series.map((s, i) => ({
      name: s.mode, type: "bar", barMaxWidth: 22, itemStyle: { color: MODE_COLORS[i % MODE_COLORS.length] }, data: s.values,
      markLine: i === 0 && floor ? {
        symbol: "none", silent: true, lineStyle: { color: "#757575", type: "dashed" },
        label: { formatter: () => `baseline ${format(floor)}`, position: "insideEndTop", color: "#616161", fontSize: 10 },
        data: [{ yAxis: floor }],
      } : undefined,
    })),
  };
}
