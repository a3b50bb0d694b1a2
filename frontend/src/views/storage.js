// "Storage": what the variables of one breakdown cost, by role, layer and variable.

import { el, message, name } from "../dom.js";
import {
  ellipsize, formatBytesFull, formatConfigValue, formatHuman, formatInt, formatShape, formatWallTime, shortClassName, shortDevices,
} from "../format.js";
import { isolate } from "../bidi.js";
import { ROLES, ROLE_COLOR, ROLE_LABEL } from "../roles.js";
import { axisTooltip, bytesAxis, createChart } from "../charts.js";
import { createTable } from "../components/table.js";
import { filterTerm } from "../table-model.js";
import { classCell, classText, noClassKnown, treeButtons } from "../components/layer-cells.js";
import { chartBox, panel, roleCard, roleChip } from "../components/widgets.js";
import { createItemView } from "../components/item-view.js";
import { createCompare } from "../components/compare.js";
import { largestLayers, replicaBytes, replicaSpan } from "../aggregate.js";
import { optimizerSections, optimizerSource, sectionHeading } from "../optimizer.js";
import { sharedMarks } from "../shared.js";
import { busiestRow, devicesOf, isSharded, layoutText, shardText } from "../devices.js";
import { createDevicesPanel } from "../components/devices-panel.js";

const CHART_LAYERS = 30;
const NO_LAYER = "(no layer)"; // variables outside any layer (counters, beta powers, ...)

const VARIABLE_COLUMNS = [
  { key: "name", label: "Name", width: "minmax(220px, 3fr)", minWidth: 220, cutStart: true, render: (v) => name(v.name) },
  { key: "layer", label: "Layer", width: "minmax(120px, 1.5fr)", minWidth: 120, cutStart: true, render: (v) => name(v.layer) },
  { key: "shape", label: "Shape", width: "minmax(100px, 1fr)", sortKey: "params", value: (v) => v.params, text: (v) => formatShape(v.shape) },
  { key: "dtype", label: "Dtype", width: "80px", minWidth: 80 },
  { key: "params", label: "Params", width: "100px", numeric: true, text: (v) => formatInt(v.params) },
  { key: "bytes", label: "Bytes", width: "120px", numeric: true, text: (v) => replicaBytes(v.bytes, v.replicas, formatInt),
    title: "bytes of all its copies: a variable mirrored on N devices (MirroredStrategy) counts N times" },
  { key: "role", label: "Role", width: "130px", minWidth: 130, render: (v) => roleChip(v.role) },
  { key: "slot", label: "Slot", width: "90px", minWidth: 70 },
  { key: "slot_of", label: "Slot of", width: "minmax(120px, 1.5fr)", minWidth: 120, render: (v) => name(v.slot_of ?? "") },
  { key: "device", label: "Device", width: "minmax(90px, 1fr)", text: (v) => (v.replicas > 1 ? `${v.replicas} replicas: ${v.device}` : v.device),
    render: (v) => (v.replicas > 1 ? el("span", {}, el("b", {}, `×${v.replicas} `), shortDevices(v.device)) : shortDevices(v.device)) },
];
// Mirrored variables: the Bytes cell says how its figure is made ("2 × 1,384,448 = 2,768,896"), and needs the room.
const MIRRORED_COLUMNS = VARIABLE_COLUMNS.map((c) => (c.key === "bytes" ? { ...c, width: "200px", minWidth: 200 }
  : c.key === "device" ? { ...c, width: "minmax(150px, 1fr)", minWidth: 150 } : c));
// Sharded variables: the Device cell says how a variable is split and what one device holds of it
// ("4 shards ×2 replicas · 4.00 MiB per device", every device in its tooltip); a replicated one reads as above.
// Its room comes from the other columns, so that at 1400 px the table still fits without scrolling sideways.
const SHARDED_WIDTHS = { name: ["minmax(170px, 3fr)", 170], layer: ["minmax(100px, 1.5fr)", 100], dtype: ["70px", 70],
  params: ["90px", 90], bytes: ["190px", 190], role: ["120px", 120], slot: ["84px", 84], slot_of: ["minmax(100px, 1.5fr)", 100] };
