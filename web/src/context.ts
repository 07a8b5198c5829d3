import { createContext } from "preact";
import { useContext } from "preact/hooks";
import type { Api } from "./api/client";
import type { CredentialSource, Credentials } from "./auth/session";

export interface Session {
  api: Api;
  credentials: Credentials;
  source: CredentialSource;
}

export const SessionContext = createContext<Session | null>(null);

/** The signed-in session; pages are only rendered inside one. */
export function useSession(): Session {
  const session = useContext(SessionContext);
  if (!session) throw new Error("useSession outside a signed-in page");
  return session;
}
