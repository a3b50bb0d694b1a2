// Which views have data and what is selected in each. Pure: the app keeps the
// state, this decides how a new ./runs listing changes it.

export const VIEWS = [
  { id: "storage", label: "Storage", kind: "breakdown" },
  { id: "ops", label: "Ops", kind: "ops" },
  { id: "timeline", label: "Timeline", kind: "ops" },
  { id: "load", label: "Load", kind: "loadbench" },
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

/**
 * Keep the user's run/tag/step if they still exist; otherwise pick the first
 * run and tag. step "" means "latest" and follows new steps as they arrive.
 */
export function reconcile(selection, listing, kind) {
  const runs = runsOfKind(listing, kind);
  if (!runs.length) return { run: "", tag: "", step: "" };
  const run = runs.find((r) => r.run === selection?.run) || runs[0];
  const keepRun = run.run === selection?.run;
  const tag = (keepRun && run.tags.find((t) => t.tag === selection.tag)) || run.tags[0];
  const keepTag = keepRun && tag.tag === selection.tag;
  return { run: run.run, tag: tag.tag, step: keepTag ? selection.step ?? "" : "" };
}

/** The tag to use for `run` when comparing runs: the same tag name if it has one. */
export function compareTag(listing, run, preferredTag) {
  const entry = runsOfKind(listing, "breakdown").find((r) => r.run === run);
  if (!entry) return null;
  return (entry.tags.find((t) => t.tag === preferredTag) || entry.tags[0]).tag;
}
