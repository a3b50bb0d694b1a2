// "Storage": what the variables of one breakdown cost, by role, layer and variable.

import { el, name } from "../dom.js";
import {
  ellipsize, formatBytesFull, formatConfigValue, formatHuman, formatInt, formatShape, formatWallTime, shortClassName, shortDevice,
} from "../format.js";
import { isolate } from "../bidi.js";
import { ROLES, ROLE_COLOR, ROLE_LABEL } from "../roles.js";
import { axisTooltip, bytesAxis, createChart } from "../charts.js";
import { createTable } from "../components/table.js";
import { chartBox, panel, roleCard, roleChip } from "../components/widgets.js";
import { createItemView } from "./item-view.js";
import { createCompare } from "./compare.js";
import { largestLayers } from "../aggregate.js";

const CHART_LAYERS = 30;
const NO_LAYER = "(no layer)"; // variables outside any layer (counters, beta powers, ...)

const VARIABLE_COLUMNS = [
  { key: "name", label: "Name", width: "minmax(220px, 3fr)", minWidth: 220, render: (v) => name(v.name) },
  { key: "layer", label: "Layer", width: "minmax(120px, 1.5fr)", minWidth: 120, render: (v) => name(v.layer) },
  { key: "shape", label: "Shape", width: "minmax(100px, 1fr)", sortKey: "params", value: (v) => v.params, text: (v) => formatShape(v.shape) },
  { key: "dtype", label: "Dtype", width: "80px", minWidth: 80 },
  { key: "params", label: "Params", width: "100px", numeric: true, text: (v) => formatInt(v.params) },
  { key: "bytes", label: "Bytes", width: "120px", numeric: true, text: (v) => formatInt(v.bytes) },
  { key: "role", label: "Role", width: "130px", minWidth: 130, render: (v) => roleChip(v.role) },
  { key: "slot", label: "Slot", width: "90px", minWidth: 70 },
  { key: "slot_of", label: "Slot of", width: "minmax(120px, 1.5fr)", minWidth: 120, render: (v) => name(v.slot_of ?? "") },
  { key: "device", label: "Device", width: "minmax(90px, 1fr)", text: (v) => (v.replicas > 1 ? `${v.device} ×${v.replicas}` : v.device),
    render: (v) => (v.replicas > 1 ? `${shortDevice(v.device)} ×${v.replicas}` : shortDevice(v.device)) },
];

const LAYER_COLUMNS = [
  { key: "layer", label: "Layer", width: "minmax(200px, 2fr)", minWidth: 200, text: (l) => l.layer || NO_LAYER,
    render: (l) => name(l.layer ? l.label : NO_LAYER) },
  { key: "class_name", label: "Class", width: "minmax(100px, 1fr)", text: (l) => l.class_name || (l.leaf ? "" : "composite") },
  { key: "params", label: "Params", width: "110px", numeric: true, text: (l) => formatInt(l.params) },
  { key: "derivation", label: "Derivation", width: "minmax(200px, 2.5fr)", minWidth: 200 },
  ...ROLES.map((role) => ({
    key: role, label: ROLE_LABEL[role], width: "120px", numeric: true,
    value: (l) => l.bytes?.[role] ?? 0, text: (l) => formatInt(l.bytes?.[role] ?? 0),
  })),
  { key: "total_bytes", label: "Total bytes", width: "120px", numeric: true, text: (l) => formatInt(l.total_bytes) },
];

