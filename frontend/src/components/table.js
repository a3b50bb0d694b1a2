// A sortable, filterable table that renders only the rows in view, so 200,000
// rows scroll smoothly. Rows come from a source (table-sources.js): in memory,
// a layer tree, or pages from the server. Rows have one fixed height; long text
// is ellipsised with the full text in the tooltip; every cell isolates its text
// (bidi) so a name cannot reverse its neighbours.

import { el } from "../dom.js";
import { formatInt } from "../format.js";
import { cellText, nextSort } from "../table-model.js";
import { createLocalSource, createRemoteSource, createTreeSource } from "../table-sources.js";
import { scrollToShow, viewportHeight, visibleRange } from "../virtual.js";

const ROW_HEIGHT = 26;
const INDENT = 16; // px per tree level
const REMOTE_FILTER_DELAY = 250; // ms of no typing before the server is asked

/**
 * columns: [{key, label, width, minWidth, numeric, left, title, value(row), text(row),
 *            render(row) -> Node, sortKey (server field to sort by), filterKey,
 *            cutStart (a path: a cell too narrow drops its start, "…/MatMul_grad/MatMul_1", not its end)}]
 * mode: "local" (setRows), "tree" (setRows; depth-first layer rows), "remote" (setItem).
 * onRowClick(row): what a click on a row does; `rowAction` says it in words ("list the layer's ops").
 * rowClass(row): extra classes of a row (e.g. "unattributed").
 * Sort, filter, expand state and scroll position survive refreshes, so live
 * updates do not disturb what the user is looking at.
 *
 * Keyboard: the rows of a table that acts on them (or of a tree) are one Tab stop; the arrow
 * keys, Home, End, Page Up/Down move between rows (scrolling the rows in view), Enter or Space
 * does what a click does, and in a tree → and ← open and close a layer.
 */
export function createTable({
  testid, columns, mode = "local", sort = {}, maxHeight = 420, placeholder = "Filter", label = "Table",
  highlight, onRowClick, rowAction, rowClass, pinLast, treeBudget, toolbar = [],
}) {
  const keyed = Boolean(onRowClick) || mode === "tree";
  // What the table's parts below share: its options, its elements, and where the user is.
  const t = {
    columns, mode, sort, maxHeight, highlight, onRowClick, rowClass, keyed,
    state: initialSort(sort),
    stood: false, // the sort is a stand-in: its column left with an item, and comes back with the next one
    query: "",
    scope: "", // a filter term the owner adds to what the user typed (the Ops view's device)
    frame: 0,
    typing: 0,
    cursor: 0, // the row the keyboard is on: the rows' one Tab stop
  };
  t.source = mode === "tree" ? createTreeSource({ pinLast, budget: treeBudget })
    : mode === "remote" ? createRemoteSource({ onChange: () => schedule(t, true) })
      : createLocalSource();
  Object.assign(t, tableElements({ testid, mode, keyed, label, placeholder, toolbar, onRowClick, rowAction }));
  layoutColumns(t);
  if (keyed) {
    t.rows.addEventListener("keydown", (event) => onKey(t, event));
    t.rows.addEventListener("focusin", (event) => {
      const row = event.target.closest?.(".table-row[data-index]");
      if (row) t.cursor = Number(row.dataset.index);
    });
  }
  t.filter.addEventListener("input", () => {
    t.query = t.filter.value;
    clearTimeout(t.typing);
    if (mode !== "remote") restart(t);
    else t.typing = setTimeout(() => restart(t), REMOTE_FILTER_DELAY);
  });
  t.scroller.addEventListener("scroll", () => schedule(t, false));
  refresh(t);
  return tableApi(t);
}

/** What the table's owner may do with it. */
function tableApi(t) {
  return {
    element: t.element,
    /** local and tree modes; `fresh`: a new tree opens its default levels. */
    setRows(next, fresh = false) {
      t.source.setRows(next || [], fresh);
      refresh(t);
    },
    /** remote mode: the item `key` whose pages fetchPage(page) returns; `first` a page already at hand. */
    setItem(key, fetchPage, first) {
      t.source.setItem(key, fetchPage, first);
      refresh(t);
    },
    /** Set the filter box as if the user typed `text`, and show the table. */
    setFilter(text) {
      t.filter.value = text;
      t.query = text;
      clearTimeout(t.typing);
      restart(t);
      t.element.scrollIntoView({ behavior: "smooth", block: "nearest" });
    },
    /** A filter term added to whatever the user types ("device=/device:CPU:3"); "" for none. */
    setScope(term) {
      if ((term || "") === t.scope) return;
      t.scope = term || "";
      restart(t);
    },
    /** Swap the column set (e.g. drop a column the data has nothing for); `fallback` sorts when the sorted column went. */
    setColumns(next, fallback = {}) {
      if (next.length === t.columns.length && next.every((c, i) => c === t.columns[i])) return;
      t.columns = next;
      const initial = initialSort(t.sort);
      if (t.stood && initial.key && t.columns.some((c) => c.key === initial.key)) {
        t.state = initial; // an item with op times after one without: sorted by time again, as the table began
        t.stood = false;
      } else if (t.state.key && !t.columns.some((c) => c.key === t.state.key)) {
        t.stood = !t.columns.some((c) => c.key === t.sort.key);
        t.state = t.stood ? { key: fallback.key || "", direction: fallback.direction || "desc" } : initial;
      }
      layoutColumns(t);
      refresh(t);
    },
    /** Back to the sort the table started with (a tree: model order). */
    resetSort() {
      t.state = initialSort(t.sort);
      t.stood = false;
      restart(t);
    },
    expandAll() {
      t.source.expandAll?.();
      refresh(t);
    },
    collapseAll() {
      t.source.collapseAll?.();
      refresh(t);
    },
  };
}

