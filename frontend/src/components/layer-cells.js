// A layer row's pieces that the Storage and Ops tables share: its class cell and the tree's buttons.
import { el } from "../dom.js";
import { UNKNOWN } from "../format.js";

const NO_CLASS = "the breakdown does not name this layer's class (a checkpoint stores variables, not the layers that made them)";

/**
 * A layer row's class: its own, "composite" for a layer over sublayers, and for a layer the breakdown
 * names no class of, "unknown" (and why) when it names none at all (a checkpoint), else nothing (a row
 * that is no layer of the model: an optimizer's own counters).
 */
export function classText(l, noneKnown) {
  if (l.class_name) return l.class_name;
  if (!l.layer) return "";
  if (!l.leaf) return "composite";
  return noneKnown ? `${UNKNOWN}: ${NO_CLASS}` : "";
}

export function classCell(l, noneKnown) {
  return !l.class_name && l.layer && l.leaf && noneKnown ? el("i", { class: "why", title: NO_CLASS }, UNKNOWN) : classText(l, noneKnown);
}

/** Whether a breakdown's layer rows name no class at all (a checkpoint: its variables only). */
export const noClassKnown = (rows) => !(rows || []).some((l) => l.class_name);

/** Model order / expand all / collapse all buttons for a tree table (created before the table exists). */
export function treeButtons(table) {
  return [
    el("button", { class: "link-button", type: "button", title: "undo a column sort", onclick: () => table().resetSort() }, "Model order"),
    el("button", { class: "link-button", type: "button", onclick: () => table().expandAll() }, "Expand all"),
    el("button", { class: "link-button", type: "button", onclick: () => table().collapseAll() }, "Collapse all"),
  ];
}
