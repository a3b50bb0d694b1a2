// What every view shares: pickers for one kind of data, loading the selected
// item, progress while the server is still reducing it (HTTP 202), and a
// per-item error box that leaves the pickers working.
//
// One request per item at a time (loader.js): a poll or a repeated selection
// while an answer is on the way waits for that answer instead of asking again,
// and a slow answer is rendered when it comes, however long it took.

import { el } from "../dom.js";
import { formatProgress, formatWallTime } from "../format.js";
import { followRun, itemKey, reconcile, tagInfo } from "../selection.js";
import { createSelector } from "./selector.js";
import { errorBox, progressBox, warnBox } from "./widgets.js";

/**
 * kind: "breakdown" | "ops" | "loadbench"; route: the answer's route (its cache key);
 * fetch(item) -> data; body: Node shown once data loaded; render(data, item) fills it
 * and returns the meta line's nodes. shared: {selection} kept with the other views of
 * the kind (Ops and Timeline show the same trace), and {focus: {run}}, the run last picked in any view, which
 * this one follows where it has it (``followRun``). joins: host and breakdown pickers.
 * steps: false for an answer over all the tag's steps (no step picker, no ./steps request).
 * Returns {element, update(listing), item()}.
 */
export function createItemView({ api, loader, kind, route, fetch, body, render, shared, joins = false, steps: stepPicker = true }) {
  let loadedKey = "", loadingKey = ""; // the item shown, the one on its way
  let current = null, loading = null; // the items whose data the body shows, and is on its way
  // the breakdown the server joined when none was picked; the runs' listing, updates begun, picks made here
  let auto = "", listing = null, token = 0, picks = 0;
  const fallback = createFallback(shared);
  const steps = createStepList(api, loader);
  shared.selection = shared.selection || { run: "", tag: "", step: "", host: "", breakdown: "" };
  /** A change to the newest selection, whoever made the one before it (a picker, a link, another view). */
  function pick(change) {
    picks += 1;
    fallback.picked(change);
    picked(shared, change);
    update(listing);
  }
  const selector = createSelector(pick, { joins, steps: stepPicker });
  const [meta, status] = [el("div", { class: "meta", testid: "meta" }), el("div", { class: "status" })];
  selector.element.append(meta);
  const element = el("div", { class: "item-view" }, selector.element, fallback.element, status, body);
  const shown = createShownItem(element, body, meta, status);
  body.hidden = true;

  async function update(next) {
    listing = next;
    const mine = ++token;
    const selection = fallback.reconcile(followRun(shared.selection, shared.focus?.run, listing, kind), listing, kind);
    shared.selection = selection;
    const info = tagInfo(listing, kind, selection.run, selection.tag);
    if (!info) return;
    const wantSteps = stepsKey(selection, info);
    if (stepPicker && wantSteps !== steps.key) {
      if (loadingKey && !sameItem(loading, selection)) loadingKey = ""; // its answer and progress: not wanted
      if (!sameItem(current, selection)) shown.pending(); // not the last item's figures while this one's steps come
      if (!(await steps.fetch(wantSteps, selection, () => mine === token))) return;
    }
    if (selection.step !== "" && !steps.steps.some((s) => s.step === selection.step)) selection.step = "";
    selector.update(listing, kind, selection, steps.steps, auto);
    load({ ...selection }, itemKey(route, selection, info, listing));
  }

  async function load(item, key) {
    if (key === loadingKey) return; // on its way: never ask twice
    if (key === loadedKey) { // shown: an item picked meanwhile and still on its way is no longer wanted
      if (loadingKey || shown.busy()) shown.again(Boolean(current), current);
      loadingKey = "";
      return;
    }
    [loadingKey, loading] = [key, item];
    if (!sameItem(current, item)) shown.hide(); // another item's figures must not stand under this one's pickers
    shown.loading();
    let data;
    try {
      data = await loader.get(key, () => fetch(item), { keep: () => loadingKey === key,
        onProgress: (state) => { if (loadingKey === key) shown.progress(state); } });
    } catch (e) {
      if (loadingKey !== key || e?.name === "Cancelled") return;
      [loadingKey, loadedKey, current] = ["", "", null];
      if (fallback.failed(item, e)) update(listing); // picked for the user, not by them: the run's next instead
      else shown.failed(e.message, item);
      return;
    }
    if (loadingKey !== key) return; // another item was picked meanwhile
    loadingKey = "";
    loadedKey = key;
    current = item;
    shown.show(render, data, item);
    const picked = data?.breakdown?.tag || "";
    if (joins && picked !== auto) {
      auto = picked;
      selector.update(listing, kind, shared.selection, steps.steps, auto);
    }
  }

  return {
    element, update, pick,
    item: () => current,
    /** How many picks were made here: a view that picks for the user checks nobody picked meanwhile. */
    picks: () => picks,
  };
}

/** The items picked for the user, not by them, that could not be read (HTTP 422), each with why and when: one
 * broken file listed first (a checkpoint cut short) must not stand in front of its run's readable ones. Passed
 * over for RETRY_MS (a file still being written may be whole by then); the user's own pick of it, or of one of
 * its steps or hosts, still says its error. */
