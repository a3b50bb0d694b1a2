// Compare mode of the Storage view: totals by role of 2+ runs side by side
// (e.g. the same model trained with SGD and with Adam).

import { el, name } from "../dom.js";
import { ellipsize, formatHuman, formatInt } from "../format.js";
import { isolate } from "../bidi.js";
import { ROLES, ROLE_COLOR, ROLE_LABEL } from "../roles.js";
import { compareTotals } from "../aggregate.js";
import { axisTooltip, bytesAxis, createChart } from "../charts.js";
import { createTable } from "./table.js";
import { chartBox, errorBox, panel } from "./widgets.js";
import { compareTag, runsOfKind } from "../selection.js";

const COLUMNS = [
  { key: "run", label: "Run", width: "minmax(140px, 2fr)", minWidth: 140, render: (r) => name(r.run) },
  { key: "optimizer", label: "Optimizer", width: "minmax(90px, 1fr)" },
  ...ROLES.map((role) => ({ key: role, label: ROLE_LABEL[role], width: "130px", numeric: true, text: (r) => formatInt(r[role]) })),
  { key: "total", label: "Total bytes", width: "130px", numeric: true, text: (r) => formatInt(r.total) },
  { key: "ratio", label: "× smallest", width: "90px", numeric: true, text: (r) => (r.ratio === null ? "" : `${r.ratio.toFixed(2)}×`) },
];

/** A run's tick box: ticking adds it to `checked` (unticking removes it), then calls `changed`. */
function runCheckbox(run, checked, changed) {
  const box = el("input", { type: "checkbox", value: run, testid: "compare-run" });
  box.checked = checked.has(run);
  box.addEventListener("change", () => {
    if (box.checked) checked.add(run);
    else checked.delete(run);
    changed();
  });
  return el("label", {}, box, name(run));
}

export function createCompare({ api, loader }) {
  const checked = new Set();
  let listing = null;
  let preferredTag = "";
  let loadedKey = "";
  let token = 0;

  const runsBox = el("div", { class: "compare-runs" });
  const errors = el("div");
  const hint = el("div", { class: "hint", testid: "compare-hint" });
  hint.hidden = true;
  const chartEl = chartBox();
  const table = createTable({ testid: "compare-table", columns: COLUMNS, sort: { key: "run", direction: "asc" } });
  const result = el("div", {}, chartEl, table.element);
  result.hidden = true;
  const chart = createChart(chartEl);
  const element = panel("Compare runs", "tick two or more runs, e.g. SGD vs Adam", runsBox, hint, errors, result);
  element.dataset.testid = "compare";

  function renderRunList() {
    const runs = runsOfKind(listing, "breakdown").map((r) => r.run);
    element.hidden = runs.length < 2;
    for (const run of [...checked]) if (!runs.includes(run)) checked.delete(run);
    runsBox.replaceChildren(...runs.map((run) => runCheckbox(run, checked, load)));
  }

  async function load() {
    const runs = [...checked];
    hint.hidden = runs.length !== 1;
    hint.replaceChildren(...(runs.length === 1 ? ["Only ", name(runs[0]), " is ticked: a comparison needs two runs or more;"
      + " tick another to see them side by side (the figures below are the run picked above)."] : []));
    if (runs.length < 2) {
      ++token; // a comparison still on its way is no longer wanted
      result.hidden = true;
      errors.replaceChildren();
      loadedKey = "";
      return;
    }
    const items = runs.map((run) => ({ run, tag: compareTag(listing, run, preferredTag) })).filter((i) => i.tag);
    const stamp = (i) => runsOfKind(listing, "breakdown").find((r) => r.run === i.run)?.tags.find((t) => t.tag === i.tag)?.max_step;
    const key = JSON.stringify(items.map((i) => [i.run, i.tag, stamp(i)]));
    const mine = ++token; // the newest ticks win over a comparison still on its way
    if (key === loadedKey) return;
    // Through the loader: one request per run at a time, asked again while the server reduces it.
    const settled = await Promise.allSettled(items.map((i) => loader.get(
      `compare\u0000${i.run}\u0000${i.tag}\u0000${stamp(i)}`, () => api.breakdown({ run: i.run, tag: i.tag }),
      { keep: () => mine === token }).then((data) => ({ ...data, run: i.run, tag: i.tag }))));
    if (mine !== token) return;
    loadedKey = key;
    const ok = settled.filter((s) => s.status === "fulfilled").map((s) => s.value);
    errors.replaceChildren(...settled.map((s, i) => (s.status === "rejected" ? errorBox(s.reason.message, items[i].run, items[i].tag) : null))
      .filter(Boolean));
    const rows = compareTotals(ok);
    result.hidden = rows.length === 0;
    table.setRows(rows);
    chartEl.style.height = `${70 + 36 * rows.length}px`;
    chart.set(compareChartOption(rows), {
      label: "Bytes by role per run",
      summary: rows.map((r) => `${r.run}: ${formatHuman(r.total)}${r.ratio ? ` (${r.ratio.toFixed(2)}× the smallest)` : ""}`
        + `${ROLES.filter((role) => r[role]).map((role) => `, ${ROLE_LABEL[role].toLowerCase()} ${formatHuman(r[role])}`).join("")}`).join("; "),
    });
  }

  return {
    element,
    update(next) {
      listing = next;
      renderRunList();
      load();
    },
    /** The tag picked above: each run is compared at the same tag name where it has one. */
    prefer(tag) {
      if (tag === preferredTag) return;
      preferredTag = tag;
      if (listing) load();
    },
  };
}

function compareChartOption(rows) {
  return {
    grid: { left: 8, right: 24, top: 28, bottom: 8, containLabel: true },
    legend: { top: 0, left: 0, itemWidth: 12, itemHeight: 10 },
    tooltip: { trigger: "axis", axisPointer: { type: "shadow" }, formatter: axisTooltip(formatHuman) },
    xAxis: bytesAxis(Math.max(0, ...rows.map((r) => r.total))),
    yAxis: { type: "category", inverse: true, data: rows.map((r) => r.run), axisTick: { show: false },
      axisLabel: { formatter: (n) => isolate(ellipsize(n, 30)) } },
    series: ROLES.map((role) => ({
      name: ROLE_LABEL[role], type: "bar", stack: "bytes", barMaxWidth: 28,
      itemStyle: { color: ROLE_COLOR[role] }, data: rows.map((r) => r[role]),
    })),
  };
}
