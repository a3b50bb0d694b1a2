// Layer trees as table rows. The backend sends a tree depth first
// ({layer, depth, leaf, ...}; composite layers sum their sublayers); this decides
// which rows show: children of expanded rows, siblings sorted among themselves
// (a subtree stays under its parent), and for a filter the matching rows with
// their ancestors. Pure.

/** The identity of a row across refreshes: its path, or its group for rows of no layer. */
export function treeKey(row) {
  return row.layer ? row.layer : `(group)${row.group ?? row.label ?? ""}`;
}

/** {roots, children}: indices of each row's children, from depth-first rows with `depth`. */
export function treeIndex(rows) {
  const children = rows.map(() => []);
  const roots = [];
  const open = []; // the current row's ancestors, nearest last
  rows.forEach((row, i) => {
    const depth = row.depth || 0;
    while (open.length && (rows[open[open.length - 1]].depth || 0) >= depth) open.pop();
    if (open.length) children[open[open.length - 1]].push(i);
    else roots.push(i);
    open.push(i);
  });
  return { roots, children };
}

/**
 * Rows to show, each {row, depth, hasChildren, expanded, key}.
 * expanded: Set of treeKey; compare(a, b): sibling order (null keeps model order);
 * match(row): a filter (null for none) showing matches and their ancestors, opened;
 * pinLast(row): rows kept after their siblings whatever the order (groups of no layer).
 */
export function visibleTree(rows, { expanded = new Set(), compare = null, match = null, pinLast = null } = {}) {
  const { roots, children } = treeIndex(rows);
  let keep = null;
  if (match) {
    keep = new Array(rows.length).fill(false);
    for (let i = rows.length - 1; i >= 0; i--) keep[i] = match(rows[i]) || children[i].some((c) => keep[c]);
  }
  const order = (list) => {
    let out = keep ? list.filter((i) => keep[i]) : list.slice();
    if (compare) out = out.map((i, pos) => ({ i, pos })).sort((a, b) => compare(rows[a.i], rows[b.i]) || a.pos - b.pos).map((e) => e.i);
    if (pinLast) out = [...out.filter((i) => !pinLast(rows[i])), ...out.filter((i) => pinLast(rows[i]))];
    return out;
  };
  const shown = [];
  const stack = order(roots).reverse().map((i) => [i, 0]);
  while (stack.length) {
    const [i, depth] = stack.pop();
    const kids = children[i];
    const key = treeKey(rows[i]);
    const open = kids.length > 0 && (keep ? kids.some((c) => keep[c]) : expanded.has(key));
    shown.push({ row: rows[i], depth, hasChildren: kids.length > 0, expanded: open, key });
    if (open) for (const c of order(kids).reverse()) stack.push([c, depth + 1]);
  }
  return shown;
}

/**
 * Which composites start open: level by level while the rows shown stay within
 * `budget`; a lone composite root (the model itself) always opens.
 */
export function defaultExpanded(rows, budget = 40) {
  const { roots, children } = treeIndex(rows);
  const open = new Set();
  let visible = roots.length;
  let level = roots;
  while (level.length) {
    const composites = level.filter((i) => children[i].length);
    const added = composites.reduce((n, i) => n + children[i].length, 0);
    const lone = open.size === 0 && composites.length === 1;
    if (!composites.length || (visible + added > budget && !lone)) break;
    for (const i of composites) open.add(treeKey(rows[i]));
    visible += added;
    level = composites.flatMap((i) => children[i]);
  }
  return open;
}

/** Keys of every composite (for "expand all"). */
export function allComposites(rows) {
  const { children } = treeIndex(rows);
  return new Set(rows.filter((_, i) => children[i].length).map(treeKey));
}
