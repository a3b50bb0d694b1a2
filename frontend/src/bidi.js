// Bidi isolation of untrusted text (run, tag, layer, op and variable names,
// server messages). A name holding U+202E (RIGHT-TO-LEFT OVERRIDE) must not
// reverse the text around it. Pure: the DOM side is in dom.js.

const CONTROLS = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/;
const FSI = "\u2068"; // FIRST STRONG ISOLATE
const PDI = "\u2069"; // POP DIRECTIONAL ISOLATE: also ends any override left open inside

/** For plain-text places (option labels, tooltips, chart labels): the text as an isolate. */
export function isolate(text) {
  return `${FSI}${String(text ?? "")}${PDI}`;
}

export function hasBidiControls(text) {
  return CONTROLS.test(String(text ?? ""));
}

/**
 * A free-text message cut into pieces; each whitespace-delimited word holding a
 * bidi control comes out `isolate: true`, so an override inside a quoted name
 * ends with that word instead of reversing the rest of the message.
 */
export function bidiPieces(text) {
  const s = String(text ?? "");
  if (!CONTROLS.test(s)) return [{ text: s, isolate: false }];
  const pieces = [];
  for (const part of s.split(/(\s+)/)) {
    if (!part) continue;
    const isolated = CONTROLS.test(part);
    const last = pieces[pieces.length - 1];
    if (last && !last.isolate && !isolated) last.text += part;
    else pieces.push({ text: part, isolate: isolated });
  }
  return pieces;
}
