// Sorting and filtering of table rows. Pure: the table component only renders.
// The same filter syntax works on the server for tables it pages (serverFilter).

/**
 * A predicate keeping rows whose column text contains every whitespace-separated
 * term (case-insensitive), or null for an empty query. A term like "role:slot"
 * or "type:fused" only looks at the column with that key or label.
 */
export function rowMatcher(query, columns) {
  const terms = String(query || "").toLowerCase().split(/\s+/).filter(Boolean);
  if (!terms.length) return null;
  const byName = columnsByName(columns);
  const matchers = terms.map((term) => {
    const colon = term.indexOf(":");
    const column = colon > 0 ? byName.get(term.slice(0, colon)) : undefined;
    return column ? { columns: [column], text: term.slice(colon + 1) } : { columns, text: term };
  });
  return (row) => matchers.every((m) => m.columns.some((c) => cellText(c, row).toLowerCase().includes(m.text)));
}

export function filterRows(rows, query, columns) {
  const match = rowMatcher(query, columns);
  return match ? rows.filter(match) : rows;
}

/**
 * The filter as the server reads it: "field:text" must name a field, so column
 * labels ("type:fused") become the column's key ("op_type:fused"), or the field
 * the column shows as text (its filterKey: "output:28,28" looks in the shape).
 */
export function serverFilter(query, columns) {
  const byName = columnsByName(columns);
  return String(query || "").trim().split(/\s+/).filter(Boolean).map((term) => {
    const colon = term.indexOf(":");
    const prefix = colon > 0 ? term.slice(0, colon).toLowerCase() : "";
    const column = prefix ? byName.get(prefix) : undefined;
    if (!column) return term;
    const field = prefix === column.key.toLowerCase() ? column.key : column.filterKey || column.key;
    return `${field}:${term.slice(colon + 1)}`;
  }).join(" ");
}

function columnsByName(columns) {
  const byName = new Map();
  for (const c of columns) {
    byName.set(c.key.toLowerCase(), c);
    if (c.label) byName.set(c.label.toLowerCase().replace(/\s+/g, "_"), c);
  }
  return byName;
}

export function cellText(column, row) {
  const text = column.text ? column.text(row) : sortValue(column, row);
  return text === null || text === undefined ? "" : String(text);
}

export function sortValue(column, row) {
  return column.value ? column.value(row) : row[column.key];
}

/** Compare two rows by one column; empty values always last, numbers numerically (0 = tie). */
export function rowComparator(column, direction) {
  const sign = direction === "desc" ? -1 : 1;
  return (a, b) => {
    const va = sortValue(column, a);
    const vb = sortValue(column, b);
    const ea = isEmpty(va);
    const eb = isEmpty(vb);
    if (ea || eb) return ea === eb ? 0 : ea ? 1 : -1;
    return sign * compareValues(va, vb);
  };
}

/** Stable sort by one column; empty values always last, numbers numerically. */
export function sortRows(rows, column, direction) {
  if (!column) return rows;
  const compare = rowComparator(column, direction);
  return rows
    .map((row, index) => ({ row, index }))
    .sort((a, b) => compare(a.row, b.row) || a.index - b.index)
    .map((entry) => entry.row);
}

function isEmpty(value) {
  return value === null || value === undefined || value === "";
}

// One collator for all comparisons: localeCompare with options builds one per call.
const collator = new Intl.Collator("en", { numeric: true, sensitivity: "base" });

function compareValues(a, b) {
  if (typeof a === "number" && typeof b === "number") return a - b;
  return collator.compare(String(a), String(b));
}

/** Next sort state when a header is clicked: numbers start descending (largest first). */
export function nextSort(current, column) {
  if (current.key === column.key) {
    return { key: column.key, direction: current.direction === "asc" ? "desc" : "asc" };
  }
  return { key: column.key, direction: column.numeric ? "desc" : "asc" };
}
