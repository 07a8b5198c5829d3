/// <reference types="vitest/config" />
import { defineConfig } from "vite";
import preact from "@preact/preset-vite";

// `npm run build` writes dist/, which the dev host serves at `/` and the CDK
// stack puts behind CloudFront. `npm run dev` proxies the API to a running
// `make dev` (same origin either way: the console never needs CORS).
export default defineConfig({
  plugins: [preact()],
  build: { outDir: "dist", emptyOutDir: true, sourcemap: false, chunkSizeWarningLimit: 600 },
  server: {
    proxy: { "/v1": process.env.BATON_API ?? "http://127.0.0.1:8080" },
  },
  // Unit tests of the pure parts; tests/ holds the browser tests (node --test).
  test: { include: ["src/**/*.test.ts"] },
});
