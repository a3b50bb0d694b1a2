// Every host of a profile session side by side (one .xplane.pb per host, e.g.
// client.trace of remote workers), or every rank of a PyTorch job (one trace each): peak, resident and
// step bytes per allocator, op time and the collectives' share of it, so one host or rank using more
// than the others shows at a glance.

import { el, name } from "../dom.js";
import { formatBytesFull, formatHuman, formatInt, formatMicros, formatProgress, isKnown } from "../format.js";
import { createTable } from "./table.js";
import { errorBox, panel } from "./widgets.js";

const RETRY_MS = 1500; // hosts still reducing are asked about again this often

function bar(value, max) {
  const fill = el("span", { class: "inline-bar-fill" });
  fill.style.width = `${max > 0 ? Math.round((100 * value) / max) : 0}%`;
  return el("span", { class: "inline-bar" }, fill);
}

/** A host row's device count ("8"), or its one device's short name; "" where the answer has none. */
export function hostDevices(row) {
  const devices = row?.devices || [];
  if (devices.length > 1) return formatInt(devices.length);
  return devices.length ? String(devices[0]).replace(/^\/(device|host):/, "") : "";
}

/** "4.12 ms (36%)" of a row's op time spent in collectives, "" where it had none or was not timed. */
export function collectiveText(row) {
  if (!isKnown(row?.collective_us) || !(row.collective_us > 0)) return "";
  const share = isKnown(row.time_us) && row.time_us > 0 ? ` (${Math.round((100 * row.collective_us) / row.time_us)}%)` : "";
  return `${formatMicros(row.collective_us)}${share}`;
}

export function createHostsPanel({ api, onPick }) {
  let max = 0;
  const columns = [
    { key: "host", label: "Host", width: "minmax(160px, 2fr)", minWidth: 160, render: (r) => name(r.host) },
    { key: "allocator", label: "Allocator", width: "minmax(110px, 1fr)", minWidth: 110, render: (r) => name(r.allocator) },
    { key: "devices", label: "Devices", width: "90px", numeric: true, text: (r) => hostDevices(r),
      title: "the devices the host's ops ran on; a planned peak is each device's (one program on each)" },
    { key: "peak_bytes", label: "Peak", width: "minmax(220px, 2fr)", minWidth: 220, numeric: true, left: true,
      text: (r) => `${formatBytesFull(r.peak_bytes)}${r.planned ? " planned, per device" : ""}`,
      render: (r) => el("span", { class: "bar-cell" }, bar(r.peak_bytes, max),
        `${formatHuman(r.peak_bytes)}${r.planned ? " planned, per device" : ""}`) },
    { key: "resident_bytes", label: "Resident", width: "130px", numeric: true,
      text: (r) => (r.resident_bytes === null ? "not counted" : formatInt(r.resident_bytes)),
      title: "bytes in use all through the trace (weights, slots, ...); RunMetadata-style counts start at 0" },
    { key: "step_bytes", label: "Step bytes", width: "130px", numeric: true, text: (r) => formatInt(r.step_bytes),
      title: "peak minus resident: what the step itself allocated" },
    { key: "vs", label: "× smallest peak", width: "120px", numeric: true, text: (r) => (r.vs ? `${r.vs.toFixed(2)}×` : "") },
    { key: "time_us", label: "Op time", width: "110px", numeric: true,
      text: (r) => (isKnown(r.time_us) ? formatMicros(r.time_us) : "not timed"),
      title: "the host's op time, summed over its ops on all threads" },
    { key: "collective_us", label: "Collectives", width: "150px", numeric: true, text: (r) => collectiveText(r),
      title: "of the op time, what moved tensors between ranks (c10d ops, the backend's own work)" },
  ];
  const table = createTable({ testid: "host-table", columns, label: "Hosts", sort: { key: "peak_bytes", direction: "desc" }, rowAction: "shows the host's ops",
    onRowClick: (row) => onPick(row.host) });
  const notes = el("div");
  const element = panel("Hosts", "every host of this profile session; click one to show its ops", notes, table.element);
  const [heading, hint] = [element.querySelector("h2").firstChild, element.querySelector("h2 small")];
  element.dataset.testid = "hosts";
  element.hidden = true;
  let shownFor = "";
  let timer = 0;

  async function load(key, item) {
    clearTimeout(timer);
    let answer;
    try {
      answer = await api.hosts(item);
    } catch (e) {
      if (key !== shownFor) return;
      table.setRows([]);
      notes.replaceChildren(errorBox(e.message, item.run, item.tag));
      return;
    }
    if (key !== shownFor) return;
    const rows = answer.rows || [];
    const peaks = rows.map((r) => r.peak_bytes).filter((b) => b > 0);
    const least = peaks.length ? Math.min(...peaks) : 0;
    max = peaks.length ? Math.max(...peaks) : 0;
    table.setRows(rows.map((r) => ({ ...r, vs: least ? r.peak_bytes / least : null })));
    notes.replaceChildren(
      ...(answer.pending || []).map((p) => el("div", { class: "msg progress" }, name(p.host), `: ${formatProgress(p)}`)),
      ...(answer.errors || []).map((e) => errorBox(e.error, e.host)));
    if ((answer.pending || []).length) timer = setTimeout(() => load(key, item), RETRY_MS);
  }

  return {
    element,
    /** Show the hosts of `item` (a profile session), or hide for other items. */
    show(item, data) {
      const hosts = data.hosts || [];
      element.hidden = !hosts.length;
      if (!hosts.length) {
        shownFor = "";
        clearTimeout(timer);
        return;
      }
      const ranks = data.origin === "torch"; // a PyTorch job's ranks, one trace each
      heading.textContent = ranks ? "Ranks" : "Hosts";
      hint.textContent = ranks ? "every rank of this job, one trace each; click one to show its ops"
        : "every host of this profile session; click one to show its ops";
      const key = JSON.stringify([item.run, item.tag, data.step]);
      if (key === shownFor) return;
      shownFor = key;
      table.setRows([]); // the last item's hosts must not stand under this one
      notes.replaceChildren(el("div", { class: "loading" }, "Loading the hosts…"));
      load(key, { run: item.run, tag: item.tag, step: data.step ?? "" });
    },
  };
}
