// The page: view tabs for the kinds of data present, a box for unreadable
// tags, and polling so a tab watched during training keeps up.

import { el } from "./dom.js";
import { formatWallTime } from "./format.js";
import { createLoader } from "./loader.js";
import { availableViews, tagErrors } from "./selection.js";
import { emptyState } from "./views/empty.js";
import { createLoadView } from "./views/load.js";
import { createOpsView } from "./views/ops.js";
import { createStorageView } from "./views/storage.js";
import { createTimelineView } from "./views/timeline.js";
import { createGrowthView } from "./views/growth.js";
import { createWhatIfView } from "./views/whatif.js";
import { createOomAlerts } from "./views/oom.js";
import { errorBox } from "./components/widgets.js";

const POLL_MS = 20000;
const PROBLEMS_SHOWN = 3; // unreadable items listed in full; the rest fold away
const FACTORIES = {
  storage: createStorageView, ops: createOpsView, timeline: createTimelineView, load: createLoadView, growth: createGrowthView,
  whatif: createWhatIfView,
};

export function createApp(root, api) {
  // id -> {element, update}, created on first show. Only the active view is in
  // the document, so test ids such as "run-select" stay unique.
  const views = new Map();
  // One loader for the page: an item asked for by two views (or twice) is one request.
  const loader = createLoader();
  const shared = sharedSelections();
  let active = "";
  let listing = null;
  let busy = false;

  const nav = el("nav", { class: "mm-nav", role: "tablist", "aria-label": "Views" });
  const updated = el("span", { testid: "updated" });
  const reload = el("button", { class: "mm-reload", title: "Reload now", "aria-label": "Reload now", testid: "reload" }, "⟳");
  const problems = el("div", { testid: "problems", class: "problems" });
  // A step out of memory: "What would fit?" opens What if on its run, the device's memory as the budget.
  const oom = createOomAlerts({ api, loader, onProject: (run, budget) => {
    shared.ops.selection = { run, tag: "", step: "", host: "", breakdown: "" };
    shared.focus.run = run;
    shared.whatif.budget = budget;
    show("whatif");
  } });
  const slot = el("div", { role: "tabpanel" });
  const main = el("main", { class: "mm-main" }, problems, oom.element, slot);
  root.append(el("header", { class: "mm-header" }, el("div", { class: "mm-title" }, "Model Memory"), nav,
    el("div", { class: "mm-status" }, updated, reload)), main);

  reload.addEventListener("click", () => refresh());

  function show(id) {
    active = id;
    if (!views.has(id)) views.set(id, FACTORIES[id]({ api, loader, shared }));
    if (slot.firstChild !== views.get(id).element) slot.replaceChildren(views.get(id).element);
    for (const button of nav.children) button.setAttribute("aria-selected", String(button.dataset.view === id));
    views.get(id).update(listing);
  }

  function renderNav(list) {
    nav.replaceChildren(...list.map((v) => {
      const button = el("button", { role: "tab", testid: `view-${v.id}` }, v.label);
      button.dataset.view = v.id;
      button.addEventListener("click", () => show(v.id));
      return button;
    }));
  }

  async function refresh() {
    if (busy) return; // a slow listing must not pile up requests
    busy = true;
    try {
      listing = await api.runs();
      updated.textContent = `updated ${formatWallTime(Date.now() / 1000).slice(11)} UTC`;
    } catch (e) {
      problems.replaceChildren(errorBox(e.message, "Listing runs"));
      return;
    } finally {
      busy = false;
    }
    const unfolded = Boolean(problems.querySelector("details.more-problems")?.open); // a poll leaves it as it was
    problems.replaceChildren(...problemBoxes(tagErrors(listing), unfolded));
    oom.update(listing);
    const list = availableViews(listing);
    const ids = list.map((v) => v.id).join();
    if (nav.dataset.ids !== ids) {
      nav.dataset.ids = ids;
      renderNav(list);
    }
    if (!list.length) {
      active = "";
      slot.replaceChildren(emptyState());
      return;
    }
    show(list.some((v) => v.id === active) ? active : list[0].id);
  }

  refresh();
  setInterval(() => {
    if (!document.hidden) refresh();
  }, POLL_MS);
}

/** Selections per kind, shared by the views of that kind (Ops and Timeline show the same trace), each with
 * `focus`: the run last picked in any view, which every view follows where it has that run. */
function sharedSelections() {
  const focus = { run: "" };
  return { focus, breakdown: { focus }, ops: { focus }, loadbench: { focus }, memory: { focus }, whatif: {} };
}

/** One box per unreadable item; past a few, the rest behind a "N more" toggle (open when `unfolded`). */
function problemBoxes(errors, unfolded) {
  const boxes = errors.map((t) => errorBox(t.error, t.run, t.tag));
  if (boxes.length <= PROBLEMS_SHOWN) return boxes;
  const rest = boxes.slice(PROBLEMS_SHOWN);
  return [...boxes.slice(0, PROBLEMS_SHOWN),
    el("details", { class: "more-problems", open: unfolded }, el("summary", {}, `${rest.length} more unreadable items`), rest)];
}
