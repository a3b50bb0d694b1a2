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
  let state = { key: sort.key || "", direction: sort.direction || "desc" };
  let stood = false; // the sort is a stand-in: its column left with an item, and comes back with the next one
  let query = "";
  let frame = 0;
  let typing = 0;
  let cursor = 0; // the row the keyboard is on: the rows' one Tab stop
  const keyed = Boolean(onRowClick) || mode === "tree";

  const source = mode === "tree" ? createTreeSource({ pinLast, budget: treeBudget })
    : mode === "remote" ? createRemoteSource({ onChange: () => schedule(true) })
      : createLocalSource();

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
  layoutColumns();
  if (keyed) {
    rows.addEventListener("keydown", onKey);
    rows.addEventListener("focusin", (event) => {
      const row = event.target.closest?.(".table-row[data-index]");
      if (row) cursor = Number(row.dataset.index);
    });
  }

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
        stood = false;
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
    element.setAttribute("aria-rowcount", String(n + 1)); // only the rows in view are in the page: say how many there are
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
    const focused = keyed && rows.contains(document.activeElement);
    // The Tab stop: the keyboard's row when it is drawn, else the first row in view.
    cursor = Math.min(cursor, Math.max(0, n - 1));
    const stop = cursor >= range.start && cursor < range.end ? cursor
      : Math.min(range.end - 1, Math.max(range.start, Math.floor(scroller.scrollTop / ROW_HEIGHT)));
    const nodes = [];
    for (let i = range.start; i < range.end; i++) nodes.push(renderRow(i, i === stop));
    if (!n && !source.note()) {
      nodes.push(el("div", { class: "table-empty" }, source.total() ? "No rows match the filter." : "No rows."));
    }
    rows.replaceChildren(...nodes);
    if (focused) rows.querySelector(`[data-index="${cursor}"]`)?.focus({ preventScroll: true }); // a redraw keeps the keyboard's place
  }

  /** Move the keyboard to row `index`: scrolled into view, drawn, focused. */
  function moveTo(index) {
    const n = source.count();
    if (!n) return;
    cursor = Math.max(0, Math.min(n - 1, index));
    scroller.scrollTop = scrollToShow({ index: cursor, scrollTop: scroller.scrollTop, rowHeight: ROW_HEIGHT,
      viewportHeight: scroller.clientHeight - ROW_HEIGHT });
    paint();
    rows.querySelector(`[data-index="${cursor}"]`)?.focus({ preventScroll: true });
  }

  function onKey(event) {
    const target = event.target.closest?.(".table-row[data-index]");
    if (!target || event.target !== target || event.altKey || event.ctrlKey || event.metaKey) return; // a toggle button keeps its keys
    const index = Number(target.dataset.index);
    const page = Math.max(1, Math.floor((scroller.clientHeight - ROW_HEIGHT) / ROW_HEIGHT) - 1);
    const moves = { ArrowDown: index + 1, ArrowUp: index - 1, Home: 0, End: source.count() - 1, PageDown: index + page,
      PageUp: index - page };
    const node = mode === "tree" ? source.node(index) : null;
    if (event.key in moves) moveTo(moves[event.key]);
    else if ((event.key === "Enter" || event.key === " ") && onRowClick && source.row(index)) onRowClick(source.row(index));
    else if (node?.hasChildren && ((event.key === "ArrowRight" && !node.expanded) || (event.key === "ArrowLeft" && node.expanded))) {
      source.toggle(node.key);
      refresh();
    } else return;
    event.preventDefault();
  }

  function renderRow(i, tabStop) {
    const row = source.row(i);
    if (!row) return el("div", { class: "table-row pending", role: "row", "aria-busy": "true" }, el("div", { class: "cell" }, "…"));
    const node = mode === "tree" ? source.node(i) : null;
    const cells = columns.map((c, index) => {
      const text = cellText(c, row);
      const cls = ["cell", alignRight(c) ? "num" : "", c.cutStart && !(node && index === 0) ? "cut-start" : ""].filter(Boolean).join(" ");
      const cell = el("div", { class: cls, title: text, role: index ? (keyed ? "gridcell" : "cell") : "rowheader" });
      if (node && index === 0) cell.append(treeToggle(node), el("span", { class: "tree-label" }, c.render ? c.render(row) : text));
      else if (c.render) cell.append(c.render(row));
      else cell.textContent = text;
      if (node && index === 0) cell.style.paddingLeft = `${8 + node.depth * INDENT}px`;
      return cell;
    });
    const classes = ["table-row", highlight?.(row) ? "hl" : "", onRowClick ? "clickable" : "", row.group !== undefined && !row.layer ? "group" : "",
      rowClass?.(row) || ""].filter(Boolean).join(" ");
    const attrs = { class: classes, role: "row", onclick: onRowClick && (() => onRowClick(row)), "aria-rowindex": i + 2 };
    if (keyed) Object.assign(attrs, { tabindex: tabStop ? "0" : "-1", "data-index": i });
    if (node) Object.assign(attrs, { "aria-level": node.depth + 1, "aria-expanded": node.hasChildren ? String(node.expanded) : undefined });
    return el("div", attrs, cells);
  }

  function treeToggle(node) {
    if (!node.hasChildren) return el("span", { class: "tree-toggle leaf" });
    // One Tab stop per table: the row's arrow keys open and close it, the button is for the mouse.
    const button = el("button", { class: "tree-toggle", "aria-label": node.expanded ? "Collapse" : "Expand", title: node.expanded ? "Collapse" : "Expand",
      tabindex: "-1" }, node.expanded ? "▾" : "▸");
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
      const initial = { key: sort.key || "", direction: sort.direction || "desc" };
      if (stood && initial.key && columns.some((c) => c.key === initial.key)) {
        state = initial; // an item with op times after one without: sorted by time again, as the table began
        stood = false;
      } else if (state.key && !columns.some((c) => c.key === state.key)) {
        stood = !columns.some((c) => c.key === sort.key);
        state = stood ? { key: fallback.key || "", direction: fallback.direction || "desc" } : initial;
      }
      layoutColumns();
      refresh();
    },
    /** Back to the sort the table started with (a tree: model order). */
    resetSort() {
      state = { key: sort.key || "", direction: sort.direction || "desc" };
      stood = false;
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
