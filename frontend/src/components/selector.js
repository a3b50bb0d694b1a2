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
  const joinLabel = el("label", { title: "the variable breakdown whose layers, weights and slots the ops are joined with" },
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

  return {
    element,
    /** auto: the breakdown the server picked for "" (shown in that option's label). */
    update(listing, kind, selection, steps, auto = "") {
      const runs = runsOfKind(listing, kind);
      runSelect.replaceChildren(...runs.map((r) => option(r.run, r.run, r.run === selection.run)));
      const tags = runs.find((r) => r.run === selection.run)?.tags || [];
      tagSelect.replaceChildren(...tags.map((t) => option(t.tag, tagLabel(t), t.tag === selection.tag)));
      const numbered = steps.filter((s) => s.step !== null && s.step !== undefined);
      const latest = numbered.length ? numbered[numbered.length - 1].step : null;
      stepSelect.replaceChildren(
        option("", latest === null ? "latest" : `latest (step ${formatInt(latest)})`, selection.step === ""),
        ...[...numbered].reverse().map((s) => option(String(s.step), `step ${formatInt(s.step)} · ${formatWallTime(s.wall_time)}`,
          selection.step === s.step)),
      );
      if (!joins) return;
      const hosts = tags.find((t) => t.tag === selection.tag)?.hosts || [];
      hostLabel.hidden = hosts.length < 2;
      hostSelect.replaceChildren(...hosts.map((h) => option(h, h, (selection.host || hosts[0]) === h)));
      const joinable = breakdownTags(listing, selection.run);
      joinLabel.hidden = joinable.length < 2;
      joinSelect.replaceChildren(option("", auto ? `nearest step (${auto})` : "nearest step", selection.breakdown === ""),
        ...joinable.map((t) => option(t, t, selection.breakdown === t)));
    },
  };
}
