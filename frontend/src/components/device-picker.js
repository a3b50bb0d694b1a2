// The Ops view's device picker: a sharded or replicated step runs each op once per device, one row each; picking
// a device narrows the op table to its rows (a `device=...` term the server reads beside what the user typed).
import { el, option } from "../dom.js";
import { deviceFilterTerm } from "../devices.js";

const ALL = "";

/** {element, show(devices)}: hidden for one device or none; `onPick(term)` gets the filter term ("" for all). */
export function createDevicePicker(onPick) {
  const select = el("select", { testid: "device-select", "aria-label": "Device" });
  const element = el("div", { class: "toolbar device-picker", testid: "device-picker" },
    el("label", {}, "Device ", select),
    el("small", { class: "hint", testid: "device-note" },
      "The op table lists the picked device's ops; the layer totals, the top ops and each layer's op calls sum every device."));
  let shown = "";
  let picked = ALL;
  select.addEventListener("change", () => {
    picked = select.value;
    onPick(deviceFilterTerm(picked));
  });
  return {
    element,
    show(devices) {
      const list = (Array.isArray(devices) ? devices : []).map(String).filter((d) => deviceFilterTerm(d));
      element.hidden = list.length <= 1;
      if (!list.includes(picked)) picked = ALL; // another step or run without that device: all of them again
      const key = JSON.stringify(list);
      if (key !== shown) {
        shown = key;
        select.replaceChildren(option(ALL, `All ${list.length} devices`, picked === ALL),
          ...list.map((d) => option(d, d, d === picked)));
      }
      select.value = picked;
      onPick(element.hidden ? "" : deviceFilterTerm(picked));
    },
  };
}
