// HTTP access to the plugin backend. URLs are relative ("./runs"): the iframe's
// <base href="plugin/modelmem/"> makes them work under --path_prefix too.

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** A 202 answer: the item is still being reduced; ask again later. */
export class Pending {
  constructor(body) {
    this.progress = Number.isFinite(body?.progress) ? body.progress : 0;
    this.message = typeof body?.message === "string" ? body.message : "";
    this.elapsed_s = Number.isFinite(body?.elapsed_s) ? body.elapsed_s : null;
  }
}

export const isPending = (answer) => answer instanceof Pending;

/** GET ./route?params: the JSON body, a Pending for 202; non-2xx throws with the server's text. */
export async function getJson(route, params = {}) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") query.set(key, String(value));
  }
  const qs = query.toString();
  let response;
  try {
    response = await fetch(`./${route}${qs ? `?${qs}` : ""}`, { headers: { Accept: "application/json" } });
  } catch (e) {
    throw new ApiError(0, `TensorBoard did not answer (${e.message}). Is it still running?`);
  }
  if (!response.ok) {
    const text = (await response.text()).trim();
    throw new ApiError(response.status, text || `${response.status} ${response.statusText}`);
  }
  if (response.status === 202) return new Pending(await response.json().catch(() => ({})));
  return response.json();
}

/** The query parameters naming one item: {run, tag, step, host, breakdown} ("" = server default). */
export function itemParams(item) {
  return { run: item.run, tag: item.tag, step: item.step, host: item.host, breakdown: item.breakdown };
}

/** A page request: {offset, limit, sort, order, filter}. */
function pageParams(page) {
  return { offset: page.offset, limit: page.limit, sort: page.sort, order: page.order, filter: page.filter };
}

/**
 * Rows of an answer's table sent column by column ({length, columns: {field: [...]}}, a dict
 * field as {field: {key: [...]}}; views.as_columns on the server): field names once, not per row.
 */
export function rowsOf(table) {
  const length = Number.isInteger(table?.length) ? table.length : 0;
  const columns = table?.columns && typeof table.columns === "object" ? Object.entries(table.columns) : [];
  const rows = Array.from({ length }, () => ({}));
  for (const [field, values] of columns) {
    if (Array.isArray(values)) {
      for (let i = 0; i < length; i++) rows[i][field] = values[i] ?? null;
    } else if (values && typeof values === "object") {
      const parts = Object.entries(values).filter(([, v]) => Array.isArray(v));
      for (let i = 0; i < length; i++) {
        const entries = parts.map(([key, v]) => [key, v[i] ?? null]);
        rows[i][field] = entries.some(([, v]) => v !== null) ? Object.fromEntries(entries) : null; // a row without it
      }
    }
  }
  return rows;
}

/** An item's answer with its layer tree as rows (a 202's Pending as it is). */
const withLayerRows = (answer) => (isPending(answer) || !answer ? answer : { ...answer, layers: rowsOf(answer.layers) });

export const api = {
  runs: () => getJson("runs"),
  steps: (item) => getJson("steps", { run: item.run, tag: item.tag }),
  breakdown: (item) => getJson("breakdown", itemParams(item)).then(withLayerRows),
  variables: (item, page) => getJson("variables", { ...itemParams(item), ...pageParams(page) }),
  ops: (item) => getJson("ops", itemParams(item)).then(withLayerRows),
  opRows: (item, page) => getJson("op_rows", { ...itemParams(item), ...pageParams(page) }),
  timeline: (item) => getJson("timeline", itemParams(item)),
  hosts: (item) => getJson("hosts", { run: item.run, tag: item.tag, step: item.step }),
  loadbench: (item) => getJson("loadbench", itemParams(item)),
  growth: (item) => getJson("growth", { run: item.run, tag: item.tag }),
  whatif: (item, question) => getJson("whatif", { ...itemParams(item), ...question }),
  oom: (item) => getJson("oom", itemParams(item)),
};
