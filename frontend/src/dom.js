// Tiny element builder. Text only ever goes in through textContent, so names
// such as "<img src=x onerror=...>" render as literal text.

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

export function clear(node) {
  node.replaceChildren();
  return node;
}

export function option(value, label, selected) {
  const o = el("option", { value });
  o.textContent = label;
  o.selected = Boolean(selected);
  return o;
}
