// "Growth": memory samples of one tag over its steps or model builds. First what keeps growing
// (a robust slope after warm-up, decided by the server) and by how much per step or build;
// then one small chart per series; then what explains the growth: the models whose variables
// are still alive, the owners of the variables, the functions whose graphs stay, the object
// types that multiply.

import { el, message, name } from "../dom.js";
import { isolate } from "../bidi.js";
import {
  UNKNOWN, formatBytesFull, formatHuman, formatHumanTick, formatInt, formatSeconds, isKnown,
} from "../format.js";
import {
  axisRange, chartedSeries, explainTables, flaggedCount, formatPerStep, growthSummary, labelsByStep, mostFlagged, perStepText,
  seriesLabel, seriesPoints, seriesUnit, UNKNOWN_GROWTH_WHY, unknownGrowthNote, unreadableNote,
} from "../growth.js";
import { GROWTH_COLOR } from "../roles.js";
import { createChart, tooltipBox, tooltipLine } from "../charts.js";
import { createTable } from "../components/table.js";
import { chartBox, panel, warnBox } from "../components/widgets.js";
import { createItemView } from "../components/item-view.js";
import { runsOfKind } from "../selection.js";

const SYMBOLS_UP_TO = 60; // points drawn as dots up to this many samples
const MAX_SCANNED = 40; // items asked whether they flag something, when Growth opens

const TABLES = {
  models: { testid: "growth-models", title: "Live models", label: "Live models",
    hint: "every Keras model alive at the last sample: something still holds them" },
  variables_by_owner: { testid: "growth-owners", title: "Variables by owner", label: "Variables by owner",
    hint: "owners (model/layer, optimizer) whose live variables grew after warm-up" },
  graph_ops_by_function: { testid: "growth-functions", title: "Graph ops by function", label: "Graph ops by function",
    hint: "functions whose graph operations stay alive and accumulate" },
  objects_by_type: { testid: "growth-types", title: "Objects by type", label: "Objects by type",
    hint: "the Python object types that multiplied most" },
};

// Names that share long prefixes ("adam_sequential_conv2d_1_bias_momentum_...") differ at their end: a narrow cell drops its start.
const nameColumn = (label) => ({ key: "name", label, width: "minmax(180px, 3fr)", minWidth: 180, cutStart: true,
  render: (r) => name(r.name) });
// Whether a line was there before: unknown (null) when the census that would say was cut below it.
const newColumn = (title) => ({ key: "new", label: "New", width: "72px", minWidth: 64, title,
  value: (r) => (r.new === true ? 1 : r.new === false ? 0 : null), text: (r) => (r.new === true ? "new" : r.new === false ? "" : UNKNOWN),
  render: (r) => (r.new === true ? el("span", { class: "badge new" }, "new") : r.new === false ? ""
    : el("i", { class: "why", title: UNKNOWN_GROWTH_WHY }, UNKNOWN)) });
const unknownWhy = () => el("i", { class: "why", title: UNKNOWN_GROWTH_WHY }, UNKNOWN);
const bytesColumn = { key: "bytes", label: "Bytes", width: "110px", minWidth: 100, numeric: true,
  value: (r) => (isKnown(r.bytes) ? r.bytes : null), text: (r) => (isKnown(r.bytes) ? formatInt(r.bytes) : "") };

const MODEL_COLUMNS = [
  nameColumn("Model"),
  { key: "variables", label: "Variables", width: "100px", numeric: true, text: (r) => formatInt(r.variables) },
  bytesColumn,
  { key: "size", label: "Size", width: "100px", numeric: true, value: (r) => (isKnown(r.bytes) ? r.bytes : null),
    text: (r) => (isKnown(r.bytes) ? formatHuman(r.bytes) : "") },
  newColumn("not alive at the first sample"),
];