function initialSort(sort) {
  return { key: sort.key || "", direction: sort.direction || "desc" };
}

/** The table's elements: its tools (filter box, row count, toolbar), its head and its rows. */
function tableElements({ testid, mode, keyed, label, placeholder, toolbar, onRowClick, rowAction }) {
  const filter = el("input", { type: "search", placeholder, "aria-label": `Filter ${label.toLowerCase()}`, testid: `${testid}-filter` });
  const count = el("span", { class: "count", testid: `${testid}-count`, "aria-live": "polite" });
  const head = el("div", { class: "table-head", role: "row", "aria-rowindex": 1 });
  const rows = el("div", { class: "table-rows", role: "rowgroup" });
  const body = el("div", { class: "table-body" }, rows);
  const scroller = el("div", { class: "table-scroll" }, head, body);
  const tools = el("div", { class: "table-tools" }, filter, count, el("span", { class: "spacer" }), toolbar);
  const element = el("div", { class: "table", testid, role: mode === "tree" ? "treegrid" : keyed ? "grid" : "table", "aria-label": label,
    "aria-description": keyed ? `arrow keys move between rows${onRowClick ? `, Enter ${rowAction || "picks the row"}` : ""}`
      + `${mode === "tree" ? ", right and left arrows open and close a row" : ""}` : undefined }, tools, scroller);
  return { filter, count, head, rows, body, scroller, element };
}

function layoutColumns(t) {
  t.element.style.setProperty("--cols", t.columns.map((c) => c.width || "minmax(80px, 1fr)").join(" "));
  t.element.style.setProperty("--minw", `${t.columns.reduce((w, c) => w + (c.minWidth || 90), 0)}px`);
}

// A new sort or filter starts at the top; a data refresh keeps the scroll position.
function restart(t) {
  t.scroller.scrollTop = 0;
  refresh(t);
}

function schedule(t, recount) {
  if (recount) t.frame = t.frame || requestAnimationFrame(() => { t.frame = 0; layout(t); paint(t); });
  else t.frame = t.frame || requestAnimationFrame(() => { t.frame = 0; paint(t); });
}

function renderHead(t) {
  t.head.replaceChildren(...t.columns.map((c) => {
    const button = el("button", { class: alignRight(c) ? "num" : "", title: c.title || c.label, role: "columnheader" }, c.label);
    if (t.state.key === c.key) button.setAttribute("aria-sort", t.state.direction === "asc" ? "ascending" : "descending");
    button.addEventListener("click", () => {
      t.state = nextSort(t.state, c);
      t.stood = false;
      restart(t);
    });
    return button;
  }));
}

function layout(t) {
  const n = t.source.count();
  const total = t.source.total();
  const note = t.source.note();
  t.count.textContent = note || (n === total ? `${formatInt(total)} rows` : `${formatInt(n)} of ${formatInt(total)} rows`);
  t.count.classList.toggle("err-text", note.startsWith("could not"));
  t.element.setAttribute("aria-rowcount", String(n + 1)); // only the rows in view are in the page: say how many there are
  t.scroller.style.height = `${viewportHeight(n, ROW_HEIGHT, t.maxHeight) + ROW_HEIGHT + 2}px`;
  t.body.style.height = `${n * ROW_HEIGHT}px`;
}

function refresh(t) {
  t.source.update({ query: [t.query.trim(), t.scope].filter(Boolean).join(" "), sort: t.state, columns: t.columns });
  renderHead(t);
  layout(t);
  paint(t);
}

