// Which views have data and what is selected in each. Pure: the app keeps the
// state, this decides how a new ./runs listing changes it.

import { formatInt } from "./format.js";

export const VIEWS = [
  { id: "storage", label: "Storage", kind: "breakdown" },
  { id: "ops", label: "Ops", kind: "ops" },
  { id: "timeline", label: "Timeline", kind: "ops" },
  { id: "whatif", label: "What if", kind: "ops" },
  { id: "load", label: "Load", kind: "loadbench" },
  { id: "growth", label: "Growth", kind: "memory" },
];

/** Runs that have readable tags of `kind`: [{run, tags: [tag info]}]. */
export function runsOfKind(listing, kind) {
  const out = [];
  for (const { run, tags } of listing?.runs || []) {
    const matching = (tags || []).filter((t) => t.kind === kind && !t.error);
    if (matching.length) out.push({ run, tags: matching });
  }
  return out;
}

/** Tags the backend could not read, to show with their reason. */
export function tagErrors(listing) {
  const out = [];
  for (const { run, tags } of listing?.runs || []) {
    for (const t of tags || []) if (t.error) out.push({ run, tag: t.tag, error: t.error });
  }
  return out;
}

export function availableViews(listing) {
  return VIEWS.filter((v) => runsOfKind(listing, v.kind).length > 0);
}

/** The listing's entry for (run, tag) of `kind`, or undefined. */
export function tagInfo(listing, kind, run, tag) {
  return runsOfKind(listing, kind).find((r) => r.run === run)?.tags.find((t) => t.tag === tag);
}

/** The breakdown tags of a run (what an op trace can be joined with). */
export function breakdownTags(listing, run) {
  return (runsOfKind(listing, "breakdown").find((r) => r.run === run)?.tags || []).map((t) => t.tag);
}

/**
 * Keep the user's run/tag/step/host/breakdown if they still exist; otherwise
 * pick the first run and tag (the first not in `unreadable`, "run\0tag" keys of
 * items that failed to read when picked this way). "" means the server's default:
 * step "" is the latest (it follows new steps), host "" the first, breakdown ""
 * the one nearest the trace's step.
 */
export function reconcile(selection, listing, kind, unreadable = new Set()) {
  const runs = runsOfKind(listing, kind);
  if (!runs.length) return { run: "", tag: "", step: "", host: "", breakdown: "" };
  const run = runs.find((r) => r.run === selection?.run) || runs[0];
  const keepRun = run.run === selection?.run;
  const tag = (keepRun && run.tags.find((t) => t.tag === selection.tag))
    || run.tags.find((t) => !unreadable.has(`${run.run}\0${t.tag}`)) || run.tags[0];
  const keepTag = keepRun && tag.tag === selection.tag;
  const host = keepTag && (tag.hosts || []).includes(selection.host) ? selection.host : "";
  const breakdown = keepRun && breakdownTags(listing, run.run).includes(selection.breakdown) ? selection.breakdown : "";
  return { run: run.run, tag: tag.tag, step: keepTag ? selection.step ?? "" : "", host, breakdown };
}

/**
 * The selection moved to `run`, the run the user last picked in any view, where this kind has it and the
 * selection is on another: a run picked on Storage is the one What if projects. Its tag, step, host and
 * breakdown start over (reconcile picks them).
 */
export function followRun(selection, run, listing, kind) {
  if (!run || selection?.run === run || !runsOfKind(listing, kind).some((r) => r.run === run)) return selection;
  return { run, tag: "", step: "", host: "", breakdown: "" };
}

/**
 * What identifies one answer: the route, the item and, for "latest" and joins,
 * the steps they stand for, so a new step or breakdown makes a new answer.
 */
export function itemKey(route, selection, info, listing) {
  const step = selection.step === "" ? `latest@${info?.max_step ?? ""}` : selection.step;
  const joined = !["ops", "timeline", "whatif"].includes(route) ? ""
    : (runsOfKind(listing, "breakdown").find((r) => r.run === selection.run)?.tags || []).map((t) => `${t.tag}@${t.max_step}`).join(",");
  return [route, selection.run, selection.tag, step, selection.host || "", selection.breakdown || "", joined].join("\u0000");
}

/** The tag to use for `run` when comparing runs: the same tag name if it has one. */
export function compareTag(listing, run, preferredTag) {
  const entry = runsOfKind(listing, "breakdown").find((r) => r.run === run);
  if (!entry) return null;
  return (entry.tags.find((t) => t.tag === preferredTag) || entry.tags[0]).tag;
}

/** A tag's label in the picker: what it is when its name does not say. */
export function tagLabel(info) {
  if (info.origin === "run_metadata") return `${info.tag} (RunMetadata)`;
  if (info.origin === "profile") {
    const hosts = (info.hosts || []).length;
    return `${info.tag} (TF2 profile${hosts > 1 ? `, ${hosts} hosts` : ""})`;
  }
  return info.tag;
}

/** The breakdowns the join passed over as not readable, each with why, and what it took instead: a newer
 * checkpoint that cannot be read must not silently leave the ops on an older one. */
export function passedOverNote(data) {
  const passed = Array.isArray(data?.breakdowns_unreadable) ? data.breakdowns_unreadable : [];
  if (!passed.length) return "";
  const atStep = (step) => (step === null || step === undefined ? "" : ` at step ${formatInt(step)}`);
  // a file's error names its path already ("run/torch/z.pt: corrupt zip"): said once
  const each = passed.map((p) => (String(p.error).includes(String(p.tag).split("/").filter(Boolean).pop() ?? "\0")
    && atStep(p.step) === ""
    ? p.error : `${p.tag}${atStep(p.step)}: ${p.error}`));
  const joined = data.breakdown?.tag;
  const instead = joined ? `joined with ${joined}${atStep(data.breakdown.step)} instead` : "joined with no breakdown";
  return `Passed over, not readable: ${each.join("; ")}. The ops are ${instead}.`;
}
