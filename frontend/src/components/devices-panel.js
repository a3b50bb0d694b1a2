// Storage's "Per device" panel: what each device holds of the variables, by role, when they lie on several
// (a sharded Keras/JAX model, a MirroredStrategy's replicas), and every variable counted once beside it.
import { el, name } from "../dom.js";
import { formatBytesFull, formatInt } from "../format.js";
import { ROLES, ROLE_LABEL } from "../roles.js";
import { deviceHeadline, deviceRows, layoutText } from "../devices.js";
import { createTable } from "./table.js";
import { panel } from "./widgets.js";

const COLUMNS = [
  { key: "device", label: "Device", width: "minmax(180px, 2fr)", minWidth: 180, render: (r) => name(r.device) },
  ...ROLES.map((role) => ({ key: role, label: ROLE_LABEL[role], width: "minmax(120px, 1fr)", minWidth: 120, numeric: true,
    text: (r) => formatInt(r[role]) })),
  { key: "total_bytes", label: "Total bytes", width: "minmax(130px, 1fr)", minWidth: 130, numeric: true, text: (r) => formatInt(r.total_bytes) },
];

/** {element, show(devices)}: hidden when every variable is on one device (`devices` null). */
export function createDevicesPanel() {
  const headline = el("div", { class: "device-headline", testid: "device-summary" });
  const layout = el("small", { class: "hint", testid: "device-layout" });
  const table = createTable({ testid: "device-table", columns: COLUMNS, label: "Bytes per device", placeholder: "Filter devices" });
  const element = panel("Per device", "the bytes of the variables each device holds, by role", headline, layout, table.element);
  element.setAttribute("data-testid", "devices");
  element.hidden = true;
  return {
    element,
    show(devices) {
      element.hidden = !devices;
      if (!devices) return;
      headline.textContent = deviceHeadline(devices);
      headline.title = `every variable once: ${formatBytesFull(devices.logical_total)}`;
      layout.textContent = layoutText(devices);
      table.setRows(deviceRows(devices));
    },
  };
}