const SHARDED_COLUMNS = MIRRORED_COLUMNS.map((c) => (SHARDED_WIDTHS[c.key]
  ? { ...c, width: SHARDED_WIDTHS[c.key][0], minWidth: SHARDED_WIDTHS[c.key][1] }
  : c.key !== "device" ? c : { ...c, width: "minmax(276px, 2fr)", minWidth: 276,
  text: (v) => (shardText(v) ? `${shardText(v)}: ${v.device}` : c.text(v)),
  render: (v) => (shardText(v) ? el("span", { testid: "shard-cell" }, shardText(v)) : c.render(v)) }));
const variableColumns = (replicas, sharded) => (sharded ? SHARDED_COLUMNS : replicas.max > 1 ? MIRRORED_COLUMNS : VARIABLE_COLUMNS);


// A layer shared by two parents (shared.js): its second path's row reads "shared", a parent reaching it "+N shared".
// Marks are per answer's rows: set in render, read by the Params column.
const SHARED = new WeakMap();

function paramsText(l) {
  const mark = SHARED.get(l);
  return mark ? `${formatInt(l.params)} ${mark.text}: ${mark.title}` : formatInt(l.params);
}

function paramsCell(l) {
  const mark = SHARED.get(l);
  if (!mark) return formatInt(l.params);
  return el("span", {}, formatInt(l.params), " ", el("i", { class: "why shared-mark", testid: "shared-mark", title: mark.title }, mark.text));
}

const LAYER_COLUMNS = [
  { key: "layer", label: "Layer", width: "minmax(200px, 2fr)", minWidth: 200, text: (l) => l.layer || NO_LAYER,
    render: (l) => name(l.layer ? l.label : NO_LAYER) },
  { key: "class_name", label: "Class", width: "minmax(100px, 1fr)", text: (l) => classText(l, false), render: (l) => classCell(l, false) },
  { key: "params", label: "Params", width: "110px", numeric: true, text: paramsText, render: paramsCell,
    title: "parameters; a layer shared by two parents is counted once, at the path holding its variables" },
  { key: "derivation", label: "Derivation", width: "minmax(200px, 2.5fr)", minWidth: 200 },
  ...ROLES.map((role) => ({
    key: role, label: ROLE_LABEL[role], width: "120px", numeric: true,
    value: (l) => l.bytes?.[role] ?? 0, text: (l) => formatInt(l.bytes?.[role] ?? 0),
  })),
  { key: "total_bytes", label: "Total bytes", width: "120px", numeric: true, text: (l) => formatInt(l.total_bytes) },
];
const LAYER_SETS = new Map(); // the same array for the same data shape, so a refresh keeps the sort

/**
 * The layer columns: "unknown" classes when the breakdown names none (`noneKnown`); with variables
 * mirrored `replicas` times (all alike), each byte figure says it sums that many copies; a wider Params
 * column where a layer is shared (`shared`: "+1,234 shared" beside the count).
 */
function layerColumns(noneKnown, replicas, shared) {
  const key = `${noneKnown}|${replicas}|${shared}`;
  if (LAYER_SETS.has(key)) return LAYER_SETS.get(key);
  const summed = (c) => ({ ...c, width: c.key === "total_bytes" ? "130px" : c.width, title: `summed over ${replicas} replicas (one copy per device)`,
    text: (l) => {
      const b = c.key === "total_bytes" ? l.total_bytes : l.bytes?.[c.key] ?? 0;
      return b ? `${formatInt(b)} (×${replicas})` : "0";
    } });
  const columns = LAYER_COLUMNS.map((c) => (c.key === "class_name" && noneKnown
    ? { ...c, text: (l) => classText(l, true), render: (l) => classCell(l, true) }
    : replicas > 1 && (ROLES.includes(c.key) || c.key === "total_bytes") ? summed(c)
      : shared && c.key === "params" ? { ...c, width: "180px" } : c));
  LAYER_SETS.set(key, noneKnown || replicas > 1 || shared ? columns : LAYER_COLUMNS);
  return LAYER_SETS.get(key);
}

