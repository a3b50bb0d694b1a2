// "Timeline": bytes in use over the traced step(s), stacked by category (what
// stays resident at the bottom), the peak marked, and every buffer live at the
// peak: which op made it, for which layer, and what it is.

import { el, name } from "../dom.js";
import { formatBytesFull, formatHuman, formatInt, formatIntKnown, formatMicros } from "../format.js";
import { CATEGORY_COLOR, CATEGORY_LABEL } from "../roles.js";
import { breakdownAt, countedNote, handedOutNote, stackTimeline } from "../stacks.js";
import { bytesAxis, createChart, tooltipBox, tooltipLine } from "../charts.js";
import { createTable } from "../components/table.js";
import { categoryChip, chartBox, infoBox, panel, sourceBadge } from "../components/widgets.js";
import { createItemView } from "../components/item-view.js";
import { banners } from "../components/banners.js";
import { xlaSummary } from "../xla.js";
import { createPeakPanel } from "../components/peak.js";

const MAX_POINTS = 2000; // points drawn; the peak is always one of them
const COUNTED = "allocator's count";

const BUFFER_COLUMNS = [
  { key: "op", label: "Op", width: "minmax(240px, 3fr)", minWidth: 240, cutStart: true,
    text: (b) => b.op || "(allocated before the trace)", render: (b) => (b.op ? name(b.op) : el("i", {}, "(allocated before the trace)")) },
  { key: "layer", label: "Layer", width: "minmax(120px, 1.2fr)", minWidth: 120, cutStart: true, render: (b) => name(b.layer) },
  { key: "shape", label: "Shape", width: "minmax(100px, 1fr)", minWidth: 100, render: (b) => name(b.shape) },
  { key: "dtype", label: "Dtype", width: "80px", minWidth: 80 },
  { key: "bytes", label: "Bytes", width: "120px", numeric: true, text: (b) => formatInt(b.bytes) },
  { key: "requested_bytes", label: "Requested", width: "120px", numeric: true, text: (b) => formatIntKnown(b.requested_bytes) },
  { key: "category", label: "Category", width: "minmax(180px, 1fr)", minWidth: 180,
    text: (b) => CATEGORY_LABEL[b.category] || b.category, render: (b) => categoryChip(b.category) },
  { key: "bytes_source", label: "Source", width: "100px", minWidth: 100, render: (b) => sourceBadge(b.bytes_source) },
  { key: "region", label: "Region", width: "80px", minWidth: 80 },
];

