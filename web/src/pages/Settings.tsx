import { useState } from "preact/hooks";
import { errorText, settled, type Schemas } from "../api/client";
import { useSession } from "../context";
import { usePoll } from "../lib/poll";
import { when } from "../lib/time";
import { Alert } from "../components/Alert";

export function SettingsPage() {
  return (
    <section>
      <h1>Settings</h1>
      <Secrets />
      <Variables />
      <RegistrationTokens />
    </section>
  );
}

/** Names and dates only: a value is sent once and never shown or read back. */
function Secrets() {
  const { api, credentials } = useSession();
  const ws = credentials.workspace;
  const secrets = usePoll<Schemas["SecretList"]>(
    async () => settled(await api.GET("/v1/workspaces/{ws}/secrets", { params: { path: { ws } } })),
    10000,
    [ws],
  );
  const [name, setName] = useState("");
  const [value, setValue] = useState("");
  const [message, setMessage] = useState<string | null>(null);

  async function save(event: Event) {
    event.preventDefault();
    const { error, response } = await api.PUT("/v1/workspaces/{ws}/secrets/{name}", {
      params: { path: { ws, name } },
      body: { value },
    });
    setMessage(response.ok ? `Secret ${name} saved.` : errorText(error, response));
    if (response.ok) {
      setValue("");
      setName("");
    }
    await secrets.refresh();
  }

  async function remove(secret: string) {
    const { error, response } = await api.DELETE("/v1/workspaces/{ws}/secrets/{name}", { params: { path: { ws, name: secret } } });
    setMessage(response.ok ? `Secret ${secret} deleted.` : errorText(error, response));
    await secrets.refresh();
  }

  return (
    <section aria-labelledby="secrets">
      <h2 id="secrets">Secrets</h2>
      <table>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Updated</th>
            <th scope="col">
              <span class="visually-hidden">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {(secrets.data?.items ?? []).map((s) => (
            <tr data-secret={s.name}>
              <td>{s.name}</td>
              <td>{when(s.updated_at)}</td>
              <td>
                <button type="button" onClick={() => setName(s.name)}>
                  Replace {s.name}
                </button>
                <button type="button" onClick={() => remove(s.name)}>
                  Delete {s.name}
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <form onSubmit={save}>
        <label>
          Name
          <input name="secret-name" required value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </label>
        <label>
          Value
          <input name="secret-value" type="password" autoComplete="off" required value={value} onInput={(e) => setValue(e.currentTarget.value)} />
        </label>
        <button type="submit">Save secret</button>
      </form>
      {message && <p role="status">{message}</p>}
      <Alert message={secrets.error} />
    </section>
  );
}

/** Workspace variables (`vars.NAME`): not secrets, so their values are shown. */
function Variables() {
  const { api, credentials } = useSession();
  const ws = credentials.workspace;
  const variables = usePoll<Schemas["VariableList"]>(
    async () => settled(await api.GET("/v1/workspaces/{ws}/variables", { params: { path: { ws } } })),
    10000,
    [ws],
  );
  const [name, setName] = useState("");
  const [value, setValue] = useState("");
  const [message, setMessage] = useState<string | null>(null);

  async function save(event: Event) {
    event.preventDefault();
    const { data, error, response } = await api.PUT("/v1/workspaces/{ws}/variables/{name}", {
      params: { path: { ws, name } },
      body: { value },
    });
    setMessage(data ? `Variable ${data.name} saved.` : errorText(error, response));
    if (data) {
      setValue("");
      setName("");
    }
    await variables.refresh();
  }

  async function remove(variable: string) {
    const { error, response } = await api.DELETE("/v1/workspaces/{ws}/variables/{name}", {
      params: { path: { ws, name: variable } },
    });
    setMessage(response.ok ? `Variable ${variable} deleted.` : errorText(error, response));
    await variables.refresh();
  }

  return (
    <section aria-labelledby="variables">
      <h2 id="variables">Variables</h2>
      <table>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Value</th>
            <th scope="col">Updated</th>
            <th scope="col">
              <span class="visually-hidden">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {(variables.data?.items ?? []).map((v) => (
            <tr data-variable={v.name}>
              <td>{v.name}</td>
              <td>
                <code>{v.value}</code>
              </td>
              <td>{when(v.updated_at)}</td>
              <td>
                <button
                  type="button"
                  onClick={() => {
                    setName(v.name);
                    setValue(v.value);
                  }}
                >
                  Edit {v.name}
                </button>
                <button type="button" onClick={() => remove(v.name)}>
                  Delete {v.name}
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <form onSubmit={save}>
        <label>
          Name
          <input name="variable-name" required value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </label>
        <label>
          Value
          <input name="variable-value" value={value} onInput={(e) => setValue(e.currentTarget.value)} />
        </label>
        <button type="submit">Save variable</button>
      </form>
      {message && <p role="status">{message}</p>}
      <Alert message={variables.error} />
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
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Created</th>
            <th scope="col">Expires</th>
            <th scope="col">State</th>
            <th scope="col">
              <span class="visually-hidden">Actions</span>
            </th>
          </tr>
        </thead>
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
