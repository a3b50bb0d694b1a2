// What every view shares: pickers for one kind of data, loading the selected
// item, progress while the server is still reducing it (HTTP 202), and a
// per-item error box that leaves the pickers working.
//
// One request per item at a time (loader.js): a poll or a repeated selection
// while an answer is on the way waits for that answer instead of asking again,
// and a slow answer is rendered when it comes, however long it took.

import { el } from "../dom.js";
import { formatProgress } from "../format.js";
import { itemKey, reconcile, tagInfo } from "../selection.js";
import { createSelector } from "./selector.js";
import { errorBox, progressBox } from "./widgets.js";

/**
 * kind: "breakdown" | "ops" | "loadbench"; route: the answer's route (its cache key);
 * fetch(item) -> data; body: Node shown once data loaded; render(data, item) fills it
 * and returns the meta line's nodes. shared: {selection} kept with the other views of
 * the kind (Ops and Timeline show the same trace). joins: host and breakdown pickers.
 * steps: false for an answer over all the tag's steps (no step picker, no ./steps request).
 * Returns {element, update(listing), item()}.
 */
export function createItemView({ api, loader, kind, route, fetch, body, render, shared, joins = false, steps: stepPicker = true }) {
  let listing = null;
  let loadedKey = "";
  let loadingKey = "";
  let current = null; // the item whose data the body shows
  let auto = ""; // the breakdown the server joined when none was picked
  let token = 0;
  const steps = createStepList(api, loader);
  shared.selection = shared.selection || { run: "", tag: "", step: "", host: "", breakdown: "" };

  const selector = createSelector((next) => {
    shared.selection = next;
    update(listing);
  }, { joins, steps: stepPicker });
  const meta = el("div", { class: "meta", testid: "meta" });
  const progress = progressBox();
  const status = el("div", { class: "status" });
  selector.element.append(meta);
  const element = el("div", {}, selector.element, status, body);
  body.hidden = true;

  async function update(next) {
    listing = next;
    const mine = ++token;
    const selection = reconcile(shared.selection, listing, kind);
    shared.selection = selection;
    const info = tagInfo(listing, kind, selection.run, selection.tag);
    if (!info) return;
    const wantSteps = stepsKey(selection, info);
    if (stepPicker && wantSteps !== steps.key && !(await steps.fetch(wantSteps, selection, () => mine === token))) return;
    if (selection.step !== "" && !steps.steps.some((s) => s.step === selection.step)) selection.step = "";
    selector.update(listing, kind, selection, steps.steps, auto);
    load({ ...selection }, itemKey(route, selection, info, listing));
  }

  async function load(item, key) {
    if (key === loadedKey || key === loadingKey) return; // shown, or on its way: never ask twice
    loadingKey = key;
    if (!sameItem(current, item)) { // another item's figures must not stand under this one's pickers
      body.hidden = true;
      meta.replaceChildren();
    }
    if (body.hidden) status.replaceChildren(el("div", { class: "loading" }, "Loading…"));
    let data;
    try {
      data = await loader.get(key, () => fetch(item), { keep: () => loadingKey === key,
        onProgress: (state) => { if (loadingKey === key) showProgress(progress, status, state); } });
    } catch (e) {
      if (loadingKey !== key || e?.name === "Cancelled") return;
      loadingKey = "";
      loadedKey = "";
      current = null;
      body.hidden = true;
      meta.replaceChildren();
      status.replaceChildren(errorBox(e.message, item.run, item.tag));
      return;
    }
    if (loadingKey !== key) return; // another item was picked meanwhile
    loadingKey = "";
    loadedKey = key;
    current = item;
    showData({ body, meta, status }, render, data, item);
    const picked = data?.breakdown?.tag || "";
    if (joins && picked !== auto) {
      auto = picked;
      selector.update(listing, kind, shared.selection, steps.steps, auto);
    }
  }

  return {
    element, update,
    item: () => current,
    /** Change part of the selection, as a picker would (e.g. a host picked in a table). */
    pick(change) {
      shared.selection = { ...shared.selection, ...change };
      update(listing);
    },
  };
}

/** The same item, maybe at another step: its older figures may stay up while the new ones load. */
function sameItem(a, b) {
  return Boolean(a) && ["run", "tag", "host", "breakdown"].every((k) => (a[k] || "") === (b[k] || ""));
}

/** What the step picker's choices depend on: the run, the tag and its newest step. */
function stepsKey(selection, info) {
  return `steps\u0000${selection.run}\u0000${selection.tag}\u0000${info.max_step}`;
}

/** The step picker's choices (`steps`) and the `key` they are for; `fetch` asks the server for them
 * and says false when `keep()` says a newer update began meanwhile, leaving the list as it was: an older
 * item's steps, answered last, must not replace the newer item's. */
export function createStepList(api, loader) {
  const list = { steps: [], key: "" };
  list.fetch = async (key, selection, keep) => {
    let steps = [];
    try {
      steps = (await loader.get(key, () => api.steps(selection), { keep })).steps || [];
    } catch {
      steps = []; // the data request reports the problem for this item
    }
    if (!keep()) return false;
    Object.assign(list, { steps, key });
    return true;
  };
  return list;
}

function showProgress(progress, status, state) {
  progress.update(formatProgress(state), state.progress);
  status.replaceChildren(progress.element);
}

/** The loaded item's figures in the body and its meta line; what `render` throws is said in the status box. */
function showData({ body, meta, status }, render, data, item) {
  status.replaceChildren();
  body.hidden = false;
  try {
    meta.replaceChildren(...render(data, item));
  } catch (e) {
    status.replaceChildren(errorBox(`could not show this item (${e.message})`, item.run, item.tag));
    console.error(e);
  }
}
