// "What if": the traced step projected to another batch size, sequence length, optimizer, precision policy, or
// spread over devices (the state replicated or sharded), and the largest batch that fits a budget. Every figure says how it was made
// (measured, computed, scaled, kept, moved) and what the trace cannot tell is "unknown" with the reason.

import { el, name, option } from "../dom.js";
import { formatBytesKnown, formatInt, formatIntKnown, formatMicros, isKnown, UNKNOWN } from "../format.js";
import {
  bandLine, budgetLine, movedLine, projectionHeadline, projectionRows, reservedRow, stepsLine, tracedLine, whatifParams,
} from "../projection.js";
import { createTable } from "../components/table.js";
import { categoryChip, errorBox, panel } from "../components/widgets.js";
import { createItemView, sameItem } from "../components/item-view.js";
import { passedOverNote } from "../selection.js";
import { SHARDINGS, SHARDING_LABEL } from "../devices.js";

// Their least widths fit a 1024 px window in TensorBoard (the figures' columns a GiB figure's exact bytes); a
// Basis cut short is read whole below the table by clicking its row.
const COLUMNS = [
  { key: "label", label: "Category", width: "minmax(170px, 1fr)", minWidth: 170, render: (r) => categoryChip(r.category) },
  { key: "traced", label: "Traced", width: "210px", numeric: true, text: (r) => formatBytesKnown(r.traced) },
  { key: "projected", label: "Projected", width: "210px", numeric: true, text: (r) => formatBytesKnown(r.projected) },
  { key: "how", label: "How", width: "80px", minWidth: 80 },
  { key: "formula", label: "Basis", width: "minmax(240px, 4fr)", minWidth: 240, render: (r) => name(r.formula) },
];
// Where the projected peak falls at another moment: what the traced step held then, each figure's basis, beside
// the traced peak's; both in bytes only, so the table still fits a 1024 px window.
const exactBytes = (n) => (isKnown(n) ? `${formatInt(n)} B` : UNKNOWN);
const MOVED_COLUMNS = [COLUMNS[0],
  { key: "traced", label: "Traced", width: "110px", numeric: true, text: (r) => exactBytes(r.traced),
    title: "What the traced step held at its own peak" },
  { key: "then", label: "Traced then", width: "110px", numeric: true, text: (r) => exactBytes(r.then),
    title: "What the traced step held at the moment the projected peak falls: what each figure is made from" },
  ...COLUMNS.slice(2)];

/** A row's figures and basis, whole: "Gradients, 23,298,088 B traced, 16,867,368 B projected (moved): ...". */
function basisWhole(row) {
  const then = isKnown(row.then) ? `, ${formatBytesKnown(row.then)} traced then` : "";
  return `${row.label}, ${formatBytesKnown(row.traced)} traced${then}, ${formatBytesKnown(row.projected)} projected`
    + `${row.how ? ` (${row.how})` : ""}: ${row.formula || "no basis for this row"}`;
}

export function createWhatIfView({ api, loader, shared }) {
  // The question, kept across item changes and set from outside (an OOM's "What would fit?" sets the budget).
  const form = Object.assign(shared.whatif, { batch: "", seq: "", optimizer: "", policy: "", devices: "1", shard: "",
    budget: "", ...shared.whatif });
  let askedForm = "";
  let shownForm = ""; // the question the fields were last set to: a poll must not undo what is being typed
  const fields = formFields();
  const { batch, seq, optimizer, policy, devices, shard, budget, controls } = fields;
  const out = resultParts();
  const status = el("div");
  const body = el("div", {},
    panel("What if", "project the traced step's peak before you run it", out.traced, controls, status), out.results);
  let current = null;
  let asked = 0;

  controls.addEventListener("submit", (event) => {
    event.preventDefault();
    Object.assign(form, { batch: batch.value, seq: seq.value, optimizer: optimizer.value, policy: policy.value,
      devices: devices.value, shard: shard.value, budget: budget.value });
    delete form.replicas; // the device count is `devices` now
    shownForm = JSON.stringify(form);
    if (current) ask(current);
  });

  function show(data) {
    fillChoices(fields, data.choices, form);
    showProjection(out, data);
  }

  /** The answer for the form's question about `item`, shown when it is still the latest asked. */
  async function ask(item) {
    const mine = ++asked;
    const params = whatifParams(form);
    askedForm = JSON.stringify(params);
    const key = `whatif\u0000${JSON.stringify([item.run, item.tag, item.step, item.host, item.breakdown, params])}`;
    status.replaceChildren(el("div", { class: "loading" }, "Projecting…"));
    try {
      const data = await loader.get(key, () => api.whatif(item, params), { keep: () => mine === asked });
      if (mine !== asked) return;
      status.replaceChildren();
      show(data);
    } catch (e) {
      if (mine !== asked || e?.name === "Cancelled") return;
      status.replaceChildren(errorBox(e.message, "What if"));
      out.results.hidden = true; // figures of another question must not stand under this one
    }
  }

  function render(data, item) {
    const asking = Object.keys(whatifParams(form)).length > 0;
    // A new step of the item shown keeps its last answer up until the question's comes; any other item's
    // as-traced answer is drawn at once, so no figure stands under pickers it is not of.
    if (!asking || !sameItem(current, item)) show(data);
    current = item;
    if (asking) ask(item); // the question asked of the last item, asked of this one
    else ++asked; // an answer about the last item, still on its way, must not be drawn over this one
    const whatif = data.whatif || {};
    return [`step ${formatIntKnown(data.step)} · traced peak `,
      el("b", {}, `${formatInt(whatif.traced?.peak_bytes)} B`)];
  }

  const view = createItemView({ api, loader, kind: "ops", route: "whatif", fetch: (item) => api.whatif(item, {}), body,
    render, shared: shared.ops, joins: true });
  return { ...view, update(listing) {
    const question = JSON.stringify(form);
    if (question !== shownForm) { // first shown, or set from outside meanwhile
      showForm(fields, form);
      shownForm = question;
    }
    if (current && JSON.stringify(whatifParams(form)) !== askedForm) ask(current); // set from outside meanwhile
    view.update(listing);
  } };
}

