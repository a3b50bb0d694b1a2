// ECharts with only the parts the tab uses (bar, line, SVG renderer), so the
// bundle stays small. Tooltips are DOM nodes built with textContent: a layer
// called "<img onerror=...>" stays text.
//
// A chart is an SVG a screen reader cannot read and a keyboard cannot reach, so each
// has a text alternative: a chart that only shows is an image whose label sums it up
// in words; a chart whose bars do something (find the op, list the layer's variables)
// is a list box of its bars: Tab reaches it, the arrow keys move from bar to bar (the
// bar's tooltip shows, a screen reader reads the bar), Enter does what a click does.

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

let chartIds = 0;

/**
 * A chart in `container` that follows the container's size (views live as long
 * as the page; a chart that does not is disposed). onCategoryClick(name) fires for a
 * click on a bar's category, and for Enter on the bar picked with the keyboard.
 */
export function createChart(container, onCategoryClick) {
  const id = `mm-chart-${++chartIds}`;
  const canvas = el("div", { class: "chart-canvas", "aria-hidden": "true" });
  const described = el("div", { class: "sr-only", id: `${id}-summary` });
  const options = el("div", { class: "sr-only" });
  container.classList.add("chart");
  container.append(canvas, described, options);
  const chart = echarts.init(canvas, null, { renderer: "svg" });
  const observer = new ResizeObserver(() => chart.resize());
  observer.observe(container);
  let items = []; // [{name, text}]: the bars a keyboard moves through
  let active = -1;

  if (onCategoryClick) {
    chart.on("click", (params) => onCategoryClick(params.name));
    Object.assign(container, { tabIndex: 0 });
    container.setAttribute("role", "listbox");
    container.setAttribute("aria-describedby", described.id);
    container.addEventListener("keydown", (event) => {
      const next = items.length ? keyMove(event.key, active, items.length) : null;
      if (next === null) return;
      event.preventDefault();
      if (next === "choose") onCategoryClick(items[active].name);
      else pick(next);
    });
    container.addEventListener("focus", () => pick(active < 0 ? 0 : Math.min(active, items.length - 1)));
    container.addEventListener("blur", () => {
      chart.dispatchAction({ type: "hideTip" });
      chart.dispatchAction({ type: "downplay" });
    });
  } else {
    container.setAttribute("role", "img");
  }

  function pick(index) {
    if (index < 0 || index >= items.length) return;
    for (const [i, node] of [...options.children].entries()) node.setAttribute("aria-selected", String(i === index));
    active = index;
    container.setAttribute("aria-activedescendant", `${id}-bar-${index}`);
    chart.dispatchAction({ type: "downplay" });
    chart.dispatchAction({ type: "highlight", seriesIndex: 0, dataIndex: index });
    chart.dispatchAction({ type: "showTip", seriesIndex: 0, dataIndex: index });
  }

  return {
    /**
     * Draw `option`. `text`: {label (what the chart is), summary (its figures in words),
     * items ([{name: the category a click passes, text: the bar in words}], for a chart that acts on its bars)}.
     */
    set(option, text = {}) {
      chart.setOption({ textStyle: TEXT_STYLE, animationDuration: 300, ...option }, { notMerge: true });
      const label = String(text.label || "Chart");
      described.textContent = String(text.summary || "");
      if (!onCategoryClick) {
        container.setAttribute("aria-label", text.summary ? `${label}. ${text.summary}` : label);
        return;
      }
      container.setAttribute("aria-label", `${label}: use the arrow keys to move between bars, Enter to ${text.action || "pick one"}`);
      items = Array.isArray(text.items) ? text.items : [];
      options.replaceChildren(...items.map((item, i) => el("div", { role: "option", id: `${id}-bar-${i}`, "aria-selected": "false",
        "aria-posinset": i + 1, "aria-setsize": items.length }, item.text)));
      if (active >= items.length) active = -1;
      if (active >= 0 && document.activeElement === container) pick(active);
      else container.removeAttribute("aria-activedescendant");
    },
    /** For charts that do not live as long as the page (one per series of an item). */
    dispose() {
      observer.disconnect();
      chart.dispose();
    },
  };
}

const MOVES = { ArrowDown: 1, ArrowRight: 1, ArrowUp: -1, ArrowLeft: -1 };

/** What a key does in a chart of `count` bars with bar `active` picked (-1: none): the bar to pick,
 * "choose" (Enter or space on a picked bar), or null (nothing). */
function keyMove(key, active, count) {
  let next = null;
  if (key in MOVES) next = active < 0 ? 0 : active + MOVES[key];
  else if (key === "Home") next = 0;
  else if (key === "End") next = count - 1;
  else if ((key === "Enter" || key === " ") && active >= 0) return "choose";
  return next === null ? null : Math.max(0, Math.min(count - 1, next));
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
