// `npm run check:api`: the console's API types are generated from the OpenAPI
// document (src/api/schema.d.ts, never written by hand). This fails when they
// no longer match it, so a change to the API cannot leave the console
// compiling against yesterday's contract. With BATON_API set, the document is
// the one that API serves (`GET /v1/openapi.json`); otherwise the committed
// `api/openapi.json`, which the Rust tests keep equal to what the API serves.
import { readFile } from "node:fs/promises";
import openapiTS, { astToString } from "openapi-typescript";

const here = new URL("..", import.meta.url);
const source = process.env.BATON_API
  ? new URL("/v1/openapi.json", process.env.BATON_API)
  : new URL("../api/openapi.json", here);
const document = source.protocol === "file:"
  ? JSON.parse(await readFile(source, "utf8"))
  : await (await fetch(source)).json();
const expected = astToString(await openapiTS(document));
const committed = await readFile(new URL("src/api/schema.d.ts", here), "utf8");
const strip = (text) => text.replace(/^\/\*\*[\s\S]*?\*\/\s*/, "").trim();
if (strip(expected) !== strip(committed)) {
  console.error(`src/api/schema.d.ts does not match the OpenAPI document at ${source}.`);
  console.error("Regenerate it: (cd web && npm run api)");
  process.exit(1);
}
console.log(`src/api/schema.d.ts matches the OpenAPI document at ${source}`);