function paint(t) {
  const { source, scroller, rows } = t;
  const n = source.count();
  const range = visibleRange({ scrollTop: scroller.scrollTop, viewportHeight: scroller.clientHeight - ROW_HEIGHT,
    rowHeight: ROW_HEIGHT, rowCount: n });
  source.want(range.start, range.end);
  rows.style.top = `${range.offsetTop}px`;
  const focused = t.keyed && rows.contains(document.activeElement);
  // The Tab stop: the keyboard's row when it is drawn, else the first row in view.
  t.cursor = Math.min(t.cursor, Math.max(0, n - 1));
  const stop = t.cursor >= range.start && t.cursor < range.end ? t.cursor
    : Math.min(range.end - 1, Math.max(range.start, Math.floor(scroller.scrollTop / ROW_HEIGHT)));
  const nodes = [];
  for (let i = range.start; i < range.end; i++) nodes.push(renderRow(t, i, i === stop));
  if (!n && !source.note()) {
    nodes.push(el("div", { class: "table-empty" }, source.total() ? "No rows match the filter." : "No rows."));
  }
  rows.replaceChildren(...nodes);
  if (focused) rows.querySelector(`[data-index="${t.cursor}"]`)?.focus({ preventScroll: true }); // a redraw keeps the keyboard's place
}

/** Move the keyboard to row `index`: scrolled into view, drawn, focused. */
function moveTo(t, index) {
  const n = t.source.count();
  if (!n) return;
  t.cursor = Math.max(0, Math.min(n - 1, index));
  t.scroller.scrollTop = scrollToShow({ index: t.cursor, scrollTop: t.scroller.scrollTop, rowHeight: ROW_HEIGHT,
    viewportHeight: t.scroller.clientHeight - ROW_HEIGHT });
  paint(t);
  t.rows.querySelector(`[data-index="${t.cursor}"]`)?.focus({ preventScroll: true });
}

function onKey(t, event) {
  const { source, onRowClick } = t;
  const target = event.target.closest?.(".table-row[data-index]");
  if (!target || event.target !== target || event.altKey || event.ctrlKey || event.metaKey) return; // a toggle button keeps its keys
  const index = Number(target.dataset.index);
  const page = Math.max(1, Math.floor((t.scroller.clientHeight - ROW_HEIGHT) / ROW_HEIGHT) - 1);
  const moves = { ArrowDown: index + 1, ArrowUp: index - 1, Home: 0, End: source.count() - 1, PageDown: index + page,
    PageUp: index - page };
  const node = t.mode === "tree" ? source.node(index) : null;
  if (event.key in moves) moveTo(t, moves[event.key]);
  else if ((event.key === "Enter" || event.key === " ") && onRowClick && source.row(index)) onRowClick(source.row(index));
  else if (node?.hasChildren && ((event.key === "ArrowRight" && !node.expanded) || (event.key === "ArrowLeft" && node.expanded))) {
    source.toggle(node.key);
    refresh(t);
  } else return;
  event.preventDefault();
}

function renderRow(t, i, tabStop) {
  const { keyed, onRowClick } = t;
  const row = t.source.row(i);
  if (!row) return el("div", { class: "table-row pending", role: "row", "aria-busy": "true" }, el("div", { class: "cell" }, "…"));
  const node = t.mode === "tree" ? t.source.node(i) : null;
  const cells = t.columns.map((c, index) => {
    const text = cellText(c, row);
    const cls = ["cell", alignRight(c) ? "num" : "", c.cutStart && !(node && index === 0) ? "cut-start" : ""].filter(Boolean).join(" ");
    const cell = el("div", { class: cls, title: text, role: index ? (keyed ? "gridcell" : "cell") : "rowheader" });
    if (node && index === 0) cell.append(treeToggle(t, node), el("span", { class: "tree-label" }, c.render ? c.render(row) : text));
    else if (c.render) cell.append(c.render(row));
    else cell.textContent = text;
    if (node && index === 0) cell.style.paddingLeft = `${8 + node.depth * INDENT}px`;
    return cell;
  });
  const classes = ["table-row", t.highlight?.(row) ? "hl" : "", onRowClick ? "clickable" : "", row.group !== undefined && !row.layer ? "group" : "",
    t.rowClass?.(row) || ""].filter(Boolean).join(" ");
  const attrs = { class: classes, role: "row", onclick: onRowClick && (() => onRowClick(row)), "aria-rowindex": i + 2 };
  if (keyed) Object.assign(attrs, { tabindex: tabStop ? "0" : "-1", "data-index": i });
  if (node) Object.assign(attrs, { "aria-level": node.depth + 1, "aria-expanded": node.hasChildren ? String(node.expanded) : undefined });
  return el("div", attrs, cells);
}

function treeToggle(t, node) {
  if (!node.hasChildren) return el("span", { class: "tree-toggle leaf" });
  // One Tab stop per table: the row's arrow keys open and close it, the button is for the mouse.
  const button = el("button", { class: "tree-toggle", "aria-label": node.expanded ? "Collapse" : "Expand", title: node.expanded ? "Collapse" : "Expand",
    tabindex: "-1" }, node.expanded ? "▾" : "▸");
  button.addEventListener("click", (event) => {
    event.stopPropagation(); // a toggle is not a row click
    t.source.toggle(node.key);
    refresh(t);
  });
  return button;
}

function alignRight(column) {
  return column.numeric && !column.left;
}
