import { useState } from "preact/hooks";
import { errorText, settled, type Schemas } from "../api/client";
import { useSession } from "../context";
import { usePoll } from "../lib/poll";
import { when } from "../lib/time";
import { Alert } from "../components/Alert";
import { TableHead } from "../components/TableHead";

export function SettingsPage() {
  return (
    <section>
      <h1>Settings</h1>
      <NamedValues kind="secret" />
      <NamedValues kind="variable" />
      <RegistrationTokens />
    </section>
  );
}

type Kind = "secret" | "variable";

/** A secret or a variable as listed: only a variable has its value. */
type Named = { name: string; value?: string; updated_at?: string | null };

/**
 * The workspace's secrets or its variables, set and deleted by name alike.
 * Secrets: names and dates only, a value is sent once and never shown or read
 * back. Variables (`vars.NAME`) are not secrets, so their values are shown.
 */
function NamedValues({ kind }: { kind: Kind }) {
  const { api, credentials } = useSession();
  const ws = credentials.workspace;
  const secret = kind === "secret";
  const noun = secret ? "Secret" : "Variable";
  const listed = usePoll<{ items: Named[] }>(
    async () => settled(await api.GET(`/v1/workspaces/{ws}/${kind}s`, { params: { path: { ws } } })),
    10000,
    [ws, kind],
  );
  const [name, setName] = useState("");
  const [value, setValue] = useState("");
  const [message, setMessage] = useState<string | null>(null);

  async function save(event: Event) {
    event.preventDefault();
    const init = { params: { path: { ws, name } }, body: { value } };
    // Called apart so the answer keeps its type: a variable comes back as
    // stored (its name upper-cased), a secret with no body.
    const { data, error, response } = secret
      ? await api.PUT("/v1/workspaces/{ws}/secrets/{name}", init)
      : await api.PUT("/v1/workspaces/{ws}/variables/{name}", init);
    setMessage(response.ok ? `${noun} ${data?.name ?? name} saved.` : errorText(error, response));
    if (response.ok) {
      setValue("");
      setName("");
    }
    await listed.refresh();
  }

  async function remove(named: string) {
    const { error, response } = await api.DELETE(`/v1/workspaces/{ws}/${kind}s/{name}`, { params: { path: { ws, name: named } } });
    setMessage(response.ok ? `${noun} ${named} deleted.` : errorText(error, response));
    await listed.refresh();
  }

  return (
    <section aria-labelledby={`${kind}s`}>
      <h2 id={`${kind}s`}>{`${noun}s`}</h2>
      <table>
        <TableHead columns={secret ? ["Name", "Updated"] : ["Name", "Value", "Updated"]} hidden="Actions" />
        <tbody>
          {(listed.data?.items ?? []).map((n) => (
            <tr data-secret={secret ? n.name : undefined} data-variable={secret ? undefined : n.name}>
              <td>{n.name}</td>
              {!secret && (
                <td>
                  <code>{n.value}</code>
                </td>
              )}
              <td>{when(n.updated_at)}</td>
              <td>
                <button
                  type="button"
                  onClick={() => {
                    setName(n.name);
                    if (n.value !== undefined) setValue(n.value);
                  }}
                >
                  {secret ? "Replace" : "Edit"} {n.name}
                </button>
                <button type="button" onClick={() => remove(n.name)}>
                  Delete {n.name}
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <form onSubmit={save}>
        <label>
          Name
          <input name={`${kind}-name`} required value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </label>
        <label>
          Value
          {secret ? (
            <input name="secret-value" type="password" autoComplete="off" required value={value} onInput={(e) => setValue(e.currentTarget.value)} />
          ) : (
            <input name="variable-value" value={value} onInput={(e) => setValue(e.currentTarget.value)} />
          )}
        </label>
        <button type="submit">Save {kind}</button>
      </form>
      {message && <p role="status">{message}</p>}
      <Alert message={listed.error} />
    </section>
  );
}

/** Tokens runners register with: the secret is shown once, at creation. */
function RegistrationTokens() {
  const { api, credentials } = useSession();
  const ws = credentials.workspace;
  const tokens = usePoll<Schemas["RegistrationTokenList"]>(
    async () => settled(await api.GET("/v1/workspaces/{ws}/registration-tokens", { params: { path: { ws } } })),
    10000,
    [ws],
  );
  const [name, setName] = useState("");
  const [created, setCreated] = useState<string | null>(null);
  const [message, setMessage] = useState<string | null>(null);

  async function create(event: Event) {
    event.preventDefault();
    const { data, error, response } = await api.POST("/v1/workspaces/{ws}/registration-tokens", {
      params: { path: { ws } },
      body: { name: name || null, single_use: false },
    });
    setCreated(data?.token ?? null);
    setMessage(data ? null : errorText(error, response));
    setName("");
    await tokens.refresh();
  }

  async function revoke(id: string) {
    const { error, response } = await api.DELETE("/v1/workspaces/{ws}/registration-tokens/{id}", { params: { path: { ws, id } } });
    setMessage(response.ok ? "Token revoked." : errorText(error, response));
    await tokens.refresh();
  }

  return (
    <section aria-labelledby="tokens">
      <h2 id="tokens">Registration tokens</h2>
      <table>
        <TableHead columns={["Name", "Created", "Expires", "State"]} hidden="Actions" />
        <tbody>
          {(tokens.data?.items ?? []).map((t) => (
            <tr data-token={t.id}>
              <td>{t.name ?? "—"}</td>
              <td>{when(t.created_at)}</td>
              <td>{when(t.expires_at)}</td>
              <td>{t.revoked_at ? `revoked ${when(t.revoked_at)}` : "active"}</td>
              <td>
                {!t.revoked_at && (
                  <button type="button" onClick={() => revoke(t.id)}>
                    Revoke {t.name ?? t.id}
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <form onSubmit={create}>
        <label>
          Name
          <input name="token-name" value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </label>
        <button type="submit">Create a token</button>
      </form>
      {created && (
        <p role="status" class="once">
          The new token, shown this once: <code data-testid="new-token">{created}</code>
        </p>
      )}
      {message && <p role="status">{message}</p>}
    </section>
  );
}
