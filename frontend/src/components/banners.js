// What kind of step a trace is and what its data cannot tell: the notes the Ops and Timeline views show first.
import { el, message } from "../dom.js";
import { UNATTRIBUTED_TYPE } from "../opnames.js";
import { passedOverNote } from "../selection.js";
import { xlaSummary } from "../xla.js";
import { untimedNote } from "../framework.js";
import { allocationsWarning, plannedNote, reservedNote } from "../layer-figures.js";
import { infoBox, warnBox } from "./widgets.js";

/** What kind of step this is and what the data cannot tell, said before any figure. */
export function banners(data) {
  const out = [];
  const xla = xlaSummary(data.xla);
  if (xla) {
    out.push(el("div", { class: "msg info xla", testid: "xla-summary" },
      el("div", { class: "xla-headline", title: xla.methods.map((m) => `${m.text}: ${m.hint}`).join("\n") }, xla.headline),
      xla.unattributed ? el("div", { testid: "xla-unattributed" }, `${xla.unattributed} (rows "${UNATTRIBUTED_TYPE}")`) : null,
      xla.note ? el("div", { class: "xla-note", testid: "xla-note" }, message(xla.note)) : null));
  }
  // XLA's plan standing in for allocations nobody recorded: complete figures, said so; missing ones: a warning
  if (plannedNote(data)) out.push(infoBox(plannedNote(data), "allocations-note"));
  else if (data.allocations && data.allocations !== "all") out.push(warnBox(allocationsWarning(data), "allocations-note"));
  const reserved = reservedNote(data);
  if (reserved) out.push(infoBox(reserved, "reserved-note"));
  if (data.timed === false) out.push(infoBox(untimedNote(data), "untimed-note"));
  const passed = passedOverNote(data);
  if (passed) out.push(warnBox(passed, "passed-over-note"));
  return out;
}