const moverCache = new Map();
/** Columns of a "grew" table; the same array for the same shape, so a refresh keeps the sort. */
function moverColumns(word, bytes) {
  const key = `${word}|${bytes}`;
  if (!moverCache.has(key)) {
    moverCache.set(key, [
      nameColumn("Name"),
      { key: "count", label: "Count", width: "80px", minWidth: 70, numeric: true, title: "at the last sample", text: (r) => formatInt(r.count) },
      ...(bytes ? [bytesColumn] : []),
      { key: "grown", label: "Grown", width: "80px", minWidth: 70, numeric: true, title: "from the first sample after warm-up to the last",
        text: (r) => (isKnown(r.grown) ? `+${formatInt(r.grown)}` : `${UNKNOWN}: ${UNKNOWN_GROWTH_WHY}`),
        render: (r) => (isKnown(r.grown) ? `+${formatInt(r.grown)}` : unknownWhy()) },
      { key: "per_step", label: `Per ${word}`, width: "88px", minWidth: 80, numeric: true,
        title: `growth per ${word} over the same samples; "appeared": absent after warm-up, its growth is its count, not a rate`,
        text: (r) => ({ appeared: `appeared: absent at the first sample after warm-up, its +${formatInt(r.grown)} is not a rate per ${word}`,
          unknown: `${UNKNOWN}: ${UNKNOWN_GROWTH_WHY}` })[perStepText(r)] ?? perStepText(r),
        render: (r) => (perStepText(r) === "appeared" ? el("i", { class: "why" }, "appeared")
          : perStepText(r) === UNKNOWN ? unknownWhy() : perStepText(r)) },
      newColumn("absent at the first sample after warm-up"),
    ]);
  }
  return moverCache.get(key);
}

export function createGrowthView({ api, loader, shared }) {
  const summary = el("div", { class: "growth-summary", testid: "growth-summary", role: "status" });
  const elsewhere = el("div", { class: "growth-elsewhere", testid: "growth-elsewhere" });
  elsewhere.hidden = true;
  const unreadable = el("div");
  const chartsEl = el("div", { class: "growth-charts" });
  const charts = new Map(); // series -> {element, chart, title, hint}
  const explained = explainParts();
  const scalarsNote = el("p", { class: "hint" });
  const body = el("div", {}, summary, elsewhere, unreadable, chartsEl, explained.head,
    el("div", { class: "grid2 growth-tables" }, Object.values(explained.panels)), scalarsNote);

  function render(data, item) {
    const { word, flagged, none } = growthSummary(data);
    renderSummary(summary, flagged, none, word);
    showElsewhere(lastScan, item);
    const note = unreadableNote(data.unreadable);
    unreadable.replaceChildren(note ? warnBox(message(note), "growth-unreadable") : "");
    renderCharts(chartsEl, charts, data, word);
    showExplained(explained, data, word);
    scalarsNote.textContent = `RSS, device memory, live variables and graph ops are also in TensorBoard's Scalars dashboard, `
      + `as ${isolate(item.tag)}/… (samples written in TF2).`;
    return metaLine(data, word);
  }

  const view = createItemView({ api, loader, kind: "memory", route: "growth", fetch: api.growth, body, render,
    shared: shared.memory, steps: false });
  const scan = createScan(api, loader);
  let opened = false;

  function showElsewhere(result, item = view.item()) {
    showFlaggedElsewhere(elsewhere, result, item, (f) => view.pick({ run: f.run, tag: f.tag }));
  }

  let lastScan = null;
  let opening = false; // the first scan is under way: it opens the view, on the newest listing
  let newest = null;
  return {
    element: view.element,
    async update(listing) {
      newest = listing;
      if (opening) return; // a poll or a return to the view meanwhile: the first scan must finish to pick
      if (!opened) {
        opened = true;
        opening = true;
        const picksBefore = view.picks();
        const looking = el("div", { class: "loading", testid: "growth-scanning" },
          `Looking for what keeps growing in ${formatInt(runsOfKind(listing, "memory").length)} runs…`);
        view.element.insertBefore(looking, view.element.children[1]);
        try {
          lastScan = await scan(listing);
        } finally {
          looking.remove();
          opening = false;
        }
        const best = mostFlagged(lastScan?.found);
        if (best && view.picks() === picksBefore) { // nobody picked meanwhile
          shared.memory.selection = { ...shared.memory.selection, run: best.run, tag: best.tag, step: "" };
        }
        view.update(newest);
        showElsewhere(lastScan);
        return;
      }
      view.update(listing);
      const result = await scan(listing);
      if (result) lastScan = result;
      showElsewhere(lastScan);
    },
  };
}

