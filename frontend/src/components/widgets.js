// Small building blocks shared by the views: panels, cards, message boxes.

import { el } from "../dom.js";
import { formatBytesFull } from "../format.js";
import { ROLE_COLOR, ROLE_LABEL } from "../roles.js";

export function panel(title, hint, ...children) {
  return el("section", { class: "panel" }, el("h2", {}, title, hint ? el("small", {}, hint) : null), children);
}

/** A clear message for one item that failed; `what` names the item. */
export function errorBox(message, what) {
  return el("div", { class: "msg error", role: "alert", testid: "error" },
    what ? el("span", { class: "what" }, `${what}: `) : null, message);
}

export function infoBox(message) {
  return el("div", { class: "msg info" }, message);
}

/** A total card: role colour, label, exact bytes with thousands separators and MiB. */
export function bytesCard(testid, role, bytes, sub, label) {
  const card = el("div", { class: "card", testid },
    el("div", { class: "label" }, el("span", { class: "swatch" }), label || ROLE_LABEL[role] || role),
    el("div", { class: "value", testid: `${testid}-value` }, formatBytesFull(bytes)),
    el("div", { class: "sub" }, sub || "\u00a0"));
  card.style.setProperty("--c", ROLE_COLOR[role] || "#212121");
  return card;
}

/** The role of a variable as a coloured chip. */
export function roleChip(role) {
  const swatch = el("span", { class: "swatch" });
  swatch.style.setProperty("--c", ROLE_COLOR[role] || "#9e9e9e");
  return el("span", { class: "chip" }, swatch, role || "");
}

export function chartBox(height) {
  return el("div", { class: "chart", style: height ? { height: `${height}px` } : undefined });
}
