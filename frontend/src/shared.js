// Layers shared by two parents in a breakdown's layer tree (one Dense in two towers of one model).
// The shared layer's variables are counted once, at the path that owns them; the other path's row has
// `shared_params` (its parameters owned elsewhere), and each composite sums its sublayers'. Keras counts the
// shared layer in each parent: for a parent whose subtree does not hold the owning path, its
// `params + shared` is Keras' count_params(). Pure, no DOM.

import { isolate } from "./bidi.js";
import { formatInt } from "./format.js";

/** Depth-first rows -> each row's ancestors' indices (nearest last) and its subtree's end (exclusive). */
function spans(rows) {
  const end = rows.map(() => rows.length);
  const open = [];
  rows.forEach((row, i) => {
    const depth = row.depth || 0;
    while (open.length && (rows[open[open.length - 1]].depth || 0) >= depth) end[open.pop()] = i;
    open.push(i);
  });
  return end;
}

const sameLayer = (a, b) => a.label === b.label && (a.class_name || "") === (b.class_name || "")
  && (a.derivation || "") === (b.derivation || "") && a.params === b.params;

/**
 * rows: a /breakdown layer tree as rows (api.js rowsOf). -> Map(layer path -> mark):
 *   a leaf at a second path:   {kind: "leaf", text: "shared", owner, shared, title}
 *   a parent that reaches it:  {kind: "parent", text: "+40 shared", shared, keras (params + shared), owners, title}
 * A parent above both paths (the model's root) counts the layer once, and gets no mark. Where the owning
 * path cannot be told (several layers alike), the served shared_params stand.
 */
export function sharedMarks(rows) {
  const list = rows || [];
  const end = spans(list);
  const marks = new Map();
  const owners = new Map(); // second path's index -> its owning path's index (-1: not known)
  const owning = new Map(); // label -> indices of leaves that own their variables
  list.forEach((row, j) => {
    if (row.layer && row.leaf && !(Number(row.shared_params) > 0)) owning.set(row.label, [...(owning.get(row.label) || []), j]);
  });
  list.forEach((row, i) => {
    if (!row.layer || !row.leaf || !(Number(row.shared_params) > 0)) return;
    const found = (owning.get(row.label) || []).filter((j) => sameLayer(list[j], row));
    const owner = found.length === 1 ? found[0] : -1;
    owners.set(i, owner);
    const where = owner >= 0 ? isolate(list[owner].layer) : "another path of the model";
    marks.set(row.layer, { kind: "leaf", text: "shared", shared: Number(row.shared_params), owner: owner >= 0 ? list[owner].layer : "",
      title: `the same layer as ${where}, which holds its variables: its ${formatInt(row.shared_params)} parameters `
        + "are counted there, and once in every layer above both" });
  });
  list.forEach((row, i) => {
    if (!row.layer || row.leaf) return;
    let shared = 0;
    const from = new Set();
    for (const [leaf, owner] of owners) {
      if (leaf <= i || leaf >= end[i]) continue; // not under this row
      if (owner > i && owner < end[i]) continue; // owned under it too: counted once in its params
      shared += Number(list[leaf].shared_params);
      if (owner >= 0) from.add(list[owner].layer);
    }
    if (!shared) return;
    const params = Number(row.params) || 0;
    marks.set(row.layer, { kind: "parent", text: `+${formatInt(shared)} shared`, shared, keras: params + shared, owners: [...from],
      title: `${formatInt(shared)} parameters of a layer it shares with another parent are counted there`
        + `${from.size ? ` (${[...from].map(isolate).join(", ")})` : ""}; Keras counts them in this layer too: `
        + `${formatInt(params)} + ${formatInt(shared)} = ${formatInt(params + shared)}` });
  });
  return marks;
}