/** The "What explains it" head and, for each of TABLES, its table, the note under it and its panel. */
function explainParts() {
  const tables = {};
  const panels = {};
  const notes = {}; // under each table: what its "unknown" rows mean
  for (const [key, t] of Object.entries(TABLES)) {
    tables[key] = createTable({ testid: t.testid, label: t.label, sort: { key: key === "models" ? "bytes" : "grown", direction: "desc" },
      columns: key === "models" ? MODEL_COLUMNS : moverColumns("step", true), maxHeight: 290, placeholder: `Filter ${t.label.toLowerCase()}` });
    notes[key] = el("p", { class: "hint table-note", testid: `${t.testid}-unknown` });
    panels[key] = panel(t.title, t.hint, tables[key].element, notes[key]);
    panels[key].hidden = true;
  }
  const head = el("h3", { class: "growth-explain-head" }, "What explains it");
  head.hidden = true;
  return { tables, panels, notes, head };
}

/** The tables of what explains the growth that the answer has; the others hidden. */
function showExplained({ tables, panels, notes, head }, data, word) {
  const present = explainTables(data.explained_by);
  const keys = new Set(present.map((t) => t.key));
  for (const key of Object.keys(TABLES)) panels[key].hidden = !keys.has(key);
  head.hidden = !present.length;
  for (const t of present) {
    if (t.key !== "models") tables[t.key].setColumns(moverColumns(word, t.bytes), { key: "grown", direction: "desc" });
    tables[t.key].setRows(t.rows);
    notes[t.key].textContent = t.key === "models" ? "" : unknownGrowthNote(t.rows);
    notes[t.key].hidden = !notes[t.key].textContent;
  }
}

/** One chart per series charted (`charts`: series -> its chart, kept while the series is shown). */
function renderCharts(chartsEl, charts, data, word) {
  const growth = new Map((data.growth || []).filter((g) => g && typeof g.series === "string").map((g) => [g.series, g]));
  const labels = labelsByStep(data.labels);
  const shown = chartedSeries(data);
  for (const [series, c] of charts) {
    if (!shown.includes(series)) {
      c.chart.dispose();
      charts.delete(series);
    }
  }
  chartsEl.replaceChildren(...shown.map((series) => {
    if (!charts.has(series)) charts.set(series, chartPanel(series));
    const c = charts.get(series);
    showSeries(c, series, data, growth.get(series), { labels, word });
    return c.element;
  }));
  if (!shown.length) chartsEl.append(el("div", { class: "msg info" }, "This tag holds no samples yet."));
}

function chartPanel(series) {
  const box = chartBox(170);
  const title = el("span", { class: "growth-chart-title" });
  const badge = el("span", { class: "growth-badge", title: "keeps growing" }, "▲ growing");
  const hint = el("small");
  const element = el("section", { class: "panel growth-chart", testid: `growth-chart-${series}` },
    el("h2", {}, title, badge, hint), box);
  return { element, chart: createChart(box), title, badge, hint };
}