/** The question's fields and the form that holds them. */
function formFields() {
  const batch = el("input", { type: "number", min: "1", step: "1", testid: "whatif-batch", "aria-label": "Batch size",
    placeholder: "as traced" });
  const seq = el("input", { type: "number", min: "1", step: "1", testid: "whatif-seq", "aria-label": "Sequence length",
    placeholder: "as traced" });
  const optimizer = el("select", { testid: "whatif-optimizer", "aria-label": "Optimizer" });
  const policy = el("select", { testid: "whatif-policy", "aria-label": "Precision policy" });
  const devices = el("input", { type: "number", min: "1", step: "1", value: "1", testid: "whatif-devices",
    "aria-label": "Devices" });
  const shard = el("select", { testid: "whatif-shard", "aria-label": "Sharding" },
    option("", "as traced", true), ...SHARDINGS.map((s) => option(s, SHARDING_LABEL[s], false)));
  const budget = el("input", { type: "text", testid: "whatif-budget", "aria-label": "Memory budget per device",
    placeholder: "e.g. 16GiB" });
  const project = el("button", { type: "submit", testid: "whatif-project" }, "Project");
  const controls = el("form", { class: "toolbar whatif-form", testid: "whatif-form" },
    el("label", { title: "samples in one forward pass over all devices, split over them (under gradient accumulation a micro-batch, as traced)" }, "Batch", batch),
    el("label", { title: "tokens per sample: what carries the sequence grows with it, attention scores with its square" },
      "Sequence", seq),
    el("label", {}, "Optimizer", optimizer), el("label", {}, "Policy", policy),
    el("label", { title: "the devices the step is spread over: the batch is split over them" }, "Devices", devices),
    el("label", { title: "what is split over the devices besides the batch: nothing (each holds the whole state), "
      + "the optimizer state (ZeRO-1), also the gradients (ZeRO-2), also the weights (ZeRO-3 / FSDP)" }, "Sharding", shard),
    el("label", { title: "a device's memory: find the largest batch that fits" }, "Budget", budget), project);
  return { batch, seq, optimizer, policy, devices, shard, budget, controls };
}

/** The form's fields as the question `form` says (a select once it has its choices). */
function showForm({ batch, seq, optimizer, policy, devices, shard, budget }, form) {
  batch.value = form.batch;
  seq.value = form.seq ?? "";
  devices.value = form.devices ?? form.replicas ?? "1";
  shard.value = form.shard || "";
  budget.value = form.budget;
  for (const [select, value] of [[optimizer, form.optimizer], [policy, form.policy]]) {
    if (select.options.length) select.value = value;
  }
}

// torch.optim's implementations a PyTorch run's optimizer names end in, each offered under its own heading
const IMPLEMENTATIONS = [[" fused", "Fused kernel (no scratch)"], [" foreach", "Foreach: every parameter at once"]];

/** The optimizer and policy choices of the item shown (a PyTorch run's are torch.optim's; it and an XLA step
 * have no policy: ``choices.policy_note`` says why), refilled only when they change. A value the item does not offer
 * reads "as traced", in the menu and in the question (`form`) alike, so what is asked is what is shown. */
