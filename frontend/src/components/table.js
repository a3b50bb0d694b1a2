// A sortable, filterable table that renders only the rows in view, so 20,000
// rows scroll smoothly. Rows have one fixed height; long text is ellipsised
// with the full text in the tooltip.

import { el } from "../dom.js";
import { formatInt } from "../format.js";
import { cellText, filterRows, nextSort, sortRows } from "../table-model.js";
import { viewportHeight, visibleRange } from "../virtual.js";

const ROW_HEIGHT = 26;

/**
 * columns: [{key, label, width, minWidth, numeric, left, value(row), text(row), render(row) -> Node}]
 * (numeric: sorts largest first and aligns right unless `left`).
 * Sort, filter and scroll position survive setRows(), so live updates do not
 * disturb what the user is looking at.
 */
export function createTable({ testid, columns, sort = {}, maxHeight = 420, placeholder = "Filter", highlight, onRowClick }) {
  let allRows = [];
  let shown = [];
  let state = { key: sort.key, direction: sort.direction || "desc" };
  let query = "";
  let frame = 0;

  const filter = el("input", { type: "search", placeholder, "aria-label": "Filter rows", testid: `${testid}-filter` });
  const count = el("span", { class: "count" });
  const head = el("div", { class: "table-head", role: "row" });
  const rows = el("div", { class: "table-rows" });
  const body = el("div", { class: "table-body" }, rows);
  const scroller = el("div", { class: "table-scroll" }, head, body);
  const element = el("div", { class: "table", testid, role: "table" }, el("div", { class: "table-tools" }, filter, count), scroller);
  layoutColumns();

  function layoutColumns() {
    element.style.setProperty("--cols", columns.map((c) => c.width || "minmax(80px, 1fr)").join(" "));
    element.style.setProperty("--minw", `${columns.reduce((w, c) => w + (c.minWidth || 90), 0)}px`);
  }

  filter.addEventListener("input", () => {
    query = filter.value;
    refresh();
  });
  scroller.addEventListener("scroll", () => {
    if (!frame) frame = requestAnimationFrame(() => { frame = 0; paint(); });
  });

  function renderHead() {
    head.replaceChildren(...columns.map((c) => {
      const button = el("button", { class: alignRight(c) ? "num" : "", title: c.title || c.label, role: "columnheader" }, c.label);
      if (state.key === c.key) button.setAttribute("aria-sort", state.direction === "asc" ? "ascending" : "descending");
      button.addEventListener("click", () => {
        state = nextSort(state, c);
        refresh();
      });
      return button;
    }));
  }

  function refresh() {
    const column = columns.find((c) => c.key === state.key);
    shown = sortRows(filterRows(allRows, query, columns), column, state.direction);
    count.textContent = shown.length === allRows.length
      ? `${formatInt(allRows.length)} rows`
      : `${formatInt(shown.length)} of ${formatInt(allRows.length)} rows`;
    scroller.style.height = `${viewportHeight(shown.length, ROW_HEIGHT, maxHeight) + ROW_HEIGHT + 2}px`;
    body.style.height = `${shown.length * ROW_HEIGHT}px`;
    renderHead();
    paint();
  }

  function paint() {
    const range = visibleRange({
      scrollTop: scroller.scrollTop,
      viewportHeight: scroller.clientHeight - ROW_HEIGHT,
      rowHeight: ROW_HEIGHT,
      rowCount: shown.length,
    });
    rows.style.top = `${range.offsetTop}px`;
    const nodes = [];
    for (let i = range.start; i < range.end; i++) nodes.push(renderRow(shown[i]));
    if (!shown.length) nodes.push(el("div", { class: "table-empty" }, allRows.length ? "No rows match the filter." : "No rows."));
    rows.replaceChildren(...nodes);
  }

  function renderRow(row) {
    const cells = columns.map((c) => {
      const text = cellText(c, row);
      const cell = el("div", { class: alignRight(c) ? "cell num" : "cell", title: text, role: "cell" });
      if (c.render) cell.append(c.render(row));
      else cell.textContent = text;
      return cell;
    });
    const classes = ["table-row", highlight?.(row) ? "hl" : "", onRowClick ? "clickable" : ""].filter(Boolean).join(" ");
    return el("div", { class: classes, role: "row", onclick: onRowClick && (() => onRowClick(row)) }, cells);
  }

  return {
    element,
    setRows(next) {
      allRows = next || [];
      refresh();
    },
    /** Set the filter box as if the user typed `text`, and show the table. */
    setFilter(text) {
      filter.value = text;
      query = text;
      refresh();
      element.scrollIntoView({ behavior: "smooth", block: "nearest" });
    },
    /** Swap the column set (e.g. drop a column the data has nothing for). */
    setColumns(next) {
      if (next.length === columns.length && next.every((c, i) => c === columns[i])) return;
      columns = next;
      layoutColumns();
      refresh();
    },
  };
}

function alignRight(column) {
  return column.numeric && !column.left;
}
