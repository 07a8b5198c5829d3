// Who the console acts as. Pages ask a `CredentialSource` and never know
// where the token came from, so an OIDC sign-in can replace the typed token
// later by providing another source, without touching a page.

export interface Credentials {
  /** Sent as `Authorization: Bearer …` on every API request. */
  token: string;
  workspace: string;
}

export interface CredentialSource {
  current(): Credentials | null;
  signIn(credentials: Credentials): void;
  signOut(): void;
  /** Called on every sign-in and sign-out; returns the unsubscribe. */
  subscribe(listener: () => void): () => void;
}

const KEY = "baton.credentials";

/**
 * An operator token typed once. It lives in `sessionStorage`: gone when the
 * tab closes, never shared with other tabs, never in `localStorage` (where
 * it would outlive the session) and never in a URL (where it would reach
 * history, logs and referrers).
 */
export class SessionTokenSource implements CredentialSource {
  private listeners = new Set<() => void>();

  constructor(private storage: Storage) {}

  current(): Credentials | null {
    const raw = this.storage.getItem(KEY);
    if (!raw) return null;
    try {
      const parsed = JSON.parse(raw) as Partial<Credentials>;
      return typeof parsed.token === "string" && typeof parsed.workspace === "string"
        ? { token: parsed.token, workspace: parsed.workspace }
        : null;
    } catch {
      return null;
    }
  }

  signIn(credentials: Credentials): void {
    this.storage.setItem(KEY, JSON.stringify(credentials));
    this.notify();
  }

  signOut(): void {
    this.storage.removeItem(KEY);
    this.notify();
  }

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private notify() {
    for (const listener of this.listeners) listener();
  }
}
