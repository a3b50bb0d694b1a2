// Sorting and filtering of table rows. Pure: the table component only renders.
// The same filter syntax works on the server for tables it pages (serverFilter).

// A term: a run of characters, spaces kept inside "double quotes" (as the server splits them).
const TERM = /(?:[^\s"]+|"[^"]*"?)+/g;
const OPERATORS = ["^=", "=", ":"];

/** One exact-or-prefix term for a value a view filters by ("layer^=model/dense"), quoted when it holds a
 *  space; null when it holds a double quote, which no term can hold. */
export function filterTerm(field, op, value) {
  const text = String(value ?? "");
  if (text.includes('"')) return null;
  return /\s/.test(text) ? `${field}${op}"${text}"` : `${field}${op}${text}`;
}

/** The filter's terms as typed: split at spaces outside double quotes, the quotes kept. */
function rawTerms(query) {
  return String(query || "").match(TERM) || [];
}

/**
 * One term read as the server reads it: "field^=path" (that path or under it), "field=value"
 * (exactly), "field:text" (that column contains it), or text any column contains. A field that
 * names no column makes the whole term text.
 */
function parseTerm(term, byName) {
  for (const op of OPERATORS) {
    const at = term.indexOf(op);
    const column = at > 0 ? byName.get(term.slice(0, at).toLowerCase()) : undefined;
    if (column && (op !== ":" || at + 1 < term.length)) return { column, op, value: term.slice(at + op.length) };
  }
  return { column: null, op: ":", value: term };
}

function termMatcher({ column, op, value }, columns) {
  if (op === "=") return (row) => cellText(column, row) === value;
  if (op === "^=") {
    const under = `${value.replace(/\/+$/, "")}/`;
    return (row) => { const text = cellText(column, row); return text === value || text.startsWith(under); };
  }
  const text = value.toLowerCase();
  const among = column ? [column] : columns;
  return (row) => among.some((c) => cellText(c, row).toLowerCase().includes(text));
}

/**
 * A predicate keeping rows that match every term (the server's grammar: "conv", "role:slot",
 * "name=dense/MatMul", "layer^=model/block", 'name="aten::div (optimizer)"'), or null for an
 * empty query. A column's label works as its key ("type:fused").
 */
export function rowMatcher(query, columns) {
  const terms = rawTerms(query).map((t) => t.replace(/"/g, "")).filter(Boolean);
  if (!terms.length) return null;
  const byName = columnsByName(columns);
  const matchers = terms.map((term) => termMatcher(parseTerm(term, byName), columns));
  return (row) => matchers.every((match) => match(row));
}

export function filterRows(rows, query, columns) {
  const match = rowMatcher(query, columns);
  return match ? rows.filter(match) : rows;
}

/**
 * The filter as the server reads it: a field must be the server's, so column labels ("type:fused")
 * become the column's key ("op_type:fused"), or the field the column shows as text (its filterKey:
 * "output:28,28" looks in the shape). Quotes are kept for the server to split by.
 */
export function serverFilter(query, columns) {
  const byName = columnsByName(columns);
  return rawTerms(query).map((term) => {
    const { column, op } = parseTerm(term.replace(/"/g, ""), byName);
    if (!column) return term;
    const at = term.indexOf(op);
    const prefix = term.slice(0, at).toLowerCase();
    const field = prefix === column.key.toLowerCase() ? column.key : column.filterKey || column.key;
    return `${field}${term.slice(at)}`;
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
