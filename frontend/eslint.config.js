// Catches what the bundler does not: undefined names (a missing import), unused code.
import js from "@eslint/js";
import globals from "globals";

export default [
  js.configs.recommended,
  { files: ["src/**/*.js"], languageOptions: { globals: globals.browser } },
  // a view imports no other view: what two views share lives in src/components/
  { files: ["src/views/*.js"], rules: { "no-restricted-imports": ["error", { patterns: [{ group: ["./*"],
    message: "a view imports no other view: move what views share to src/components/" }] }] } },
  // no function over 80 lines, counted as tests/unit/test_code_shape.py counts Python's (blank lines and
  // comments included): a long function is split by job
  { files: ["src/**/*.js"], rules: { "max-lines-per-function": ["error", { max: 80 }] } },
  { files: ["test/**/*.js", "dev/**/*.mjs", "*.mjs", "*.js"], languageOptions: { globals: globals.node } },
];
