// Tiny element builder. Text only ever goes in through textContent, so names
// such as "<img src=x onerror=...>" render as literal text.

import { bidiPieces, isolate } from "./bidi.js";

/**
 * el("div", {class: "card", testid: "total-weight", title: "..."}, child, "text", ...)
 * Attribute values are set with setAttribute (never parsed as HTML);
 * `on*` keys take functions and become event listeners.
 */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "testid") node.dataset.testid = value;
    else if (key === "style") Object.assign(node.style, value);
    else if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** An untrusted name (run, tag, layer, op, variable): bidi-isolated, full text in its tooltip. */
export function name(text, attrs = {}) {
  return el("bdi", { class: "name", title: isolate(text), ...attrs }, String(text ?? ""));
}

/** Untrusted free text (a server's error message): words holding bidi controls isolated. */
export function message(text) {
  return bidiPieces(text).map((p) => (p.isolate ? el("bdi", {}, p.text) : p.text));
}

/** An <option>; its label is isolated (an option cannot hold a <bdi>) and cut to `max` characters. */
export function option(value, label, selected, max = 120) {
  const text = String(label ?? "");
  const o = el("option", { value, title: text.length > max ? isolate(text) : undefined });
  o.textContent = isolate(text.length > max ? `${text.slice(0, max - 1)}…` : text);
  o.selected = Boolean(selected);
  return o;
}
