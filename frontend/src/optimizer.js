// A breakdown's optimizer in words, from the /breakdown answer's optimizer_summary: its one-line summary,
// then each optimizer's settings, with what it wraps (a LossScaleOptimizer's inner optimizer, a
// learning-rate schedule) under it. Pure, no DOM.

import { formatConfigValue } from "./format.js";
import { isTorch } from "./framework.js";

const MAX_DEPTH = 8; // the backend summarises nested objects 8 deep at most

/**
 * optimizer_summary -> {text, sections}: sections depth first, each
 * {depth, key (the config key it is held under, "" at the top), class_name, name, settings: [[key, text]]}.
 * Several optimizers (a GAN's, one per name) are one top-level section each. null without a summary.
 */
export function optimizerSections(summary) {
  if (!summary || typeof summary !== "object" || !Array.isArray(summary.optimizers)) return null;
  const sections = [];
  const several = summary.optimizers.length > 1;
  const walk = (entry, depth, key, named = true) => {
    if (!entry || typeof entry !== "object" || depth > MAX_DEPTH) return;
    const settings = Object.entries(entry.settings && typeof entry.settings === "object" ? entry.settings : {})
      .map(([k, v]) => [k, formatConfigValue(v)]);
    sections.push({ depth, key, class_name: String(entry.class_name ?? ""), name: named ? String(entry.name ?? "") : "", settings });
    for (const [k, nested] of Object.entries(entry.nested && typeof entry.nested === "object" ? entry.nested : {})) {
      walk(nested, depth + 1, k);
    }
  };
  // several optimizers are each under their config key (their `name` is that key); one is the optimizer itself
  for (const entry of summary.optimizers) walk(entry, 0, several ? String(entry?.name ?? "") : "", !several);
  return { text: String(summary.text ?? ""), sections };
}

/** A section's heading: "inner_optimizer: Adam (adam)"; the name left out where it only repeats the class. */
export function sectionHeading(section) {
  const named = section.name && section.name.toLowerCase().replace(/[^a-z0-9]/g, "")
    !== section.class_name.toLowerCase().replace(/[^a-z0-9]/g, "") ? ` (${section.name})` : "";
  return `${section.key ? `${section.key}: ` : ""}${section.class_name || "(unnamed)"}${named}`;
}

/**
 * Where the optimizer panel's settings come from: the file that recorded them, else Keras' compile() or, for a
 * PyTorch breakdown (its `source`), the optimizer as the training script built it.
 */
export function optimizerSource(optimizer, source) {
  if (optimizer?.recorded_in) return `recorded in ${optimizer.recorded_in}`;
  return isTorch({ source }) ? "as the training script built it" : "how the model was compiled";
}