export function createStorageView({ api, loader, shared }) {
  const cards = el("div", { class: "cards" });
  const replicasNote = el("div", { class: "msg info", testid: "replicas-note" });
  replicasNote.hidden = true;
  const perDevice = createDevicesPanel();
  const extras = el("div", { class: "grid2", style: { marginBottom: "12px" } });
  const chartEl = chartBox();
  const chart = createChart(chartEl, (layer) => showLayer(layer === NO_LAYER ? "" : layer));
  const chartPanel = panel("Bytes per layer", " ", chartEl);
  const chartTitle = chartPanel.querySelector("h2 small");
  // A click on a layer (row or bar) lists its variables; slots carry their weight's layer.
  const showLayer = (layer) => layer && variables.setFilter(filterTerm("layer", "^=", layer) || layer);
  const layers = createTable({ testid: "layer-table", mode: "tree", columns: LAYER_COLUMNS, label: "Layers",
    placeholder: "Filter layers", rowAction: "lists the layer's variables",
    // the model's own row (a PyTorch model's class) holds every layer, whose paths are not under it
    onRowClick: (row) => (row.whole_model ? variables.setFilter("") : showLayer(row.layer)),
    toolbar: treeButtons(() => layers) });
  const variables = createTable({ testid: "variable-table", mode: "remote", columns: VARIABLE_COLUMNS, label: "Variables",
    sort: { key: "bytes", direction: "desc" }, placeholder: "Filter variables, e.g. conv2d role:slot" });
  const body = el("div", {}, replicasNote, cards, perDevice.element, extras,
    chartPanel,
    panel("Layers", "composite layers sum their sublayers; click a layer to list its variables", layers.element),
    panel("Variables", "sorted and filtered by the server; click a header to sort", variables.element));
  const compare = createCompare({ api, loader });
  let treeOf = "";
  let shownKey = ""; // the answer whose pages the table shows: pages of another stop being asked for

  function render(data, item) {
    const replicas = replicaSpan(data.variables?.rows);
    const devices = devicesOf(data);
    const sharded = isSharded(devices); // some variable split over devices: not MirroredStrategy's copies
    replicasNote.replaceChildren(...(sharded ? shardedText(devices) : replicasText(replicas, data)));
    replicasNote.hidden = !sharded && replicas.max <= 1;
    perDevice.show(devices);
    variables.setColumns(variableColumns(replicas, sharded), { key: "bytes" });
    const rows = data.layers || [];
    const marks = sharedMarks(rows);
    for (const row of rows) if (marks.has(row.layer)) SHARED.set(row, marks.get(row.layer));
    layers.setColumns(layerColumns(noClassKnown(data.layers), !sharded && replicas.min === replicas.max ? replicas.max : 1, marks.size > 0),
      { key: "" });
    if (sharded) renderShardedCards(cards, data, devices);
    else renderCards(cards, data, replicas);
    extras.replaceChildren(optimizerPanel(data.optimizer, data.optimizer_summary, data.source), reconciliationPanel(data));
    const leaves = rows.filter((l) => l.leaf);
    const charted = largestLayers(leaves, CHART_LAYERS);
    chartTitle.textContent = charted.length < leaves.length
      ? `the ${CHART_LAYERS} largest of ${formatInt(leaves.length)} layers; optimizer slots are charged to the layer of their weight`
      : "optimizer slots are charged to the layer of their weight";
    chart.set(layerChartOption(charted), layerChartText(charted, leaves.length));
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


function metaLine(data) {
  const parts = [];
  if (data.model_name) parts.push(el("b", {}, name(data.model_name)));
  parts.push(`${data.source || "unknown source"} · step ${formatInt(data.step)}`);
  if (data.wall_time) parts.push(formatWallTime(data.wall_time));
  parts.push(modelParamsText(data));
  return parts.flatMap((p, i) => (i ? [" · ", p] : [p]));
}

/**
 * "41,483 params (41,450 trainable, 33 non-trainable)", as Keras' summary counts them: a PyTorch user's
 * model.parameters() count (the Weights card's) beside the buffers and frozen ones it leaves out.
 */
function modelParamsText(data) {
  const trainable = data.params_by_role?.weight;
  const rest = Number.isFinite(trainable) ? data.total_params - trainable : 0;
  return rest > 0 ? `${formatInt(data.total_params)} params (${formatInt(trainable)} trainable, ${formatInt(rest)} non-trainable)`
    : `${formatInt(data.total_params)} params`;
}

/** MirroredStrategy: the bytes on this page sum every replica; said once, where the figures start. */
function replicasText(replicas, data) {
  if (replicas.max <= 1) return [];
  const devices = shortDevices(data.variables?.rows?.find((r) => r.replicas === replicas.max)?.device);
  const n = replicas.min === replicas.max ? `${replicas.max}` : `${replicas.min} to ${replicas.max}`;
  return [`Mirrored variables (MirroredStrategy, or data parallel): every variable has ${n} replicas, one per device${devices ? ` (${devices})` : ""}. `,
    `Every byte figure on this page sums all of them${replicas.min === replicas.max ? `: one device holds 1/${replicas.max} of it` : ""}.`];
}

function renderCards(container, data, replicas) {
  const totals = data.totals || {};
  const total = data.total_bytes ?? ROLES.reduce((s, r) => s + (totals[r] || 0), 0);
  const mirrored = replicas.max > 1 ? `summed over ${replicas.min === replicas.max ? replicas.max : `${replicas.min}–${replicas.max}`} replicas` : "";
  // one decimal, and a share that is not 0 never reads 0.0% (12 B of counters beside 37 MiB of weights and slots)
  const percent = (b) => (b > 0 && (100 * b) / total < 0.05 ? "<0.1%" : `${((100 * b) / total).toFixed(1)}%`);
  const share = (b) => [total ? `${percent(b)} of total` : "", mirrored].filter(Boolean).join(" · ");
  // each role's own count (an older answer: the total); the header's total counts non-trainable state, as Keras'
  const params = (role) => data.params_by_role?.[role] ?? (role === "weight" ? data.total_params : 0);
  container.replaceChildren(
    roleCard("total-weight", "weight", totals.weight || 0, `${formatInt(params("weight"))} params · ${share(totals.weight || 0)}`),
    roleCard("total-non_trainable", "non_trainable", totals.non_trainable || 0,
      [params("non_trainable") ? `${formatInt(params("non_trainable"))} values` : "", share(totals.non_trainable || 0)]
        .filter(Boolean).join(" · ")),
    roleCard("total-optimizer_slot", "optimizer_slot", totals.optimizer_slot || 0,
      [optimizerHint(data, totals), mirrored].filter(Boolean).join(" · ")),
    roleCard("total-other", "other", totals.other || 0, share(totals.other || 0)),
    roleCard("total-all", "total", total, [`${formatInt(data.variable_count)} variables`, mirrored].filter(Boolean).join(" · ")),
  );
}

/**
 * Sharded variables: the layer and variable tables sum every piece on every device, the cards count each
 * variable once (its global size), the Per device panel says what each device holds. Said once, at the top.
 */
function shardedText(devices) {
  return [`Sharded variables over ${formatInt(devices.rows.length)} devices: ${layoutText(devices)} (whole on every device). `,
    "The cards count every variable once (its global size), with what the busiest device holds; "
    + "the layer and variable tables sum every piece and copy on every device; Per device shows what each device holds."];
}

/** The cards of sharded variables: each role's global bytes (every variable once), and on the busiest device. */
function renderShardedCards(container, data, devices) {
  const logical = devices.logical || {};
  const busiest = busiestRow(devices) || {};
  const on = (role) => `on the busiest device: ${formatHuman(busiest[role] || 0)}`;
  const total = devices.logical_total ?? ROLES.reduce((s, r) => s + (logical[r] || 0), 0);
  container.replaceChildren(
    roleCard("total-weight", "weight", logical.weight || 0, `${formatInt(data.total_params)} params · ${on("weight")}`),
    roleCard("total-non_trainable", "non_trainable", logical.non_trainable || 0, on("non_trainable")),
    roleCard("total-optimizer_slot", "optimizer_slot", logical.optimizer_slot || 0,
      [optimizerHint(data, logical), on("optimizer_slot")].filter(Boolean).join(" · ")),
    roleCard("total-other", "other", logical.other || 0, on("other")),
    roleCard("total-all", "total", total, `${formatInt(data.variable_count)} variables, each once · ${on("total_bytes")}`),
  );
}

/** "2.00× weights (Adam)": the ratio users are asking about in the first place. */
function optimizerHint(data, totals) {
  const cls = shortClassName(data.optimizer?.class_name);
  if (!totals.weight) return cls || "";
  const ratio = `${((totals.optimizer_slot || 0) / totals.weight).toFixed(2)}× weights`;
  return cls ? `${ratio} (${cls})` : ratio;
}

/** Settings as a key/value list: [[key, text]]. */
function settingsList(settings, testid) {
  const list = el("dl", { class: "kv", testid });
  for (const [key, text] of settings) {
    list.append(el("div", {}, el("dt", { title: isolate(key) }, name(key)), el("dd", { title: isolate(text) }, name(text))));
  }
  return list;
}

/**
 * The optimizer: its class, its config in one line (optimizer_summary.text), then each optimizer's settings with
 * what it wraps under it (a LossScaleOptimizer's inner optimizer, a schedule); no raw JSON. A breakdown served
 * without a summary shows its config as it is.
 */
function optimizerPanel(optimizer, summary, source) {
  if (!optimizer) return panel("Optimizer", "", el("div", { class: "hint" }, "No optimizer recorded with this breakdown."));
  const hint = optimizerSource(optimizer, source);
  const heading = el("div", { class: "optimizer-class", testid: "optimizer-class" }, name(optimizer.class_name || "(unnamed)"));
  const described = optimizerSections(summary);
  if (!described) {
    const settings = Object.entries(optimizer.config || {}).map(([key, value]) => [key, formatConfigValue(value)]);
    return panel("Optimizer", hint, heading, settings.length ? settingsList(settings, "optimizer-config") : el("div", { class: "hint" }, "No config recorded."));
  }
  // one optimizer: the class line is its heading; several (a GAN's): each under its name
  const single = described.sections.filter((s) => s.depth === 0).length === 1;
  const sections = described.sections.map((section, i) => {
    const head = single && i === 0 ? null : el("div", { class: "optimizer-heading" }, name(sectionHeading(section)));
    const settings = section.settings.length ? settingsList(section.settings, i === 0 ? "optimizer-config" : undefined)
      : el("div", { class: "hint" }, "no plain settings");
    return el("div", { class: "optimizer-section", testid: "optimizer-section", style: { marginLeft: `${16 * section.depth}px` } },
      head, settings);
  });
  return panel("Optimizer", hint, heading,
    described.text ? el("div", { class: "optimizer-summary", testid: "optimizer-summary", title: isolate(described.text) },
      message(described.text)) : null,
    sections);
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

/** The chart in words: each layer's bytes by role, largest first in the summary, in model order as bars. */
function layerChartText(layers, of) {
  const words = (l) => `${l.layer || NO_LAYER}: ${formatHuman(l.total_bytes)}`
    + `${ROLES.filter((r) => l.bytes?.[r]).map((r) => `, ${ROLE_LABEL[r].toLowerCase()} ${formatHuman(l.bytes[r])}`).join("")}`;
  const largest = [...layers].sort((a, b) => (b.total_bytes || 0) - (a.total_bytes || 0));
  return {
    label: `Bytes per layer${layers.length < of ? `, the ${layers.length} largest of ${formatInt(of)} layers` : ""}`,
    summary: `largest first: ${largest.map(words).join("; ")}.`,
    items: layers.map((l, i) => ({ name: l.layer || NO_LAYER, text: `${i + 1} of ${layers.length}: ${words(l)}` })),
    action: "list the layer's variables",
  };
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
