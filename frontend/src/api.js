// HTTP access to the plugin backend. URLs are relative ("./runs"): the iframe's
// <base href="plugin/modelmem/"> makes them work under --path_prefix too.

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** GET ./route?params as JSON; non-2xx responses carry a plain-text reason. */
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
  return response.json();
}

export const api = {
  runs: () => getJson("runs"),
  steps: (run, tag) => getJson("steps", { run, tag }),
  breakdown: (run, tag, step) => getJson("breakdown", { run, tag, step }),
  ops: (run, tag, step) => getJson("ops", { run, tag, step }),
  loadbench: (run, tag, step) => getJson("loadbench", { run, tag, step }),
};
