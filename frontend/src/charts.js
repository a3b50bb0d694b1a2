// ECharts with only the parts the tab uses (bar, line, SVG renderer), so the
// bundle stays small. Tooltips are DOM nodes built with textContent: a layer
// called "<img onerror=...>" stays text.

import * as echarts from "echarts/core";
import { BarChart, LineChart } from "echarts/charts";
import {
  DataZoomComponent, GridComponent, LegendComponent, MarkLineComponent, MarkPointComponent, TooltipComponent,
} from "echarts/components";
import { SVGRenderer } from "echarts/renderers";
import { el, name } from "./dom.js";
import { byteAxisInterval, formatHumanShort } from "./format.js";

echarts.use([BarChart, LineChart, DataZoomComponent, GridComponent, LegendComponent, MarkLineComponent, MarkPointComponent,
  TooltipComponent, SVGRenderer]);

export const TEXT_STYLE = { fontFamily: "Roboto, 'Segoe UI', Arial, sans-serif", color: "#616161" };

/**
 * A chart in `container` that follows the container's size (views live as long
 * as the page; a chart that does not is disposed). onCategoryClick(name) fires for clicks on a bar's category.
 */
export function createChart(container, onCategoryClick) {
  const chart = echarts.init(container, null, { renderer: "svg" });
  const observer = new ResizeObserver(() => chart.resize());
  observer.observe(container);
  if (onCategoryClick) chart.on("click", (params) => onCategoryClick(params.name));
  return {
    set(option) {
      chart.setOption({ textStyle: TEXT_STYLE, animationDuration: 300, ...option }, { notMerge: true });
    },
    /** For charts that do not live as long as the page (one per series of an item). */
    dispose() {
      observer.disconnect();
      chart.dispose();
    },
  };
}

/** Axis tooltip as a DOM node: heading plus one "● series  value" line per series. */
export function axisTooltip(formatValue) {
  return (params) => {
    const list = Array.isArray(params) ? params : [params];
    const rows = list
      .filter((p) => p.value !== null && p.value !== undefined && p.value !== "-")
      .map((p) => tooltipLine(p.color, p.seriesName, formatValue(Array.isArray(p.value) ? p.value[1] : p.value)));
    return tooltipBox(list[0]?.axisValueLabel ?? list[0]?.name ?? "", rows);
  };
}

/** A tooltip: an (untrusted, isolated) heading and lines. */
export function tooltipBox(heading, lines, footer) {
  return el("div", { class: "tip" }, el("div", { class: "tip-head" }, name(heading)), lines, footer ? el("div", { class: "tip-foot" }, footer) : null);
}

export function tooltipLine(color, label, value) {
  return el("div", { class: "tip-line" },
    el("span", { class: "chip" }, el("span", { class: "swatch", style: { background: color } }), label), el("b", {}, value));
}

/** A value axis in bytes with ticks on round binary units, ending on a tick past `max`. */
export function bytesAxis(max) {
  const interval = byteAxisInterval(max);
  return {
    type: "value", min: 0, max: interval ? Math.ceil(max / interval) * interval : undefined, interval,
    axisLabel: { formatter: formatHumanShort, hideOverlap: true }, splitLine: { lineStyle: { color: "#eee" } },
  };
}