export function createStorageView({ api, loader, shared }) {
  const cards = el("div", { class: "cards" });
  const extras = el("div", { class: "grid2", style: { marginBottom: "12px" } });
  const chartEl = chartBox();
  const chart = createChart(chartEl, (layer) => showLayer(layer === NO_LAYER ? "" : layer));
  const chartPanel = panel("Bytes per layer", " ", chartEl);
  const chartTitle = chartPanel.querySelector("h2 small");
  // A click on a layer (row or bar) lists its variables; slots carry their weight's layer.
  const showLayer = (layer) => layer && variables.setFilter(`layer^=${layer}`);
  const layers = createTable({ testid: "layer-table", mode: "tree", columns: LAYER_COLUMNS, label: "Layers",
    placeholder: "Filter layers", onRowClick: (row) => showLayer(row.layer), toolbar: treeButtons(() => layers) });
  const variables = createTable({ testid: "variable-table", mode: "remote", columns: VARIABLE_COLUMNS, label: "Variables",
    sort: { key: "bytes", direction: "desc" }, placeholder: "Filter variables, e.g. conv2d role:slot" });
  const body = el("div", {}, cards, extras,
    chartPanel,
    panel("Layers", "composite layers sum their sublayers; click a layer to list its variables", layers.element),
    panel("Variables", "sorted and filtered by the server; click a header to sort", variables.element));
  const compare = createCompare({ api, loader });
  let treeOf = "";
  let shownKey = ""; // the answer whose pages the table shows: pages of another stop being asked for

  function render(data, item) {
    renderCards(cards, data);
    extras.replaceChildren(optimizerPanel(data.optimizer), reconciliationPanel(data));
    const rows = data.layers || [];
    const leaves = rows.filter((l) => l.leaf);
    const charted = largestLayers(leaves, CHART_LAYERS);
    chartTitle.textContent = charted.length < leaves.length
      ? `the ${CHART_LAYERS} largest of ${formatInt(leaves.length)} layers; optimizer slots are charged to the layer of their weight`
      : "optimizer slots are charged to the layer of their weight";
    chart.set(layerChartOption(charted));
    chartEl.style.height = `${Math.max(180, 60 + charted.length * 22)}px`;
    const tree = `${item.run}\u0000${item.tag}`;
    layers.setRows(rows, tree !== treeOf);
    treeOf = tree;
    const pinned = { ...item, step: data.step ?? item.step };
    const key = JSON.stringify([item.run, item.tag, data.step, data.wall_time]);
    shownKey = key;
    variables.setItem(key, (page) => loader.get(`variables\u0000${key}\u0000${JSON.stringify(page)}`,
      () => api.variables(pinned, page), { keep: () => shownKey === key }), data.variables);
    compare.prefer(data.tag);
    return metaLine(data);
  }

  const view = createItemView({ api, loader, kind: "breakdown", route: "breakdown", fetch: api.breakdown, body, render,
    shared: shared.breakdown });
  view.element.insertBefore(compare.element, view.element.children[1]); // compare sits right under the pickers
  return { element: view.element, update: (listing) => { view.update(listing); compare.update(listing); } };
}

/** Model order / expand all / collapse all buttons for a tree table (created before the table exists). */
export function treeButtons(table) {
  return [
    el("button", { class: "link-button", type: "button", title: "undo a column sort", onclick: () => table().resetSort() }, "Model order"),
    el("button", { class: "link-button", type: "button", onclick: () => table().expandAll() }, "Expand all"),
    el("button", { class: "link-button", type: "button", onclick: () => table().collapseAll() }, "Collapse all"),
  ];
}

function metaLine(data) {
  const parts = [];
  if (data.model_name) parts.push(el("b", {}, name(data.model_name)));
  parts.push(`${data.source || "unknown source"} · step ${formatInt(data.step)}`);
  if (data.wall_time) parts.push(formatWallTime(data.wall_time));
  parts.push(`${formatInt(data.total_params)} params`);
  return parts.flatMap((p, i) => (i ? [" · ", p] : [p]));
}

function renderCards(container, data) {
  const totals = data.totals || {};
  const total = data.total_bytes ?? ROLES.reduce((s, r) => s + (totals[r] || 0), 0);
  const share = (b) => (total ? `${((100 * b) / total).toFixed(1)}% of total` : "");
  container.replaceChildren(
    roleCard("total-weight", "weight", totals.weight || 0, `${formatInt(data.total_params)} params · ${share(totals.weight || 0)}`),
    roleCard("total-non_trainable", "non_trainable", totals.non_trainable || 0, share(totals.non_trainable || 0)),
    roleCard("total-optimizer_slot", "optimizer_slot", totals.optimizer_slot || 0, optimizerHint(data, totals)),
    roleCard("total-other", "other", totals.other || 0, share(totals.other || 0)),
    roleCard("total-all", "total", total, `${formatInt(data.variable_count)} variables`),
  );
}

