// Run, tag and step pickers for one kind of data, and for op traces the host
// (a profile session with several hosts) and the breakdown the ops are joined
// with (a run with several, e.g. generator / discriminator). "" is the server's
// default: the latest step (it follows new steps while training writes them),
// the first host, the breakdown nearest the trace's step.

import { el, option } from "../dom.js";
import { formatInt, formatWallTime } from "../format.js";
import { breakdownTags, runsOfKind, tagLabel } from "../selection.js";

/** onChange(change): the fields a picker changed. steps: false for data read over all its steps at once
 * (memory samples): no step picker. */
export function createSelector(onChange, { joins = false, steps: stepPicker = true } = {}) {
  const runSelect = el("select", { testid: "run-select", "aria-label": "Run" });
  const tagSelect = el("select", { testid: "tag-select", "aria-label": "Tag" });
  const stepSelect = el("select", { testid: "step-select", "aria-label": "Step" });
  const hostSelect = el("select", { testid: "host-select", "aria-label": "Host" });
  const joinSelect = el("select", { testid: "breakdown-select", "aria-label": "Breakdown joined with the ops" });
  const hostLabel = el("label", {}, "Host", hostSelect);
  const joinLabel = el("label", { title: "the variable breakdown whose layers, weights and slots the ops are joined with; "
    + "automatic: as tb-modelmem estimate joins them (the run's breakdown summaries nearest the trace's step, else its "
    + "checkpoints; of those, the first that names an optimizer, else the newest)" },
    "Joined with", joinSelect);
  const element = el("div", { class: "toolbar" },
    el("label", {}, "Run", runSelect), el("label", {}, "Tag", tagSelect), stepPicker ? el("label", {}, "Step", stepSelect) : null,
    joins ? [hostLabel, joinLabel] : null);
  hostLabel.hidden = true;
  joinLabel.hidden = true;

  // Each picker says only what it changed: the owner of the selection applies it to the newest one, so a tag
  // picked while the new run's steps are on the way does not put back the run it replaced.
  runSelect.addEventListener("change", () => onChange({ run: runSelect.value, tag: "", step: "", host: "", breakdown: "" }));
  tagSelect.addEventListener("change", () => onChange({ tag: tagSelect.value, step: "", host: "" }));
  stepSelect.addEventListener("change", () => onChange({ step: stepSelect.value === "" ? "" : Number(stepSelect.value) }));
  hostSelect.addEventListener("change", () => onChange({ host: hostSelect.value }));
  joinSelect.addEventListener("change", () => onChange({ breakdown: joinSelect.value }));

  // A picker's options are rebuilt only when they change: rebuilt on every poll, an open dropdown can close.
  const shown = new Map(); // select -> its options, as last built
  const fill = (select, options, value) => {
    const key = JSON.stringify(options);
    if (shown.get(select) !== key) {
      shown.set(select, key);
      select.replaceChildren(...options.map(([v, label]) => option(v, label, v === value)));
    }
    if (select.value !== value && options.some(([v]) => v === value)) select.value = value;
  };

  return {
    element,
    /** auto: the breakdown the server picked for "" (shown in that option's label). */
    update(listing, kind, selection, steps, auto = "") {
      const runs = runsOfKind(listing, kind);
      fill(runSelect, runs.map((r) => [r.run, r.run]), selection.run);
      const tags = runs.find((r) => r.run === selection.run)?.tags || [];
      fill(tagSelect, tags.map((t) => [t.tag, tagLabel(t)]), selection.tag);
      const numbered = steps.filter((s) => s.step !== null && s.step !== undefined);
      const latest = numbered.length ? numbered[numbered.length - 1].step : null;
      fill(stepSelect, [["", latest === null ? "latest" : `latest (step ${formatInt(latest)})`],
        ...[...numbered].reverse().map((s) => [String(s.step), `step ${formatInt(s.step)} · ${formatWallTime(s.wall_time)}`])],
      String(selection.step ?? ""));
      if (!joins) return;
      const hosts = tags.find((t) => t.tag === selection.tag)?.hosts || [];
      hostLabel.hidden = hosts.length < 2;
      fill(hostSelect, hosts.map((h) => [h, h]), selection.host || hosts[0] || "");
      const joinable = breakdownTags(listing, selection.run);
      joinLabel.hidden = joinable.length < 2;
      fill(joinSelect, [["", auto ? `automatic (${auto})` : "automatic"], ...joinable.map((t) => [t, t])],
        selection.breakdown || "");
    },
  };
}
