// The one API client of the console: typed by the generated OpenAPI schema
// (schema.d.ts, `npm run api`), same origin as the page (the dev host and
// CloudFront both route `/v1/*` to the API), credentials from the source.
import createClient from "openapi-fetch";
import type { components, paths } from "./schema";
import type { CredentialSource } from "../auth/session";

export type Schemas = components["schemas"];
export type Api = ReturnType<typeof apiClient>;

export function apiClient(source: CredentialSource, baseUrl = window.location.origin) {
  const client = createClient<paths>({ baseUrl });
  client.use({
    onRequest({ request }) {
      const credentials = source.current();
      if (credentials) request.headers.set("authorization", `Bearer ${credentials.token}`);
      return request;
    },
  });
  return client;
}

/** A read's answer as a poll keeps it: the data, or what went wrong in words. */
export function settled<T>(answer: { data?: T; error?: unknown; response: Response }): { data?: T; error?: string } {
  return answer.data !== undefined ? { data: answer.data } : { error: errorText(answer.error, answer.response) };
}

/** The API's error (`{error: {code, message}}`) in words, or what went wrong on the way. */
export function errorText(error: unknown, response?: Response): string {
  const detail = (error as { error?: { code?: string; message?: string } } | undefined)?.error;
  if (detail?.message) return detail.code ? `${detail.message} (${detail.code})` : detail.message;
  const gateway = (error as { message?: string } | undefined)?.message;
  if (gateway) return response ? `${gateway} (HTTP ${response.status})` : gateway;
  return response ? `HTTP ${response.status}` : String(error);
}
