// Bundles src/ (with ECharts) into the one ES module TensorBoard serves:
// tb_modelmem/static/index.js. `node build.mjs --watch` rebuilds on change.

import * as esbuild from "esbuild";
import { statSync } from "node:fs";
import { fileURLToPath } from "node:url";

const outfile = fileURLToPath(new URL("../tb_modelmem/static/index.js", import.meta.url));
const options = {
  entryPoints: [fileURLToPath(new URL("src/index.js", import.meta.url))],
  outfile,
  bundle: true,
  format: "esm",
  target: "es2020",
  minify: true,
  legalComments: "eof", // keep ECharts' Apache-2.0 notice in the bundle
  logLevel: "warning",
};

if (process.argv.includes("--watch")) {
  const context = await esbuild.context(options);
  await context.watch();
  console.log(`watching src/ -> ${outfile}`);
} else {
  await esbuild.build(options);
  console.log(`built ${outfile} (${(statSync(outfile).size / 1024).toFixed(0)} KiB)`);
}
