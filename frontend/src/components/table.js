// A sortable, filterable table that renders only the rows in view, so 200,000
// rows scroll smoothly. Rows come from a source (table-sources.js): in memory,
// a layer tree, or pages from the server. Rows have one fixed height; long text
// is ellipsised with the full text in the tooltip; every cell isolates its text
// (bidi) so a name cannot reverse its neighbours.

import { el } from "../dom.js";
import { formatInt } from "../format.js";
import { cellText, nextSort } from "../table-model.js";
import { createLocalSource, createRemoteSource, createTreeSource } from "../table-sources.js";
import { viewportHeight, visibleRange } from "../virtual.js";

const ROW_HEIGHT = 26;
const INDENT = 16; // px per tree level
const REMOTE_FILTER_DELAY = 250; // ms of no typing before the server is asked

/**
 * columns: [{key, label, width, minWidth, numeric, left, title, value(row), text(row),
 *            render(row) -> Node, sortKey (server field to sort by), filterKey}]
 * mode: "local" (setRows), "tree" (setRows; depth-first layer rows), "remote" (setItem).
 * Sort, filter, expand state and scroll position survive refreshes, so live
 * updates do not disturb what the user is looking at.
 */
export function createTable({
  testid, columns, mode = "local", sort = {}, maxHeight = 420, placeholder = "Filter", label = "Table",
  highlight, onRowClick, pinLast, treeBudget, toolbar = [],
}) {
  let state = { key: sort.key || "", direction: sort.direction || "desc" };
  let query = "";
  let frame = 0;
  let typing = 0;

  const source = mode === "tree" ? createTreeSource({ pinLast, budget: treeBudget })
    : mode === "remote" ? createRemoteSource({ onChange: () => schedule(true) })
      : createLocalSource();

  const filter = el("input", { type: "search", placeholder, "aria-label": `Filter ${label.toLowerCase()}`, testid: `${testid}-filter` });
  const count = el("span", { class: "count", testid: `${testid}-count`, "aria-live": "polite" });
  const head = el("div", { class: "table-head", role: "row" });
  const rows = el("div", { class: "table-rows", role: "rowgroup" });
  const body = el("div", { class: "table-body" }, rows);
  const scroller = el("div", { class: "table-scroll" }, head, body);
  const tools = el("div", { class: "table-tools" }, filter, count, el("span", { class: "spacer" }), toolbar);
  const element = el("div", { class: "table", testid, role: mode === "tree" ? "treegrid" : "table", "aria-label": label },
    tools, scroller);
  layoutColumns();

  function layoutColumns() {
    element.style.setProperty("--cols", columns.map((c) => c.width || "minmax(80px, 1fr)").join(" "));
    element.style.setProperty("--minw", `${columns.reduce((w, c) => w + (c.minWidth || 90), 0)}px`);
  }

  // A new sort or filter starts at the top; a data refresh keeps the scroll position.
  const restart = () => {
    scroller.scrollTop = 0;
    refresh();
  };
  filter.addEventListener("input", () => {
    query = filter.value;
    clearTimeout(typing);
    if (mode !== "remote") restart();
    else typing = setTimeout(restart, REMOTE_FILTER_DELAY);
  });
  scroller.addEventListener("scroll", () => schedule(false));

  function schedule(recount) {
    if (recount) frame = frame || requestAnimationFrame(() => { frame = 0; layout(); paint(); });
    else frame = frame || requestAnimationFrame(() => { frame = 0; paint(); });
  }

  function view() {
    return { query, sort: state, columns };
  }

  function renderHead() {
    head.replaceChildren(...columns.map((c) => {
      const button = el("button", { class: alignRight(c) ? "num" : "", title: c.title || c.label, role: "columnheader" }, c.label);
      if (state.key === c.key) button.setAttribute("aria-sort", state.direction === "asc" ? "ascending" : "descending");
      button.addEventListener("click", () => {
        state = nextSort(state, c);
        restart();
      });
      return button;
    }));
  }

  function layout() {
    const n = source.count();
    const total = source.total();
    const note = source.note();
    count.textContent = note || (n === total ? `${formatInt(total)} rows` : `${formatInt(n)} of ${formatInt(total)} rows`);
    count.classList.toggle("err-text", note.startsWith("could not"));
    scroller.style.height = `${viewportHeight(n, ROW_HEIGHT, maxHeight) + ROW_HEIGHT + 2}px`;
    body.style.height = `${n * ROW_HEIGHT}px`;
  }

  function refresh() {
    source.update(view());
    renderHead();
    layout();
    paint();
  }

  function paint() {
    const n = source.count();
    const range = visibleRange({ scrollTop: scroller.scrollTop, viewportHeight: scroller.clientHeight - ROW_HEIGHT,
      rowHeight: ROW_HEIGHT, rowCount: n });
    source.want(range.start, range.end);
    rows.style.top = `${range.offsetTop}px`;
    const nodes = [];
    for (let i = range.start; i < range.end; i++) nodes.push(renderRow(i));
    if (!n && !source.note()) {
      nodes.push(el("div", { class: "table-empty" }, source.total() ? "No rows match the filter." : "No rows."));
    }
    rows.replaceChildren(...nodes);
  }

  function renderRow(i) {
    const row = source.row(i);
    if (!row) return el("div", { class: "table-row pending", role: "row", "aria-busy": "true" }, el("div", { class: "cell" }, "…"));
    const node = mode === "tree" ? source.node(i) : null;
    const cells = columns.map((c, index) => {
      const text = cellText(c, row);
      const cell = el("div", { class: alignRight(c) ? "cell num" : "cell", title: text, role: index ? "cell" : "rowheader" });
      if (node && index === 0) cell.append(treeToggle(node), el("span", { class: "tree-label" }, c.render ? c.render(row) : text));
      else if (c.render) cell.append(c.render(row));
      else cell.textContent = text;
      if (node && index === 0) cell.style.paddingLeft = `${8 + node.depth * INDENT}px`;
      return cell;
    });
    const classes = ["table-row", highlight?.(row) ? "hl" : "", onRowClick ? "clickable" : "", row.group !== undefined && !row.layer ? "group" : ""]
      .filter(Boolean).join(" ");
    const attrs = { class: classes, role: "row", onclick: onRowClick && (() => onRowClick(row)) };
    if (node) Object.assign(attrs, { "aria-level": node.depth + 1, "aria-expanded": node.hasChildren ? String(node.expanded) : undefined });
    return el("div", attrs, cells);
  }

  function treeToggle(node) {
    if (!node.hasChildren) return el("span", { class: "tree-toggle leaf" });
    const button = el("button", { class: "tree-toggle", "aria-label": node.expanded ? "Collapse" : "Expand", title: node.expanded ? "Collapse" : "Expand" },
      node.expanded ? "▾" : "▸");
    button.addEventListener("click", (event) => {
      event.stopPropagation(); // a toggle is not a row click
      source.toggle(node.key);
      refresh();
    });
    return button;
  }

  refresh();

  return {
    element,
    /** local and tree modes; `fresh`: a new tree opens its default levels. */
    setRows(next, fresh = false) {
      source.setRows(next || [], fresh);
      refresh();
    },
    /** remote mode: the item `key` whose pages fetchPage(page) returns; `first` a page already at hand. */
    setItem(key, fetchPage, first) {
      source.setItem(key, fetchPage, first);
      refresh();
    },
    /** Set the filter box as if the user typed `text`, and show the table. */
    setFilter(text) {
      filter.value = text;
      query = text;
      clearTimeout(typing);
      restart();
      element.scrollIntoView({ behavior: "smooth", block: "nearest" });
    },
    /** Swap the column set (e.g. drop a column the data has nothing for); `fallback` sorts when the sorted column went. */
    setColumns(next, fallback = {}) {
      if (next.length === columns.length && next.every((c, i) => c === columns[i])) return;
      columns = next;
      if (state.key && !columns.some((c) => c.key === state.key)) {
        state = columns.some((c) => c.key === sort.key) ? { key: sort.key, direction: sort.direction || "desc" }
          : { key: fallback.key || "", direction: fallback.direction || "desc" };
      }
      layoutColumns();
      refresh();
    },
    /** Back to the sort the table started with (a tree: model order). */
    resetSort() {
      state = { key: sort.key || "", direction: sort.direction || "desc" };
      restart();
    },
    expandAll() {
      source.expandAll?.();
      refresh();
    },
    collapseAll() {
      source.collapseAll?.();
      refresh();
    },
  };
}

function alignRight(column) {
  return column.numeric && !column.left;
}
