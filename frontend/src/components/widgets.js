// Small building blocks shared by the views: panels, cards, message boxes, chips.

import { el, message, name } from "../dom.js";
import { formatBytesFull, formatBytesKnown, formatHuman, formatInt, formatPercent, isKnown } from "../format.js";
import { CATEGORY_COLOR, CATEGORY_HINT, CATEGORY_LABEL, ROLE_COLOR, ROLE_LABEL } from "../roles.js";

export function panel(title, hint, ...children) {
  return el("section", { class: "panel" }, el("h2", {}, title, hint ? el("small", {}, hint) : null), children);
}

/** A clear message for one item that failed; `what` names the item (untrusted names, isolated). */
export function errorBox(text, ...what) {
  return el("div", { class: "msg error", role: "alert", testid: "error" },
    what.length ? el("span", { class: "what" }, what.map((w, i) => [i ? " / " : "", name(w)]), ": ") : null,
    el("span", { class: "text" }, message(text)));
}

export function infoBox(text, testid) {
  return el("div", { class: "msg info", testid }, text);
}

export function warnBox(text, testid) {
  return el("div", { class: "msg warn", role: "status", testid }, el("span", { class: "icon", "aria-hidden": "true" }, "⚠"), text);
}

/** "Reducing… 40% (parsing)" with a bar; `update(state)` moves it. */
export function progressBox(testid = "progress") {
  const label = el("span", { class: "progress-label" });
  const bar = el("div", { class: "progress-bar" }, el("div", { class: "progress-fill" }));
  const box = el("div", { class: "msg progress", role: "status", "aria-live": "polite", testid }, label, bar);
  return {
    element: box,
    update(text, fraction) {
      label.textContent = text;
      bar.firstChild.style.width = `${Math.round(100 * Math.max(0, Math.min(1, fraction || 0)))}%`;
      bar.setAttribute("aria-valuenow", String(Math.round(100 * (fraction || 0))));
    },
  };
}

/** A total card: colour, label, exact bytes with thousands separators and MiB ("unknown" if null). */
export function bytesCard(testid, { color, label, bytes, sub, title }) {
  const known = isKnown(bytes);
  const card = el("div", { class: known ? "card" : "card unknown", testid, title },
    el("div", { class: "label" }, el("span", { class: "swatch" }), label),
    el("div", { class: "value", testid: `${testid}-value` }, known ? formatBytesFull(bytes) : formatBytesKnown(bytes)),
    el("div", { class: "sub" }, sub || "\u00a0"));
  card.style.setProperty("--c", color || "#212121");
  return card;
}

export function roleCard(testid, role, bytes, sub) {
  return bytesCard(testid, { color: ROLE_COLOR[role], label: ROLE_LABEL[role] || role, bytes, sub });
}

/**
 * A peak category card: the bytes in binary units, then exact with the share of the peak and
 * where the figure comes from (`from`); an unknown part reads "unknown" and says why.
 */
export function categoryCard(category, bytes, { share, reason, from } = {}) {
  const known = isKnown(bytes);
  const title = known ? `${CATEGORY_LABEL[category] || category}: ${CATEGORY_HINT[category] || ""}` : `unknown: ${reason || "the data cannot give this part"}`;
  return peakCard(`peak-${category}`, {
    color: CATEGORY_COLOR[category], label: CATEGORY_LABEL[category] || category, bytes, title,
    sub: known ? [`${formatPercent(share) || "0%"} of peak`, from ? [" · ", from] : null] : reason || "not in this data",
  });
}

/** A compact card for the peak's parts (eleven side by side): human bytes large, exact bytes under them. */
export function peakCard(testid, { color, label, bytes, sub, title }) {
  const known = isKnown(bytes);
  const card = el("div", { class: known ? "card peak-card" : "card peak-card unknown", testid, title },
    el("div", { class: "label" }, el("span", { class: "swatch" }), label),
    el("div", { class: "value", testid: `${testid}-value` }, known ? formatHuman(bytes) : formatBytesKnown(bytes)),
    known ? el("div", { class: "exact" }, `${formatInt(bytes)} B`) : null,
    el("div", { class: "sub" }, sub || "\u00a0"));
  card.style.setProperty("--c", color || "#212121");
  return card;
}

function chip(color, text) {
  const swatch = el("span", { class: "swatch" });
  swatch.style.setProperty("--c", color || "#9e9e9e");
  return el("span", { class: "chip" }, swatch, text || "");
}

/** The role of a variable as a coloured chip. */
export const roleChip = (role) => chip(ROLE_COLOR[role], role);

/** A peak category as a coloured chip. */
export const categoryChip = (category) => chip(CATEGORY_COLOR[category], CATEGORY_LABEL[category] || category);

/** measured / derived / unknown: where a byte figure comes from. */
export function sourceBadge(source) {
  const titles = {
    measured: "reported by the allocator",
    derived: "output shape × dtype size, from the traced graph",
    unknown: "neither measured by the allocator nor derivable from the graph (no graph, or a size known only at run time)",
  };
  return el("span", { class: `badge ${source || "unknown"}`, title: titles[source] || "" }, source || "unknown");
}

/** A 100% bar of parts [{key, bytes, color, label}] (unknown parts left out). */
export function shareBar(parts, testid) {
  const known = parts.filter((p) => isKnown(p.bytes) && p.bytes > 0);
  const total = known.reduce((s, p) => s + p.bytes, 0);
  const bar = el("div", { class: "share-bar", testid, role: "img",
    "aria-label": known.map((p) => `${p.label} ${formatPercent(p.bytes / total)}`).join(", ") });
  for (const p of known) {
    const part = el("div", { class: "share", title: `${p.label}: ${formatBytesFull(p.bytes)} (${formatPercent(p.bytes / total)})` });
    part.style.flexGrow = String(p.bytes);
    part.style.background = p.color;
    bar.append(part);
  }
  return bar;
}

export function chartBox(height) {
  return el("div", { class: "chart", style: height ? { height: `${height}px` } : undefined });
}

/** A legend entry: colour swatch and label. */
export function legendItem(label, color) {
  return chip(color, label);
}