function fillChoices({ optimizer, policy }, choices, form) {
  const fill = (select, values, key) => {
    const offered = [...select.options].slice(1).map((o) => o.value);
    if (!select.options.length || offered.join("\0") !== values.join("\0")) {
      const keep = select.options.length ? select.value : form[key];
      const made = (v) => option(v, v === "momentum" ? "SGD with momentum" : v, v === keep);
      const grouped = IMPLEMENTATIONS.map(([ending, label]) =>
        [label, values.filter((v) => v.endsWith(ending))]).filter(([, members]) => members.length);
      const plain = values.filter((v) => !IMPLEMENTATIONS.some(([ending]) => v.endsWith(ending)));
      select.replaceChildren(option("", "as traced", !values.includes(keep)), ...plain.map(made),
        ...grouped.map(([label, members]) => el("optgroup", { label }, ...members.map(made))));
    }
    if (form[key] && !values.includes(form[key])) form[key] = "";
  };
  fill(optimizer, choices?.optimizers || [], "optimizer");
  fill(policy, choices?.policies || [], "policy");
  policy.disabled = !(choices?.policies || []).length;
  policy.title = choices?.policy_note || "";
  // a disabled menu says why on its face, not only on hover (autocast's or XLA's compiler's, not a policy)
  if (policy.options.length) policy.options[0].textContent = choices?.policy_as_traced || "as traced";
}

/** Where an answer is shown: the traced line, and the results (headline, notes, table by category). */
function resultParts() {
  const traced = el("div", { class: "meta", testid: "whatif-traced" });
  const headline = el("h2", { testid: "whatif-headline" });
  const moved = el("div", { class: "msg info", testid: "whatif-moved" });
  const fits = el("div", { class: "msg info", testid: "whatif-budget-line" });
  const spread = el("div", { class: "msg info", testid: "whatif-steps" });
  const band = el("div", { class: "msg info", testid: "whatif-band" });
  const basis = el("div", { class: "msg info", testid: "whatif-basis", "aria-live": "polite" });
  const passed = el("div", { class: "msg warn", role: "status", testid: "passed-over-note" });
  const parts = { traced, passed, headline, moved, fits, spread, band, basis, picked: "", rows: [] };
  const table = createTable({ testid: "whatif-table", columns: COLUMNS, label: "Projected peak by category",
    placeholder: "Filter categories", rowAction: "reads its basis whole below the table",
    highlight: (row) => row.category === parts.picked,
    onRowClick: (row) => { parts.picked = row.category; table.setRows(parts.rows); showBasis(parts); } });
  const caveat = el("small", { testid: "whatif-caveat" });
  const results = el("section", { class: "panel" }, headline, caveat, passed, spread, band, moved, fits, table.element,
    basis);
  passed.hidden = true;
  moved.hidden = true;
  band.hidden = true;
  fits.hidden = true;
  spread.hidden = true;
  return Object.assign(parts, { caveat, table, results });
}

/** The picked row's basis whole (a cell cuts a long one short), kept across answers while its row is there. */
function showBasis({ basis, picked, rows }) {
  const row = rows.find((r) => r.category === picked);
  basis.className = row ? "msg info" : "hint";
  basis.textContent = row ? basisWhole(row) : "Click a row to read its Basis whole.";
}

function showProjection(parts, data) {
  const { traced, passed, headline, caveat, moved, fits, spread, band, table, results } = parts;
  const whatif = data.whatif || {};
  traced.replaceChildren("Traced step: ", name(tracedLine(whatif)));
  passed.textContent = passedOverNote(data); // the state projected is the joined breakdown's
  passed.hidden = !passed.textContent;
  headline.textContent = projectionHeadline(whatif);
  caveat.textContent = whatif.caveat || ""; // how far this trace's figures can be trusted, as measured
  moved.hidden = !whatif.peak_moved;
  moved.textContent = movedLine(whatif);
  spread.textContent = stepsLine(whatif);
  spread.hidden = !spread.textContent;
  band.textContent = bandLine(whatif);
  band.hidden = !band.textContent;
  fits.hidden = !data.budget;
  fits.textContent = budgetLine(data.budget);
  const rows = projectionRows(whatif);
  const then = rows.some((r) => isKnown(r.then));
  parts.rows = [...rows, { category: "total", label: "Peak in use", traced: whatif.traced?.peak_bytes ?? null,
    then: then ? rows.reduce((sum, r) => sum + (r.then ?? 0), 0) : null,
    projected: whatif.peak_bytes ?? null, how: "", formula: whatif.peak_moved ? `at ${formatMicros(whatif.peak_time_us)} into the trace (traced: at ${formatMicros(whatif.traced?.peak_time_us)})` : "" },
  ...[reservedRow(whatif)].filter(Boolean)];
  table.setColumns(then ? MOVED_COLUMNS : COLUMNS);
  table.setRows(parts.rows);
  showBasis(parts);
  results.hidden = false;
}
