// What every view shares: pickers for one kind of data, loading the selected
// (run, tag, step), and a per-item error box that leaves the pickers working.

import { el } from "../dom.js";
import { reconcile, runsOfKind } from "../selection.js";
import { createSelector } from "../components/selector.js";
import { errorBox } from "../components/widgets.js";

/**
 * kind: "breakdown" | "ops" | "loadbench"; fetch(run, tag, step) -> data;
 * body: Node shown when data loaded; render(data) fills it.
 * Returns {element, update(listing)}; update is cheap when nothing changed.
 */
export function createItemView({ api, kind, fetch, body, render }) {
  let listing = null;
  let selection = { run: "", tag: "", step: "" };
  let steps = [];
  let stepsKey = "";
  let loadedKey = "";
  let token = 0;

  const selector = createSelector((next) => {
    selection = next;
    update(listing);
  });
  const meta = el("div", { class: "meta" });
  const status = el("div");
  selector.element.append(meta);
  const element = el("div", {}, selector.element, status, body);
  body.hidden = true;

  async function update(next) {
    listing = next;
    selection = reconcile(selection, listing, kind);
    const { run, tag } = selection;
    const info = runsOfKind(listing, kind).find((r) => r.run === run)?.tags.find((t) => t.tag === tag);
    if (!info) return;
    const mine = ++token;

    const wantSteps = `${run}\u0000${tag}\u0000${info.max_step}`;
    if (wantSteps !== stepsKey) {
      try {
        steps = (await api.steps(run, tag)).steps || [];
      } catch {
        steps = []; // the data request below reports the problem for this item
      }
      if (mine !== token) return;
      stepsKey = wantSteps;
    }
    if (selection.step !== "" && !steps.some((s) => s.step === selection.step)) selection.step = "";
    selector.update(listing, kind, selection, steps);

    const wantData = `${run}\u0000${tag}\u0000${selection.step === "" ? `latest@${info.max_step}` : selection.step}`;
    if (wantData === loadedKey) return;
    if (body.hidden) status.replaceChildren(el("div", { class: "loading" }, "Loading…"));
    try {
      const data = await fetch(run, tag, selection.step);
      if (mine !== token) return;
      loadedKey = wantData;
      status.replaceChildren();
      body.hidden = false;
      meta.replaceChildren(...render(data));
    } catch (e) {
      if (mine !== token) return;
      loadedKey = "";
      body.hidden = true;
      meta.replaceChildren();
      status.replaceChildren(errorBox(e.message, `${run} / ${tag}`));
    }
  }

  return { element, update };
}