/** A series' chart, title and hint (its growth per step or build and why), flagged or not. */
function showSeries(c, series, data, g, { labels, word }) {
  const unit = seriesUnit(data, series);
  const isFlagged = Boolean(g?.flagged);
  c.element.classList.toggle("flagged", isFlagged);
  c.element.dataset.flagged = String(isFlagged);
  c.badge.hidden = !isFlagged;
  c.title.replaceChildren(name(seriesLabel(series)));
  const n = (data.series[series].steps || []).length;
  c.hint.replaceChildren(g ? `${formatPerStep(g.per_step, unit)} per ${word} · ` : "", message(g?.reason || "no trend computed"),
    isKnown(data.samples) && n < data.samples ? ` · ${formatInt(n)} of ${formatInt(data.samples)} samples` : "");
  c.hint.title = isolate(`${g && isKnown(g.per_step) && unit === "bytes" ? `${formatBytesFull(g.per_step)} per ${word}; ` : ""}${g?.reason || ""}`);
  c.chart.set(chartOption(series, data.series[series], { flagged: isFlagged, unit, labels, word }),
    growthText(series, data.series[series], g, { flagged: isFlagged, unit, word }));
}

/** Which items flag something, asked once per item and step (one request at a time): Growth opens on
 * the item with the most series flagged, and an item with none says where to look. scan(listing) gives
 * {items, of, found: [{run, tag, flagged}]}, or null when a newer listing came meanwhile. */
function createScan(api, loader) {
  const scanned = new Map(); // "run\0tag\0max_step" -> {run, tag, flagged}
  let current = null; // the listing being scanned
  return async function scan(listing) {
    current = listing;
    const items = runsOfKind(listing, "memory").flatMap((r) => r.tags.map((t) => ({ run: r.run, tag: t.tag, max_step: t.max_step })))
      .slice(0, MAX_SCANNED);
    for (const item of items) {
      const key = [item.run, item.tag, item.max_step].join("\u0000");
      if (scanned.has(key)) continue;
      try {
        const answer = await loader.get(`growth-scan\u0000${key}`, () => api.growth(item), { keep: () => current === listing });
        scanned.set(key, { run: item.run, tag: item.tag, flagged: flaggedCount(answer) });
      } catch {
        scanned.set(key, { run: item.run, tag: item.tag, flagged: 0 }); // its own error shows when it is opened
      }
      if (current !== listing) return null;
    }
    return { items: items.length, of: runsOfKind(listing, "memory").reduce((n, r) => n + r.tags.length, 0),
      found: items.map((i) => scanned.get([i.run, i.tag, i.max_step].join("\u0000"))) };
  };
}

/** Where else something is flagged, when the item shown flags nothing; `pick(f)` opens one. */
function showFlaggedElsewhere(elsewhere, result, item, pick) {
  const others = (result?.found || []).filter((f) => f.flagged && !(f.run === item?.run && f.tag === item?.tag));
  const here = result?.found.find((f) => f.run === item?.run && f.tag === item?.tag);
  elsewhere.hidden = !result || Boolean(here?.flagged) || !item;
  if (elsewhere.hidden) return;
  const checked = result.items < result.of ? ` (the first ${formatInt(result.items)} of ${formatInt(result.of)} checked)` : "";
  elsewhere.replaceChildren(...(others.length
    ? [`Flagged in other runs${checked}: `, ...others.flatMap((f, i) => [i ? ", " : "", el("button", {
      class: "link-button", type: "button", testid: "growth-elsewhere-item", onclick: () => pick(f),
    }, name(f.run), f.tag === "memory" ? "" : [" / ", name(f.tag)], ` (${f.flagged} series)`)])]
    : [`Nothing is flagged in any of the ${formatInt(result.items)} items with memory samples${checked}.`]));
}

