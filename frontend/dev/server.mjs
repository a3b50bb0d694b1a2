// Development server: the built bundle inside a page shaped like TensorBoard's
// plugin iframe (same <base>, a CSP at least as strict: no 'unsafe-eval'),
// answering the HTTP API from test/fixtures/ (node dev/make-fixtures.mjs), plus
// a 20,000-op trace, an item that answers 202 for its first seconds, hostile
// names, an unreadable tag, and memory samples for Growth (two real loops, a sparse one
// with a GPU, hostile names). `npm run dev` -> http://localhost:6124/

import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { fileURLToPath } from "node:url";
import { bigLayers, bigOps } from "./big-trace.mjs";

const PORT = Number(process.env.PORT || 6124);
const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const fixture = (name) => JSON.parse(readFileSync(here(`../test/fixtures/${name}`), "utf8"));

const BOOT = 'import("./index.js").then((m) => void m.render());';
const PAGE = `<!DOCTYPE html><head><base href="plugin/modelmem/" /></head><body><script type="module">${BOOT}</script></body>`;
const CSP = [
  "default-src 'self'", "img-src 'self' data: blob:", "style-src 'self' 'unsafe-inline'", "object-src 'none'",
  `script-src 'self' 'sha256-${createHash("sha256").update(BOOT).digest("base64")}'`,
].join(";");

const RLO = "evil\u202Erun_name";
const LONG = `long_${"x".repeat(10000)}`;
const SLOW_SECONDS = 6;
let slowSince = null; // the slow item reduces for SLOW_SECONDS from when it is first asked for

const BREAKDOWNS = { "convnet_adam/train": "breakdown-adam.json", "convnet_sgd/train": "breakdown-sgd.json",
  tf1_convnet_adam: "breakdown-ckpt.json", [RLO]: "breakdown-adam.json", [LONG]: "breakdown-sgd.json" };
const OPS = { lenet_trace: "lenet", tf1_convnet_adam: "tf1", slow: "lenet", memory_profile: "lenet" };
// A TF 2.3-2.10 memory profile in a run with no breakdown: no op times, weights and slots unknown.
const UNKNOWN_RESIDENT = "no variable breakdown in this run: record one to split the resident memory";
function memoryOnly(data) {
  const peak = { ...data.peak_by_category, weights: null, non_trainable: null, optimizer_slots: null,
    unattributed: data.peak_by_category.unattributed + data.peak_by_category.weights + data.peak_by_category.optimizer_slots,
    unknown: { weights: UNKNOWN_RESIDENT, non_trainable: UNKNOWN_RESIDENT, optimizer_slots: UNKNOWN_RESIDENT } };
  return { ...data, run: "memory_profile", tag: "profile/2021_05_04", timed: false, breakdown: null, breakdowns: [],
    allocations: "all", allocations_note: "", peak_by_category: peak, top_time: [],
    join: { joined_time_us: 0, fraction: null, vocabulary: "trace" } };
}
const BIG = bigOps(20000);

// Growth: the seed-004 loops (models kept in a list; a plain fit), plus variants made here.
const XSS = "<script>alert(1)</script>";
/** The keep loop with names from hostile user code: markup, an RLO, a 10,000-character model. */
function hostileGrowth(data) {
  const rename = (rows, names) => rows.map((r, i) => ({ ...r, name: names[i % names.length] }));
  const names = [XSS, RLO, LONG, "<img src=x onerror=alert(1)>"];
  const e = data.explained_by;
  return { ...data, labels: [{ step: 3, label: `${XSS} ${RLO}` }],
    explained_by: { ...e, models: rename(e.models, names), variables_by_owner: rename(e.variables_by_owner, names),
      graph_ops_by_function: rename(e.graph_ops_by_function, [LONG, ...names]), objects_by_type: rename(e.objects_by_type, names) } };
}
/** The fit loop sampled as MemoryCallback does between censuses: RSS and a GPU every step, the census every 8th step, a GPU reading missing, one sample unreadable. */
function sparseGrowth(data) {
  const rss = data.series.rss_bytes;
  const steps = Array.from({ length: 33 }, (_, i) => i);
  const at = (i) => rss.values[Math.min(rss.values.length - 1, Math.floor(i / 2))];
  const every4 = (s) => ({ ...s, steps: s.steps.filter((x) => x % 8 === 0), values: s.values.filter((_, i) => s.steps[i] % 8 === 0) });
  const series = { rss_bytes: { unit: "bytes", steps, values: steps.map(at) } };
  for (const [name, s] of Object.entries(data.series)) if (name !== "rss_bytes") series[name] = every4(s);
  const gpu = steps.map((i) => (i === 17 ? null : 2 ** 30 + (i > 2 ? 3 * 2 ** 28 : 0) + (i % 4) * 2 ** 20));
  series["GPU:0/bytes_in_use"] = { unit: "bytes", steps, values: gpu };
  series["GPU:0/peak_bytes"] = { unit: "bytes", steps, values: gpu.map((v, i) => (v === null ? null : 2 ** 30 + 4 * 2 ** 28 + i * 2 ** 19)) };
  const growth = [...data.growth, { series: "GPU:0/bytes_in_use", per_step: 0, flagged: false, reason: "flat after warm-up" },
    { series: "GPU:0/peak_bytes", per_step: 524288, flagged: true, reason: "grows in 100% of steps after warm-up" }];
  return { ...data, run: "sparse", series, growth, samples: 33,
    unreadable: [{ step: 5, error: `sparse/memory step 5: corrupt or foreign payload (zlib: incorrect header check)` }] };
}
const GROWTH = { "keep/builds": () => fixture("growth-keep.json"), "fit/train": () => fixture("growth-fit.json"),
  growth_hostile: () => hostileGrowth(fixture("growth-keep.json")), sparse: () => sparseGrowth(fixture("growth-fit.json")),
  slow: () => fixture("growth-keep.json") };