function createFallback(shared) {
  const unreadable = new Map(); // "run\0tag" -> {why, at}
  const element = el("div", { testid: "passed-over-items" });
  let defaulted = ""; // the item reconcile picked for the user, at its latest step
  return {
    element,
    picked() {
      defaulted = ""; // any pick is the user's: a step, a host
    },
    reconcile(asked, listing, kind) {
      for (const [at, { when }] of unreadable) if (Date.now() - when > RETRY_MS) unreadable.delete(at);
      const selection = reconcile(asked, listing, kind, unreadable);
      if (selection.run !== asked.run || selection.tag !== asked.tag) defaulted = `${selection.run}\0${selection.tag}`;
      const shown = `${selection.run}\0${selection.tag}`; // picked again by the user, its error box says it
      element.replaceChildren(...[...unreadable].filter(([at]) => at.startsWith(`${selection.run}\0`) && at !== shown)
        .map(([at, { why, when }]) => warnBox(`${at.split("\0")[1]} was not readable at `
          + `${formatWallTime(when / 1000)} UTC, so this view opened on the run's next: ${why}`)));
      return selection;
    },
    /** True where the failed item was picked for the user: passed over, the selection's tag left to reconcile. */
    failed(item, error) {
      const at = `${item.run}\0${item.tag}`;
      if (error?.status !== 422 || at !== defaulted || item.step !== "" || item.host || unreadable.has(at)) return false;
      unreadable.set(at, { why: error.message, when: Date.now() });
      shared.selection = { ...shared.selection, tag: "", step: "", host: "" };
      return true;
    },
  };
}

const RETRY_MS = 5 * 60 * 1000;

/** The selection changed as the user picked; a run picked is the one every view follows (``followRun``). */
function picked(shared, change) {
  shared.selection = { ...shared.selection, ...change };
  if (change.run && shared.focus) shared.focus.run = change.run;
}

/** The same item, maybe at another step: its older figures may stay up while the new ones load. */
export function sameItem(a, b) {
  return Boolean(a) && ["run", "tag", "host", "breakdown"].every((k) => (a[k] || "") === (b[k] || ""));
}

/** What the step picker's choices depend on: the run, the tag and its newest step. */
function stepsKey(selection, info) {
  return `steps\u0000${selection.run}\u0000${selection.tag}\u0000${info.max_step}`;
}

/** The step picker's choices (`steps`) and the `key` they are for; `fetch` asks the server for them
 * and says false when `keep()` says a newer update began meanwhile, leaving the list as it was: an older
 * item's steps, answered last, must not replace the newer item's. A failed request keeps the item's
 * steps known so far (none for another item) and its key, so the next update asks again: one failure
 * must not send a picked step back to the latest. */
export function createStepList(api, loader) {
  const list = { steps: [], key: "", item: "" };
  list.fetch = async (key, selection, keep) => {
    const item = `${selection.run}\u0000${selection.tag}`;
    try {
      const steps = (await loader.get(key, () => api.steps(selection), { keep })).steps || [];
      if (!keep()) return false;
      Object.assign(list, { steps, key, item });
    } catch {
      if (!keep()) return false;
      if (item !== list.item) Object.assign(list, { steps: [], key: "", item }); // the data request says why
    }
    return true;
  };
  return list;
}

/** Where one item is shown: its figures (body), its meta line, and the status box between them (loading,
 * progress, errors). */
function createShownItem(element, body, meta, status) {
  const progress = progressBox();
  let renderError = null; // what the shown item's render threw, said again if it is shown again
  const hide = () => {
    body.hidden = true;
    meta.hidden = true;
  };
  // aria-busy while an item loads, and which item the figures are (data-run, data-tag): a screen
  // reader waits for the region, and a test for the item it picked rather than the one shown before.
  const settle = (item) => {
    element.removeAttribute("aria-busy");
    if (item) {
      element.dataset.run = item.run;
      element.dataset.tag = item.tag;
    } else {
      delete element.dataset.run;
      delete element.dataset.tag;
    }
  };
  const loading = () => {
    element.setAttribute("aria-busy", "true");
    if (body.hidden) status.replaceChildren(el("div", { class: "loading" }, "Loading…"));
  };
  return {
    hide,
    loading,
    /** Another item picked: its steps come first, then its figures. */
    pending() {
      hide();
      loading();
    },
    busy: () => element.hasAttribute("aria-busy"),
    progress(state) {
      progress.update(formatProgress(state), state.progress);
      status.replaceChildren(progress.element);
    },
    failed(message, item) {
      hide();
      settle(null);
      renderError = null;
      status.replaceChildren(errorBox(message, item.run, item.tag));
    },
    /** The loaded item's figures and meta line; what `render` throws is said in the status box. */
    show(render, data, item) {
      status.replaceChildren();
      body.hidden = false;
      meta.hidden = false;
      settle(item);
      renderError = null;
      try {
        meta.replaceChildren(...render(data, item));
      } catch (e) {
        renderError = errorBox(`could not show this item (${e.message})`, item.run, item.tag);
        status.replaceChildren(renderError);
        console.error(e);
      }
    },
    /** The figures still in the body (if any), shown again in place of an item no longer wanted. */
    again(loaded, item) {
      status.replaceChildren(...(loaded && renderError ? [renderError] : []));
      body.hidden = !loaded;
      meta.hidden = !loaded;
      settle(loaded ? item : null);
    },
  };
}