export function createTimelineView({ api, loader, shared }) {
  const notes = el("div", { class: "notes" });
  const peakPanel = createPeakPanel();
  const chartEl = chartBox(360);
  const chart = createChart(chartEl);
  const chartNote = el("div");
  const legend = el("div", { class: "legend", testid: "timeline-legend" });
  const count = el("small", { testid: "buffer-count" });
  const handedOut = el("div", { class: "msg info", testid: "handed-out" });
  const buffers = createTable({ testid: "buffer-table", columns: BUFFER_COLUMNS, label: "Buffers live at the peak",
    sort: { key: "bytes", direction: "desc" }, placeholder: "Filter buffers, e.g. fc1 category:gradients" });
  const xlaBox = el("div", { class: "msg info xla", testid: "xla-temp" });
  xlaBox.hidden = true;
  let xlaFor = "";
  const body = el("div", {}, notes,
    panel("Bytes in use", "over the traced step(s), stacked by category; drag or scroll to zoom", chartNote, xlaBox, legend, chartEl),
    peakPanel.element,
    el("section", { class: "panel" }, el("h2", {}, "Live at the peak", count), handedOut, buffers.element));

  /**
   * An XLA program holds its temporaries in one allocation made before it runs: say how big it is and
   * how much of it is live at once. The /timeline answer does not carry the step's kind: the /ops one does.
   */
  function showXla(data, item) {
    const pinned = { ...item, step: data.step ?? "", host: data.host ?? item.host ?? "" };
    const key = JSON.stringify([pinned.run, pinned.tag, pinned.step, pinned.host, data.wall_time]);
    if (key === xlaFor) return;
    xlaFor = key;
    xlaBox.hidden = true;
    const answer = "xla" in data ? Promise.resolve(data)
      : loader.get(`ops-kind\u0000${key}`, () => api.ops(pinned), { keep: () => xlaFor === key });
    answer.then((ops) => {
      const xla = xlaFor === key ? xlaSummary(ops?.xla) : null;
      if (!xla) return;
      xlaBox.replaceChildren(el("div", { class: "xla-headline" }, xla.headline),
        ...xla.temps.map((t) => el("div", { title: t.title }, "temporaries of ", name(t.program), `: ${t.text}`)));
      xlaBox.hidden = false;
    }, () => {}); // the Ops view says what is wrong with the item
  }

  function render(data, item) {
    notes.replaceChildren(...banners(data));
    // A trace that holds no op and no memory (the profiler could not start): the note says why.
    const empty = !(data.t_us?.length) && !(data.buffers?.length) && !(data.peak_bytes > 0);
    for (const part of body.children) if (part !== notes) part.hidden = empty;
    if (empty) return [`step ${formatIntKnown(data.step)} · no memory recorded`];
    showXla(data, item);
    const stacked = stackTimeline(data, MAX_POINTS);
    const counted = countedNote(stacked);
    chartNote.replaceChildren(stacked.t.length ? "" : infoBox("This trace recorded no memory timeline (no allocation events)."),
      counted ? infoBox(counted, "counted-note") : "");
    legend.replaceChildren(...stacked.series.map((s) => categoryChip(s.category)));
    chart.set(timelineOption(stacked), timelineText(stacked));
    peakPanel.render(data);
    const rows = data.buffers || [];
    // A PyTorch snapshot, or a trace without record_shapes, says no buffer's shape (and names no layer without
    // modules): no empty column for them; the missing shapes said once, in words.
    const blank = new Set(["layer", "shape", "dtype"].filter((k) => rows.length && !rows.some((r) => r[k])));
    count.textContent = (rows.length < (data.buffer_count || 0)
      ? `the ${formatInt(rows.length)} largest of ${formatInt(data.buffer_count)} buffers in use at the peak`
      : `${formatInt(rows.length)} buffers in use at the peak; what no buffer accounts for was allocated before the trace`)
      + (blank.has("shape") ? "; the trace records no buffer's shape, only its bytes" : "");
    const note = handedOutNote(data.handed_out, data.allocators);
    handedOut.textContent = note;
    handedOut.hidden = !note;
    // RunMetadata names no allocator region, an old trace no request: no empty column for them.
    buffers.setColumns(BUFFER_COLUMNS.filter((c) => (c.key !== "region" || rows.some((r) => r.region))
      && (c.key !== "requested_bytes" || data.handed_out) && !blank.has(c.key)));
    buffers.setRows(rows);
    const peak = stacked.peak >= 0 ? stacked.total[stacked.peak] : data.peak_bytes;
    return [`step ${formatIntKnown(data.step)} · ${data.allocations === "planned" ? "planned peak" : "peak"} `, el("b", { testid: "timeline-peak" }, `${formatInt(peak)} B`),
      ` (${formatHuman(peak)})`, stacked.peak >= 0 ? ` at ${formatMicros(stacked.t[stacked.peak])}` : "",
      ` · ${formatInt(data.t_us?.length || 0)} allocator events`];
  }

  return createItemView({ api, loader, kind: "ops", route: "timeline", fetch: api.timeline, body, render,
    shared: shared.ops, joins: true });
}

