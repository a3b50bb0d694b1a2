// Development server: the built bundle inside a page shaped like TensorBoard's
// plugin iframe (same <base>, a CSP at least as strict: no 'unsafe-eval'),
// answering the HTTP API from test/fixtures/. `npm run dev` -> http://localhost:6124/

import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { fileURLToPath } from "node:url";
import { bigTrace } from "./big-trace.mjs";

const PORT = Number(process.env.PORT || 6124);
const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const fixture = (name) => JSON.parse(readFileSync(here(`../test/fixtures/${name}`), "utf8"));

const BOOT = 'import("./index.js").then((m) => void m.render());';
const PAGE = `<!DOCTYPE html><head><base href="plugin/modelmem/" /></head><body><script type="module">${BOOT}</script></body>`;
const CSP = [
  "default-src 'self'", "img-src 'self' data: blob:", "style-src 'self' 'unsafe-inline'", "object-src 'none'",
  `script-src 'self' 'sha256-${createHash("sha256").update(BOOT).digest("base64")}'`,
].join(";");

const BREAKDOWNS = { convnet_adam: "breakdown-adam.json", convnet_sgd: "breakdown-sgd.json", convnet_tf1_ckpt: "breakdown-ckpt.json" };

function route(path, q) {
  const run = q.get("run");
  switch (path) {
    case "runs": return fixture("runs.json");
    case "steps": return fixture("steps.json");
    case "breakdown":
      if (!run) return [400, "missing query parameter 'run'"];
      return BREAKDOWNS[run] ? fixture(BREAKDOWNS[run]) : [404, `no breakdown data for run '${run}'`];
    case "ops":
      if (run === "big_trace") return bigTrace(20000);
      if (run === "tf1_logdir") return [422, "tf1_logdir/step_1 step 1: not a readable RunMetadata (DecodeError)"];
      return run === "convnet_adam" ? fixture("ops-lenet.json") : [404, `no ops data for run '${run}'`];
    case "loadbench": return fixture("loadbench-mobilenet.json");
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
  const m = url.pathname.match(/^\/data\/plugin\/modelmem\/([a-z.]+)$/);
  if (m?.[1] === "index.js") {
    return res.writeHead(200, { "Content-Type": "text/javascript" }).end(readFileSync(here("../../tb_modelmem/static/index.js")));
  }
  const answer = m ? route(m[1], url.searchParams) : [404, "not found"];
  if (Array.isArray(answer)) return res.writeHead(answer[0], { "Content-Type": "text/plain" }).end(answer[1]);
  res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify(answer));
}).listen(PORT, "127.0.0.1", () => console.log(`fixtures + bundle on http://localhost:${PORT}/`));
