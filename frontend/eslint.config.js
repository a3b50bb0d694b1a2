// Catches what the bundler does not: undefined names (a missing import), unused code.
import js from "@eslint/js";
import globals from "globals";

export default [
  js.configs.recommended,
  { files: ["src/**/*.js"], languageOptions: { globals: globals.browser } },
  { files: ["test/**/*.js", "dev/**/*.mjs", "*.mjs", "*.js"], languageOptions: { globals: globals.node } },
];