/** The chart in words: how long, the peak and its parts, where it starts and ends. */
function timelineText(stacked) {
  const { t, total, peak } = stacked;
  if (!t.length) return { label: "Bytes in use over the trace", summary: "no memory timeline in this trace" };
  const at = peak >= 0 ? breakdownAt(stacked, peak) : null;
  const parts = at ? at.parts.filter((p) => p.bytes > 0).sort((a, b) => b.bytes - a.bytes)
    .map((p) => `${(CATEGORY_LABEL[p.category] || p.category).toLowerCase()} ${formatHuman(p.bytes)}`).join(", ") : "";
  return {
    label: "Bytes in use over the trace, stacked by category",
    summary: `${formatInt(t.length)} points over ${formatMicros(t[t.length - 1] - t[0])}: ${formatHuman(total[0])} at the start`
      + `${at ? `, peak ${formatBytesFull(total[peak])} at ${formatMicros(t[peak])} (${parts})` : ""}, ${formatHuman(total[total.length - 1])} at the end`
      + `${stacked.counted ? `; the allocator's own count, which leaves out the small variables, peaks at ${formatBytesFull(Math.max(...stacked.counted))}` : ""}.`,
  };
}

function timelineOption(stacked) {
  const { t, series, peak } = stacked;
  const at = peak >= 0 ? [t[peak], stacked.total[peak]] : null;
  return {
    grid: { left: 8, right: 24, top: 28, bottom: 44, containLabel: true },
    tooltip: {
      trigger: "axis",
      formatter: (params) => {
        const i = params[0]?.dataIndex ?? 0;
        const point = breakdownAt(stacked, i);
        return tooltipBox(point.op || "(no op recorded)",
          point.parts.slice().reverse().map((p) => tooltipLine(CATEGORY_COLOR[p.category], CATEGORY_LABEL[p.category] || p.category,
            formatHuman(p.bytes))),
          `${formatMicros(point.t)} · total ${formatBytesFull(point.total)}`
          + `${stacked.counted ? ` · the allocator's count ${formatBytesFull(stacked.counted[i])}` : ""}`);
      },
    },
    dataZoom: [{ type: "inside", throttle: 50 }, {
      type: "slider", height: 16, bottom: 8, showDetail: false, borderColor: "#e0e0e0", fillerColor: "rgba(245,124,0,0.10)",
      handleStyle: { color: "#fff", borderColor: "#f57c00" }, moveHandleStyle: { color: "#f57c00", opacity: 0.5 },
      dataBackground: { lineStyle: { color: "#bdbdbd" }, areaStyle: { color: "#eeeeee" } },
      selectedDataBackground: { lineStyle: { color: "#f57c00" }, areaStyle: { color: "#ffe0b2" } },
    }],
    xAxis: { type: "value", min: 0, max: "dataMax", axisLabel: { formatter: formatMicros, hideOverlap: true }, splitLine: { show: false } },
    yAxis: bytesAxis(stacked.total.reduce((m, v) => Math.max(m, v), 0)),
    series: series.map((s, i) => ({
      name: CATEGORY_LABEL[s.category] || s.category, type: "line", stack: "bytes", step: "end", symbol: "none",
      lineStyle: { width: 0 }, areaStyle: { color: CATEGORY_COLOR[s.category] || "#9e9e9e", opacity: 0.85 },
      itemStyle: { color: CATEGORY_COLOR[s.category] || "#9e9e9e" },
      data: s.values.map((v, j) => [t[j], v]),
      markLine: i === series.length - 1 && at ? {
        symbol: "none", silent: true, lineStyle: { color: "#e65100", type: "dashed", width: 1.5 },
        label: { formatter: () => `peak ${formatHuman(at[1])}`, position: "end", rotate: 0, color: "#e65100", fontWeight: 500 },
        data: [{ xAxis: at[0] }],
      } : undefined,
      markPoint: i === series.length - 1 && at ? {
        symbol: "circle", symbolSize: 9, itemStyle: { color: "#e65100" }, label: { show: false },
        data: [{ coord: at }],
      } : undefined,
    })).concat(stacked.counted ? [{
      // the allocator's own count, where the bands pass it (it records only large allocations): not stacked
      name: COUNTED, type: "line", step: "end", symbol: "none", silent: true, z: 5,
      lineStyle: { color: "#424242", type: "dashed", width: 1.2 }, itemStyle: { color: "#424242" },
      data: stacked.counted.map((v, j) => [t[j], v]),
    }] : []),
  };
}
