import { LocationProvider, Route, Router, useLocation } from "preact-iso";
import { useEffect, useMemo, useState } from "preact/hooks";
import { apiClient } from "./api/client";
import type { CredentialSource } from "./auth/session";
import { SessionContext } from "./context";
import { FleetPage } from "./pages/Fleet";
import { RunPage } from "./pages/Run";
import { RunsPage } from "./pages/Runs";
import { SettingsPage } from "./pages/Settings";
import { SignIn } from "./pages/SignIn";

export function App({ source }: { source: CredentialSource }) {
  const [credentials, setCredentials] = useState(source.current());
  useEffect(() => source.subscribe(() => setCredentials(source.current())), [source]);
  const api = useMemo(() => apiClient(source), [source]);

  if (!credentials) return <SignIn api={api} source={source} />;
  return (
    <SessionContext.Provider value={{ api, credentials, source }}>
      <LocationProvider>
        <Shell>
          <Router>
            <Route path="/" component={RunsPage} />
            <Route path="/runs" component={RunsPage} />
            <Route path="/runs/:runId" component={RunPage} />
            <Route path="/runs/:runId/jobs/:jobId" component={RunPage} />
            <Route path="/fleet" component={FleetPage} />
            <Route path="/settings" component={SettingsPage} />
            <Route default component={NotFound} />
          </Router>
        </Shell>
      </LocationProvider>
    </SessionContext.Provider>
  );
}

function Shell({ children }: { children: preact.ComponentChildren }) {
  const { path } = useLocation();
  return (
    <SessionContext.Consumer>
      {(session) => (
        <>
          <a class="skip" href="#main">
            Skip to content
          </a>
          <header class="top">
            <strong class="brand">Baton</strong>
            <nav aria-label="Pages">
              <a href="/runs" aria-current={path === "/" || path.startsWith("/runs") ? "page" : undefined}>
                Runs
              </a>
              <a href="/fleet" aria-current={path === "/fleet" ? "page" : undefined}>
                Fleet
              </a>
              <a href="/settings" aria-current={path === "/settings" ? "page" : undefined}>
                Settings
              </a>
            </nav>
            <span class="workspace" title="Workspace">
              {session?.credentials.workspace}
            </span>
            <button type="button" onClick={() => session?.source.signOut()}>
              Sign out
            </button>
          </header>
          <main id="main">{children}</main>
        </>
      )}
    </SessionContext.Consumer>
  );
}

function NotFound() {
  return (
    <section>
      <h1>Not found</h1>
      <p>
        <a href="/runs">Back to the runs</a>
      </p>
    </section>
  );
}
