import js from "@eslint/js";
import globals from "globals";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "node_modules/", "src/api/schema.d.ts"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  { files: ["src/**"], languageOptions: { globals: globals.browser } },
  { files: ["scripts/**", "*.config.*"], languageOptions: { globals: globals.node } },
  // Browser tests: Node code, with functions evaluated in the page.
  { files: ["tests/**"], languageOptions: { globals: { ...globals.node, ...globals.browser } } },
  { rules: { "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_" }] } },
);
