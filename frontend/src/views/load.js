// "Load": what each save format costs to load in a fresh process.

import { el, message, name } from "../dom.js";
import { isolate } from "../bidi.js";
import { formatHuman, formatInt, formatSeconds } from "../format.js";
import { loadBars, splitBaseline } from "../aggregate.js";
import { axisTooltip, bytesAxis, createChart } from "../charts.js";
import { createTable } from "../components/table.js";
import { chartBox, legendItem, panel } from "../components/widgets.js";
import { OTHER_COLORS } from "../roles.js";
import { createItemView } from "../components/item-view.js";

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
    const box = chartBox(200);
    return { ...m, box, chart: createChart(box) };
  });
  const table = createTable({ testid: "load-table", columns: COLUMNS, sort: { key: "load_seconds", direction: "asc" } });
  const legend = el("div", { class: "legend" });
  // One bar per load (a format loaded one way), on its own label; one metric per row of the page.
  const body = el("div", {}, legend,
    el("div", { class: "load-charts" }, charts.map((c) => panel(c.title, c.key === "peak_rss_bytes"
      ? "median over repeats; the dashed line is a process that only imports TensorFlow" : "median over repeats", c.box))),
    panel("Formats", "each loaded in a fresh process", table.element));

  function render(data) {
    const { baseline, results } = splitBaseline(data.results || []);
    const { modes } = loadBars(results, "file_bytes");
    const color = (mode) => MODE_COLORS[modes.indexOf(mode) % MODE_COLORS.length];
    for (const c of charts) {
      const floor = c.key === "peak_rss_bytes" ? baseline : null;
      const { bars } = loadBars(results, c.key);
      c.box.style.height = `${(floor ? 62 : 44) + 26 * Math.max(bars.length, 1)}px`;
      c.chart.set(loadOption(bars, c, color, floor), loadText(bars, c, floor));
    }
    legend.replaceChildren(...modes.map((mode) => legendItem(mode, color(mode))));
    table.setRows(results);
    return [data.model_name ? el("b", {}, name(data.model_name)) : "", ` · step ${formatInt(data.step)} · ${results.length} loads`,
      baseline ? ` · baseline (${baseline.mode}): ${formatHuman(baseline.peak_rss_bytes)} peak RSS` : ""];
  }

  return createItemView({ api, loader, kind: "loadbench", route: "loadbench", fetch: api.loadbench, body, render,
    shared: shared.loadbench });
}

/**
 * Horizontal bars, one per load, each on its own label (grouped bars by format left gaps where a
 * format has fewer modes, and bars off their labels). `floor` (the baseline load) is a dashed line
 * labelled above the plot, where no bar is.
 */
function loadOption(bars, metric, color, floor) {
  const max = Math.max(0, floor?.[metric.key] || 0, ...bars.map((b) => b.value).filter((v) => v !== null));
  return {
    grid: { left: 8, right: 72, top: floor ? 26 : 8, bottom: 8, containLabel: true },
    tooltip: { trigger: "axis", axisPointer: { type: "shadow" }, formatter: axisTooltip(metric.format) },
    yAxis: { type: "category", inverse: true, data: bars.map((b) => b.label), axisTick: { show: false },
      axisLabel: { interval: 0, formatter: (n) => isolate(n) } },
    xAxis: metric.format === formatHuman ? bytesAxis(max)
      : { type: "value", axisLabel: { formatter: metric.format, hideOverlap: true }, splitLine: { lineStyle: { color: "#eee" } } },
    series: [{
      name: metric.title, type: "bar", barMaxWidth: 16,
      data: bars.map((b) => ({ value: b.value, itemStyle: { color: color(b.mode) } })),
      label: { show: true, position: "right", fontSize: 10, color: "#616161", formatter: (p) => (p.value === null ? "" : metric.format(p.value)) },
      markLine: floor ? {
        symbol: "none", silent: true, lineStyle: { color: "#757575", type: "dashed" },
        label: { formatter: () => `baseline ${metric.format(floor[metric.key])}`, position: "start", distance: 4, color: "#616161", fontSize: 10 },
        data: [{ xAxis: floor[metric.key] }],
      } : undefined,
    }],
  };
}

/** The chart in words for a screen reader: every load's figure, the baseline, the failed loads. */
function loadText(bars, metric, floor) {
  const figures = bars.map((b) => `${b.label} ${b.value === null ? `failed${b.error ? ` (${b.error})` : ""}` : metric.format(b.value)}`);
  const base = floor ? `; baseline (${floor.mode}) ${metric.format(floor[metric.key])}` : "";
  return { label: `${metric.title} per load`, summary: `${figures.join("; ")}${base}.` };
}
