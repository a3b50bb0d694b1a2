// Sorting and filtering of table rows. Pure: the table component only renders.

/**
 * Keep rows whose column text contains every whitespace-separated term
 * (case-insensitive). A term like "role:slot" or "type:fused" only looks at
 * the column with that key or label.
 */
export function filterRows(rows, query, columns) {
  const terms = String(query || "").toLowerCase().split(/\s+/).filter(Boolean);
  if (!terms.length) return rows;
  const byKey = new Map();
  for (const c of columns) {
    byKey.set(c.key.toLowerCase(), c);
    if (c.label) byKey.set(c.label.toLowerCase().replace(/\s+/g, "_"), c);
  }
  const matchers = terms.map((term) => {
    const colon = term.indexOf(":");
    const column = colon > 0 ? byKey.get(term.slice(0, colon)) : undefined;
    return column ? { columns: [column], text: term.slice(colon + 1) } : { columns, text: term };
  });
  return rows.filter((row) =>
    matchers.every((m) => m.columns.some((c) => cellText(c, row).toLowerCase().includes(m.text))),
  );
}

export function cellText(column, row) {
  const text = column.text ? column.text(row) : sortValue(column, row);
  return text === null || text === undefined ? "" : String(text);
}

export function sortValue(column, row) {
  return column.value ? column.value(row) : row[column.key];
}

/** Stable sort by one column; empty values always last, numbers numerically. */
export function sortRows(rows, column, direction) {
  if (!column) return rows;
  const sign = direction === "desc" ? -1 : 1;
  return rows
    .map((row, index) => ({ row, index, value: sortValue(column, row) }))
    .sort((a, b) => {
      const ea = isEmpty(a.value);
      const eb = isEmpty(b.value);
      if (ea || eb) return ea === eb ? a.index - b.index : ea ? 1 : -1;
      const c = compareValues(a.value, b.value);
      return c === 0 ? a.index - b.index : sign * c;
    })
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