/** "2.00× weights (Adam)": the ratio users are asking about in the first place. */
function optimizerHint(data, totals) {
  const cls = shortClassName(data.optimizer?.class_name);
  if (!totals.weight) return cls || "";
  const ratio = `${((totals.optimizer_slot || 0) / totals.weight).toFixed(2)}× weights`;
  return cls ? `${ratio} (${cls})` : ratio;
}

function optimizerPanel(optimizer) {
  if (!optimizer) return panel("Optimizer", "", el("div", { class: "hint" }, "No optimizer recorded with this breakdown."));
  const config = optimizer.config || {};
  const list = el("dl", { class: "kv", testid: "optimizer-config" });
  for (const [key, value] of Object.entries(config)) {
    const text = formatConfigValue(value);
    list.append(el("div", {}, el("dt", { title: isolate(key) }, name(key)), el("dd", { title: isolate(text) }, name(text))));
  }
  return panel("Optimizer", optimizer.recorded_in ? `recorded in ${optimizer.recorded_in}` : "how the model was compiled",
    el("div", { class: "optimizer-class", testid: "optimizer-class" }, name(optimizer.class_name || "(unnamed)")),
    Object.keys(config).length ? list : el("div", { class: "hint" }, "No config recorded."));
}

/** Variables + overhead lines = bytes on disk; any difference shows as its own line. */
function reconciliationPanel(data) {
  const overhead = data.overhead || [];
  if ((data.file_bytes === null || data.file_bytes === undefined) && !overhead.length) {
    return panel("Reconciliation", "", el("div", { class: "hint" },
      "Recorded from live variables: no file to reconcile with. Use `tb-modelmem inspect FILE --logdir DIR` for checkpoints and model files."));
  }
  const row = (label, bytes, cls) => el("tr", { class: cls || "" }, el("td", {}, name(label)), el("td", { class: "num" }, formatBytesFull(bytes)));
  const table = el("table", { class: "recon", testid: "reconciliation" }, row("Variables", data.total_bytes));
  let sum = data.total_bytes || 0;
  for (const line of overhead) {
    table.append(row(line.what, line.bytes));
    sum += line.bytes || 0;
  }
  if (data.file_bytes !== null && data.file_bytes !== undefined) {
    const diff = data.file_bytes - sum;
    table.append(row("File on disk", data.file_bytes, "sum"));
    table.append(el("tr", {}, el("td", { colspan: "2", class: diff === 0 ? "ok" : "err-text" },
      diff === 0 ? "✓ reconciled to the byte" : `${formatInt(diff)} B (${formatHuman(diff)}) not explained by the lines above`)));
  } else {
    table.append(row("Sum", sum, "sum"));
  }
  return panel("Reconciliation", "bytes on disk, line by line", table);
}

function layerChartOption(layers) {
  const names = layers.map((l) => l.layer || NO_LAYER);
  return {
    grid: { left: 8, right: 24, top: 28, bottom: 8, containLabel: true },
    legend: { top: 0, left: 0, itemWidth: 12, itemHeight: 10, data: ROLES.map((r) => ROLE_LABEL[r]) },
    tooltip: { trigger: "axis", axisPointer: { type: "shadow" }, formatter: axisTooltip(formatHuman) },
    xAxis: bytesAxis(Math.max(0, ...layers.map((l) => l.total_bytes || 0))),
    yAxis: { type: "category", inverse: true, data: names, axisLabel: { formatter: (n) => isolate(ellipsize(n, 30)) },
      axisTick: { show: false } },
    series: ROLES.map((role) => ({
      name: ROLE_LABEL[role], type: "bar", stack: "bytes", barMaxWidth: 18,
      itemStyle: { color: ROLE_COLOR[role] }, data: layers.map((l) => l.bytes?.[role] ?? 0),
    })),
  };
}
