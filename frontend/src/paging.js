// Server-paged tables: which pages a visible row range needs, and a bounded
// cache of the pages fetched (a 200,000-op table is never downloaded whole). Pure.

/** Page indices covering rows [start, end). */
export function pagesFor(start, end, size) {
  const out = [];
  if (end <= start || size <= 0) return out;
  for (let p = Math.floor(start / size); p <= Math.floor((end - 1) / size); p++) out.push(p);
  return out;
}

/** Pages by index, the least recently used dropped past `maxPages`. */
export function createPageCache(maxPages) {
  const pages = new Map(); // Map order = recency, oldest first
  return {
    has: (p) => pages.has(p),
    get(p) {
      const rows = pages.get(p);
      if (rows) {
        pages.delete(p);
        pages.set(p, rows);
      }
      return rows;
    },
    set(p, rows) {
      pages.delete(p);
      pages.set(p, rows);
      while (pages.size > maxPages) pages.delete(pages.keys().next().value);
    },
    clear: () => pages.clear(),
    get size() {
      return pages.size;
    },
  };
}
