// Steps that ran out of memory, above every view: what the step asked for and where, what was in
// use then, and a way to the What-if view with the device's memory as the budget.

import { el, message, name } from "../dom.js";
import { oomBudget, oomDetails, oomHeadline } from "../oom.js";
import { runsOfKind } from "../selection.js";

/** {element, update(listing)}; onProject(run, budget) opens the What-if view on that run. */
export function createOomAlerts({ api, loader, onProject }) {
  const element = el("div", { testid: "oom-alerts" });
  let shownKey = "";

  async function update(listing) {
    const items = runsOfKind(listing, "oom").flatMap((r) => r.tags.map((t) => ({ run: r.run, tag: t.tag, step: "",
      host: "", breakdown: "", max: t.max_step })));
    const key = JSON.stringify(items);
    if (key === shownKey) return;
    shownKey = key;
    const traced = new Set(runsOfKind(listing, "ops").map((r) => r.run));
    const boxes = await Promise.all(items.map(async (item) => {
      try {
        const answer = await loader.get(`oom\u0000${item.run}\u0000${item.tag}\u0000${item.max}`, () => api.oom(item));
        return box(item, answer, traced.has(item.run));
      } catch (e) {
        return el("div", { class: "msg error", role: "alert" }, name(item.run), ` / ${item.tag}: `, message(e.message));
      }
    }));
    if (key === shownKey) element.replaceChildren(...boxes);
  }

  function box(item, answer, hasTrace) {
    const report = answer.oom || {};
    const budget = oomBudget(report);
    const next = hasTrace
      ? el("button", { type: "button", testid: "oom-project" }, "What would fit?")
      : el("span", {}, "To see what would fit, trace a step that does (MemoryCallback(profile_steps=...)): "
        + "the What if view projects it to other batch sizes and budgets.");
    if (hasTrace) next.addEventListener("click", () => onProject(item.run, budget));
    return el("div", { class: "msg error oom", role: "alert", testid: "oom" },
      el("div", {}, el("b", {}, "Out of memory · "), name(item.run), ": ", name(oomHeadline(report, answer.step))),
      ...oomDetails(report).map((line) => el("div", {}, name(line))),
      el("details", {}, el("summary", {}, report.error_type || "the error"), el("pre", {}, message(report.message || ""))),
      el("div", {}, next));
  }

  return { element, update };
}
