import { useState } from "preact/hooks";
import { errorText, type Api } from "../api/client";
import type { CredentialSource } from "../auth/session";
import { Alert } from "../components/Alert";

/** The operator token, typed once, checked against the workspace before it is kept. */
export function SignIn({ api, source }: { api: Api; source: CredentialSource }) {
  const [token, setToken] = useState("");
  const [workspace, setWorkspace] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  async function submit(event: Event) {
    event.preventDefault();
    setBusy(true);
    setError(null);
    // The check reads one run with the typed token (not the kept one, which
    // is only stored once the check passes).
    const { error: failure, response } = await api.GET("/v1/workspaces/{ws}/runs", {
      params: { path: { ws: workspace.trim() }, query: { limit: 1 } },
      headers: { authorization: `Bearer ${token.trim()}` },
    });
    setBusy(false);
    if (response.ok) source.signIn({ token: token.trim(), workspace: workspace.trim() });
    else setError(errorText(failure, response));
  }

  return (
    <main id="main" class="signin">
      <h1>Sign in to Baton</h1>
      <form onSubmit={submit}>
        <label>
          Operator token
          <input
            type="password"
            name="token"
            autoComplete="off"
            required
            value={token}
            onInput={(e) => setToken(e.currentTarget.value)}
          />
        </label>
        <label>
          Workspace
          <input name="workspace" required value={workspace} onInput={(e) => setWorkspace(e.currentTarget.value)} />
        </label>
        <button type="submit" disabled={busy}>
          Sign in
        </button>
        <Alert message={error} />
      </form>
      <p class="hint">The token is kept for this tab only and is cleared when you sign out or close it.</p>
    </main>
  );
}
