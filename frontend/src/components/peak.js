// The peak of a traced step, every byte in one category: a 100% bar and one
// card per category. Shared by the Ops and Timeline views. An unknown part
// reads "unknown" with the reason, never 0.

import { el, message, name } from "../dom.js";
import { formatBytesFull, formatHuman, formatMicros } from "../format.js";
import { peakParts } from "../aggregate.js";
import { isPlanned } from "../layer-figures.js";
import { CATEGORY_COLOR, CATEGORY_LABEL, RESIDENT } from "../roles.js";
import { categoryCard, peakCard, shareBar } from "./widgets.js";

/** {element, render(data, t0)}: data has peak_by_category, peak_time_us, breakdown. */
export function createPeakPanel() {
  const title = el("span", { testid: "peak-title" });
  const hint = el("small", {});
  const bar = el("div");
  const cards = el("div", { class: "cards peak-cards", testid: "peak-by-category" });
  const why = el("small", { class: "peak-why", testid: "peak-unattributed-why" });
  const element = el("section", { class: "panel" }, el("h2", {}, title, hint), bar, cards, why);

  return {
    element,
    render(data) {
      const peak = data.peak_by_category || {};
      const parts = peakParts(peak);
      const total = peak.total ?? data.peak_bytes ?? 0;
      const planned = isPlanned(data); // XLA's buffer assignment, not a measurement
      // a count from 0 in the window with state it cannot give (no breakdown, a weights-only one): a floor
      const floor = peak.step_peak_bytes != null && RESIDENT.some((c) => c in peak && peak[c] === null);
      title.textContent = `${planned ? "Planned peak" : "Peak"} in use: ${floor ? "at least " : ""}${formatHuman(total)}`
        + `${planned ? " per device" : ""}`;
      hint.textContent = Number.isFinite(data.peak_time_us) && data.peak_time_us > 0
        ? `at ${formatMicros(data.peak_time_us)} into the trace · every byte in one category; hover a card for what it holds`
        : "every byte in one category; hover a card for what it holds";
      bar.replaceChildren(shareBar(parts.map((p) => ({ ...p, label: CATEGORY_LABEL[p.category] || p.category,
        color: CATEGORY_COLOR[p.category] })), "peak-bar"));
      const fromBreakdown = peak.step_peak_bytes !== null && peak.step_peak_bytes !== undefined;
      const joined = data.breakdown?.tag;
      cards.replaceChildren(
        ...parts.map((p) => categoryCard(p.category, p.bytes, {
          share: p.share, reason: p.reason,
          from: fromBreakdown && RESIDENT.includes(p.category) && joined && p.bytes !== null
            ? ["from breakdown ", name(joined)] : undefined,
        })),
        peakCard("peak-all", { color: CATEGORY_COLOR.total, label: planned ? "Planned peak" : "Peak in use", bytes: total,
          sub: planned ? "XLA's buffer assignment, on each device that runs the step" : totalNote(data, peak, joined) }),
      );
      // what the peak's window holds (a step that made state) and what the bytes from before the trace are
      const notes = data.peak_notes || {};
      const lines = [notes.window, ...["earlier_steps", "held_between_steps", "unattributed"]
        .map((c) => (notes[c] ? `${CATEGORY_LABEL[c]}: ${notes[c]}` : ""))].filter(Boolean);
      why.replaceChildren(...lines.map((line) => el("div", {}, message(`${line}.`))));
      why.hidden = !lines.length;
    },
  };
}

/**
 * What the total is. RunMetadata counts only the step's own allocations (from 0):
 * the run's weights and slots come on top, from the breakdown; a weights-only one leaves the slots out.
 */
function totalNote(data, peak, joined) {
  const step = peak.step_peak_bytes;
  if (step === null || step === undefined) return "the allocator's high-water mark";
  if (!joined) return `the step's own allocations (peak ${formatHuman(step)}); weights and slots unknown: no breakdown in this run`;
  const slotsUnknown = peak.optimizer_slots === null;
  return el("span", { title: `the step's own allocations peak at ${formatBytesFull(step)}` },
    `step's own peak ${formatHuman(step)} + ${slotsUnknown ? "weights" : "weights and slots"} of `, name(joined),
    slotsUnknown ? "; its optimizer state is unknown, not counted" : "");
}
