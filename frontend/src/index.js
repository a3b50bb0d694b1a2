// Entry point TensorBoard imports inside the plugin iframe: `render()` builds the tab.

import { api } from "./api.js";
import { createApp } from "./app.js";
import { el } from "./dom.js";
import { CSS } from "./style.js";

export function render() {
  document.head.append(el("style", {}, CSS));
  const root = el("div", { id: "modelmem" });
  document.body.append(root);
  createApp(root, api);
}
