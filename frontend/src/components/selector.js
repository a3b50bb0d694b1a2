// Run, tag and step pickers for one kind of data. Step "" is "latest": it
// follows new steps while training writes them.

import { el, option } from "../dom.js";
import { formatInt, formatWallTime } from "../format.js";
import { runsOfKind } from "../selection.js";

export function createSelector(onChange) {
  const runSelect = el("select", { testid: "run-select", "aria-label": "Run" });
  const tagSelect = el("select", { testid: "tag-select", "aria-label": "Tag" });
  const stepSelect = el("select", { testid: "step-select", "aria-label": "Step" });
  const element = el("div", { class: "toolbar" },
    el("label", {}, "Run", runSelect), el("label", {}, "Tag", tagSelect), el("label", {}, "Step", stepSelect));

  runSelect.addEventListener("change", () => onChange({ run: runSelect.value, tag: "", step: "" }));
  tagSelect.addEventListener("change", () => onChange({ run: runSelect.value, tag: tagSelect.value, step: "" }));
  stepSelect.addEventListener("change", () => onChange({
    run: runSelect.value, tag: tagSelect.value, step: stepSelect.value === "" ? "" : Number(stepSelect.value),
  }));

  return {
    element,
    update(listing, kind, selection, steps) {
      const runs = runsOfKind(listing, kind);
      runSelect.replaceChildren(...runs.map((r) => option(r.run, r.run, r.run === selection.run)));
      const tags = runs.find((r) => r.run === selection.run)?.tags || [];
      tagSelect.replaceChildren(...tags.map((t) => option(t.tag, t.origin === "run_metadata" ? `${t.tag} (RunMetadata)` : t.tag,
        t.tag === selection.tag)));
      const latest = steps.length ? steps[steps.length - 1].step : null;
      stepSelect.replaceChildren(
        option("", latest === null ? "latest" : `latest (step ${formatInt(latest)})`, selection.step === ""),
        ...[...steps].reverse().map((s) => option(String(s.step), `step ${formatInt(s.step)} · ${formatWallTime(s.wall_time)}`,
          selection.step === s.step)),
      );
    },
  };
}