function renderSummary(container, flagged, none, word) {
  container.classList.toggle("growing", flagged.length > 0);
  if (!flagged.length) {
    container.replaceChildren(el("span", { class: "growth-none" }, "✓ ", message(none)));
    return;
  }
  container.replaceChildren(
    el("div", { class: "growth-summary-head" }, el("span", { class: "icon", "aria-hidden": "true" }, "▲"),
      `Keeps growing: ${flagged.length === 1 ? "1 series rises" : `${flagged.length} series rise`} steadily after warm-up `
        + "(a robust slope over the samples, not the first points)"),
    el("ul", { class: "growth-flags" }, flagged.map((f) => el("li", { testid: `growth-flag-${f.series}`,
      title: isolate(f.unit === "bytes" && isKnown(f.per_step) ? `${formatBytesFull(f.per_step)} per ${word}` : f.text) },
    el("b", {}, message(f.text)), f.reason ? [" — ", el("span", { class: "reason" }, message(f.reason))] : ""))));
}

function metaLine(data, word) {
  const steps = chartedSeries(data).flatMap((s) => data.series[s].steps || []).filter(isKnown);
  const parts = [`${formatInt(data.samples ?? 0)} samples`];
  if (steps.length) parts.push(`${word}s ${formatInt(Math.min(...steps))}–${formatInt(Math.max(...steps))}`);
  if (isKnown(data.census_seconds)) parts.push(`census ${formatSeconds(data.census_seconds)} per sample (median)`);
  const labelled = (data.labels || []).filter((l) => l?.label).length;
  if (labelled) parts.push(`${formatInt(labelled)} labelled`);
  return [parts.join(" · ")];
}

/** One series in words: its span, first and last values, its growth, whether it is flagged. */
function growthText(series, data, g, { flagged, unit, word }) {
  const points = seriesPoints(data).filter(([, v]) => v !== null);
  const value = (v) => (unit === "bytes" ? formatHuman(v) : formatInt(v));
  const span = points.length ? `${word}s ${formatInt(points[0][0])}–${formatInt(points[points.length - 1][0])}: `
    + `${value(points[0][1])} at the first, ${value(points[points.length - 1][1])} at the last` : "no value recorded";
  const trend = g ? `; ${formatPerStep(g.per_step, unit)} per ${word}${g.reason ? ` (${g.reason})` : ""}` : "";
  return { label: `${seriesLabel(series)} over ${word}s${flagged ? ", keeps growing" : ""}`, summary: `${span}${trend}.` };
}

function chartOption(series, data, { flagged, unit, labels, word }) {
  const points = seriesPoints(data);
  const bytes = unit === "bytes";
  const color = flagged ? GROWTH_COLOR.flagged : GROWTH_COLOR.steady;
  const label = seriesLabel(series);
  const range = axisRange(points.map((p) => p[1]), unit);
  return {
    animation: false,
    grid: { left: 8, right: 18, top: 10, bottom: 4, containLabel: true },
    tooltip: {
      trigger: "axis", confine: true,
      formatter: (params) => {
        const p = (Array.isArray(params) ? params : [params])[0];
        const [step, value] = Array.isArray(p?.value) ? p.value : [null, null];
        const sample = labels.get(step);
        return tooltipBox(`${word} ${formatInt(step)}${sample ? ` · ${sample}` : ""}`,
          [tooltipLine(color, label, !isKnown(value) ? "unknown" : bytes ? formatBytesFull(value) : formatInt(value))]);
      },
    },
    xAxis: { type: "value", min: "dataMin", max: "dataMax", minInterval: 1,
      axisLabel: { formatter: (v) => formatInt(v), hideOverlap: true }, splitLine: { show: false } },
    yAxis: { type: "value", ...range,
      axisLabel: { formatter: bytes ? (v) => formatHumanTick(v, range.interval) : (v) => formatInt(v), hideOverlap: true },
      splitLine: { lineStyle: { color: "#eee" } } },
    series: [{
      name: label, type: "line", data: points, connectNulls: false, showSymbol: points.length <= SYMBOLS_UP_TO, symbolSize: 5,
      lineStyle: { color, width: flagged ? 2.5 : 1.5 }, itemStyle: { color },
      areaStyle: flagged ? { color, opacity: 0.08 } : undefined,
    }],
  };
}