function listing() {
  const runs = fixture("runs.json").runs;
  const tag = (t, kind, extra = {}) => ({ tag: t, kind, origin: "modelmem", max_step: 1, error: null, hosts: [], note: "", ...extra });
  const memory = (maxStep) => tag("memory", "memory", { max_step: maxStep });
  runs.push({ run: "keep/builds", tags: [memory(7)] }, { run: "fit/train", tags: [memory(32)] }, { run: "sparse", tags: [memory(32)] },
    { run: "growth_hostile", tags: [memory(7)] });
  runs.push({ run: "big_trace", tags: [tag("trace", "ops")] },
    { run: "slow", tags: [tag("ops", "ops", { origin: "profile", hosts: ["worker_a", "worker_b"] }), memory(7)] },
    { run: RLO, tags: [tag("storage", "breakdown")] }, { run: LONG, tags: [tag("storage", "breakdown")] },
    { run: "memory_profile", tags: [tag("profile/2021_05_04", "ops", { origin: "profile", max_step: null, hosts: ["localhost"],
      note: "TF2 profile: memory profile (TF 2.3-2.10)" })] },
    { run: "bad", tags: [tag("garbage", null, { error: `bad/garbage step 1: corrupt or foreign payload from ${RLO} (zlib: incorrect header check)` })] });
  return { runs };
}

/** The server's paging: sort by a field (empty last), filter terms ("field:text" in that field). */
function page(rows, q, defaultSort, extra = {}) {
  const sort = q.get("sort") || defaultSort;
  const order = q.get("order") === "asc" ? "asc" : "desc";
  const text = (v) => (Array.isArray(v) ? v.join(" ") : v === null || v === undefined ? "" : String(v)).toLowerCase();
  let out = rows;
  for (const term of (q.get("filter") || "").toLowerCase().split(/\s+/).filter(Boolean)) {
    const [field, value] = term.includes(":") ? [term.slice(0, term.indexOf(":")), term.slice(term.indexOf(":") + 1)] : [null, term];
    const fields = field && field in (rows[0] || {}) ? [field] : Object.keys(rows[0] || {});
    const needle = field && field in (rows[0] || {}) ? value : term;
    out = out.filter((r) => fields.some((f) => text(r[f]).includes(needle)));
  }
  const empty = (v) => v === null || v === undefined || v === "";
  const key = (v) => (Array.isArray(v) ? v.length : typeof v === "string" ? v.toLowerCase() : v);
  out = [...out].sort((a, b) => {
    if (empty(a[sort]) || empty(b[sort])) return empty(a[sort]) - empty(b[sort]);
    const c = key(a[sort]) < key(b[sort]) ? -1 : key(a[sort]) > key(b[sort]) ? 1 : 0;
    return order === "asc" ? c : -c;
  });
  const offset = Number(q.get("offset") || 0);
  const limit = Math.min(Number(q.get("limit") || 100), 2000);
  return { total: rows.length, matched: out.length, offset, sort, order, rows: out.slice(offset, offset + limit), ...extra };
}

