// Where a table's rows come from. Each source answers the same questions for
// the table component: how many rows to show, which row is at index i, and
// (remote) which pages to fetch for the rows in view. No DOM.
//
//   local:  every row in memory, filtered and sorted here
//   tree:   a layer tree (tree.js), expand state kept across refreshes
//   remote: pages from the server, which sorts and filters (paging.js)

import { pagesFor, createPageCache } from "./paging.js";
import { rowComparator, rowMatcher, serverFilter, sortRows } from "./table-model.js";
import { allComposites, defaultExpanded, visibleTree } from "./tree.js";

/** view = {query, sort: {key, direction}, columns} as the table shows them. */
const sortColumn = (view) => view.columns.find((c) => c.key === view.sort.key);

export function createLocalSource() {
  let all = [];
  let shown = [];
  return {
    setRows(rows) {
      all = rows || [];
    },
    update(view) {
      const match = rowMatcher(view.query, view.columns);
      shown = sortRows(match ? all.filter(match) : all, sortColumn(view), view.sort.direction);
    },
    count: () => shown.length,
    total: () => all.length,
    row: (i) => shown[i],
    want() {},
    note: () => "",
  };
}

/**
 * rows: depth-first tree rows. A new tree (`fresh`) opens its default levels;
 * a refresh of the same tree keeps what the user opened and closed.
 */
export function createTreeSource({ pinLast = null, budget = 40 } = {}) {
  let all = [];
  let shown = [];
  let expanded = new Set();
  return {
    setRows(rows, fresh) {
      all = rows || [];
      if (fresh) expanded = defaultExpanded(all, budget);
    },
    update(view) {
      const column = view.sort.key ? sortColumn(view) : null;
      shown = visibleTree(all, {
        expanded, pinLast,
        compare: column ? rowComparator(column, view.sort.direction) : null,
        match: rowMatcher(view.query, view.columns),
      });
    },
    toggle(key) {
      if (expanded.has(key)) expanded.delete(key);
      else expanded.add(key);
    },
    expandAll() {
      expanded = allComposites(all);
    },
    collapseAll() {
      expanded = new Set();
    },
    count: () => shown.length,
    total: () => all.length,
    row: (i) => shown[i]?.row,
    node: (i) => shown[i],
    want() {},
    note: () => "",
  };
}

/**
 * Pages fetched with fetchPage({offset, limit, sort, order, filter}) ->
 * {total, matched, rows}. Sort and filter go to the server; answers to an older
 * sort, filter or item are dropped; one request per page at a time.
 */
export function createRemoteSource({ onChange, pageSize = 100, maxPages = 60 }) {
  let item = "";
  let fetchPage = null;
  let query = null; // {filter, sort, order} the pages hold
  let generation = 0;
  let count = 0;
  let total = 0;
  let answered = false;
  let error = "";
  const cache = createPageCache(maxPages);
  const asked = new Set();

  function reset() {
    generation += 1;
    cache.clear();
    asked.clear();
    answered = false;
    error = "";
  }

  function accept(page, index) {
    count = page.matched ?? page.total ?? 0;
    total = page.total ?? count;
    answered = true;
    error = "";
    cache.set(index, page.rows || []);
  }

  function load(index) {
    const mine = generation;
    asked.add(index);
    fetchPage({ offset: index * pageSize, limit: pageSize, ...query }).then((page) => {
      if (mine !== generation) return;
      asked.delete(index);
      accept(page, index);
      onChange();
    }, (e) => {
      if (mine !== generation || e?.name === "Cancelled") return;
      asked.delete(index);
      error = e?.message || String(e);
      onChange();
    });
  }

  return {
    /** A new item (key) drops every page; `first` is a page the item's answer already holds. */
    setItem(key, fetch, first) {
      fetchPage = fetch;
      if (key === item) return;
      item = key;
      reset();
      if (first && query && first.offset === 0 && (first.rows || []).length <= pageSize
        && first.sort === query.sort && first.order === query.order && !query.filter) {
        accept(first, 0);
      }
    },
    update(view) {
      const column = sortColumn(view);
      const next = { filter: serverFilter(view.query, view.columns), sort: column?.sortKey || column?.key || "",
        order: view.sort.direction === "asc" ? "asc" : "desc" };
      if (query && next.filter === query.filter && next.sort === query.sort && next.order === query.order) return;
      query = next;
      reset();
    },
    want(start, end) {
      if (!fetchPage || !query) return;
      const pages = answered ? pagesFor(start, Math.min(end, count), pageSize) : [0];
      for (const p of pages) if (!cache.has(p) && !asked.has(p)) load(p);
    },
    row(i) {
      return cache.get(Math.floor(i / pageSize))?.[i % pageSize];
    },
    count: () => count,
    total: () => total,
    note: () => (error ? `could not load rows: ${error}` : answered ? "" : "loading…"),
    get query() {
      return query;
    },
  };
}