function opsAnswer(run, q) {
  if (run === "big_trace") {
    const base = fixture("ops-lenet.json");
    return { ...base, run, tag: "trace", op_count: BIG.length, layers: bigLayers(BIG), join: { joined_time_us: 1, fraction: 1, vocabulary: "trace" },
      breakdown: null, breakdowns: [], ops: page(BIG, q, "time_us") };
  }
  const name = OPS[run];
  if (!name) return null;
  const base = run === "memory_profile" ? memoryOnly(fixture(`ops-${name}.json`)) : fixture(`ops-${name}.json`);
  return { ...base, ...(run === "slow" ? { run, tag: "ops", hosts: ["worker_a", "worker_b"], host: q.get("host") || "worker_a" } : {}),
    ops: page(base.ops.rows, q, "time_us") };
}

function reducing(run) {
  if (run !== "slow") return null;
  slowSince ??= Date.now();
  const elapsed = (Date.now() - slowSince) / 1000;
  if (elapsed > SLOW_SECONDS) return null;
  return [202, { state: "reducing", progress: Math.min(0.95, elapsed / SLOW_SECONDS), message: elapsed < 2 ? "reading" : "parsing", elapsed_s: elapsed }];
}

function route(path, q) {
  const run = q.get("run");
  const wait = ["ops", "op_rows", "timeline", "growth"].includes(path) && reducing(run);
  if (wait) return wait;
  switch (path) {
    case "runs": return listing();
    case "steps": return fixture("steps.json");
    case "breakdown":
    case "variables": {
      if (!run) return [400, "missing query parameter 'run'"];
      if (!BREAKDOWNS[run]) return [404, `no breakdown data for run ${JSON.stringify(run)}`];
      const data = fixture(BREAKDOWNS[run]);
      const variables = page(data.variables.rows, q, "bytes");
      return path === "variables" ? variables : { ...data, run, variables };
    }
    case "ops":
    case "op_rows": {
      const data = opsAnswer(run, q);
      if (!data) return [404, `no ops data for run ${JSON.stringify(run)}`];
      return path === "ops" ? data : data.ops;
    }
    case "timeline": {
      if (!OPS[run]) return [404, `no ops data for run ${JSON.stringify(run)}`];
      const data = fixture(`timeline-${OPS[run]}.json`);
      return run === "memory_profile" ? { ...data, peak_by_category: memoryOnly(fixture("ops-lenet.json")).peak_by_category } : data;
    }
    case "hosts": return run === "slow" ? { hosts: ["worker_a", "worker_b"], errors: [], pending: [], rows: [
      { host: "worker_a", allocator: "mklcpu", peak_bytes: 153886720, resident_bytes: 120332288, step_bytes: 33554432 },
      { host: "worker_b", allocator: "mklcpu", peak_bytes: 287309824, resident_bytes: 120332288, step_bytes: 166977536 }] }
      : { hosts: [], rows: [], pending: [], errors: [] };
    case "loadbench": return fixture("loadbench-mobilenet.json");
    case "growth": {
      if (!GROWTH[run]) return [404, `no memory data for run ${JSON.stringify(run)}`];
      return { ...GROWTH[run](), run, tag: q.get("tag") };
    }
    default: return [404, `no route ${path}`];
  }
}

createServer((req, res) => {
  const url = new URL(req.url, "http://localhost");
  if (url.pathname === "/favicon.ico") return res.writeHead(204).end();
  if (url.pathname === "/" || url.pathname === "/data/plugin_entry.html") {
    if (url.pathname === "/") return res.writeHead(302, { Location: "/data/plugin_entry.html?name=modelmem" }).end();
    return res.writeHead(200, { "Content-Type": "text/html", "Content-Security-Policy": CSP }).end(PAGE);
  }
  const m = url.pathname.match(/^\/data\/plugin\/modelmem\/([a-z_.]+)$/);
  if (m?.[1] === "index.js") {
    return res.writeHead(200, { "Content-Type": "text/javascript" }).end(readFileSync(here("../../tb_modelmem/static/index.js")));
  }
  const answer = m ? route(m[1], url.searchParams) : [404, "not found"];
  if (Array.isArray(answer) && typeof answer[1] === "string") return res.writeHead(answer[0], { "Content-Type": "text/plain" }).end(answer[1]);
  const [code, body] = Array.isArray(answer) ? answer : [200, answer];
  res.writeHead(code, { "Content-Type": "application/json" }).end(JSON.stringify(body));
}).listen(PORT, "127.0.0.1", () => console.log(`fixtures + bundle on http://localhost:${PORT}/`));
