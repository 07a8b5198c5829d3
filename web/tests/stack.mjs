// The stack the browser tests drive, started the way a user starts it:
// `scripts/dev.sh` (`make dev`: the emulator, the dev host serving the API
// and the console, the local provisioner starting real runner processes).
// With BATON_API and BATON_ADMIN_TOKEN set, an already running `make dev`
// is used instead (and its workspace: BATON_WORKSPACE, default demo).
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createServer } from "node:net";

export const ROOT = new URL("../../", import.meta.url).pathname;

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

export async function startStack() {
  if (process.env.BATON_API && process.env.BATON_ADMIN_TOKEN) {
    return {
      url: process.env.BATON_API,
      token: process.env.BATON_ADMIN_TOKEN,
      workspace: process.env.BATON_WORKSPACE ?? "demo",
      stop: async () => {},
    };
  }
  const port = await freePort();
  const token = `bat_${randomBytes(24).toString("hex")}`;
  const workspace = "console";
  const child = spawn("bash", ["scripts/dev.sh"], {
    cwd: ROOT,
    env: {
      ...process.env,
      BATON_PORT: String(port),
      BATON_MOTO_PORT: String(await freePort()),
      BATON_ADMIN_TOKEN: token,
      BATON_DEV_WORKSPACE: workspace,
      BATON_DEV_MAX_INSTANCES: "4",
      // The tests run from web/node_modules: dev.sh's `npm ci` would pull
      // it from under them. `npm run test:browser` builds web/dist first.
      BATON_CONSOLE_BUILT: "1",
    },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  const log = [];
  const keep = (chunk) => {
    log.push(chunk.toString());
    if (log.length > 400) log.shift();
  };
  child.stderr.on("data", keep);
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`make dev did not come up in 600 s:\n${log.join("")}`)), 600_000);
    child.stdout.on("data", (chunk) => {
      keep(chunk);
      if (log.join("").includes("Open the console at")) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`make dev exited (${code}):\n${log.join("")}`));
    });
  });
  return {
    url: `http://127.0.0.1:${port}`,
    token,
    workspace,
    log,
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      process.kill(-child.pid, "SIGTERM");
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 20_000))]);
    },
  };
}

/** The API as an operator's script calls it. */
export function apiOf(stack) {
  return async function api(method, path, body, token = stack.token) {
    const response = await fetch(`${stack.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { "content-type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await response.text();
    let json;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = text;
    }
    return { status: response.status, body: json };
  };
}

/** Polls `check` until it returns a truthy value (which is returned). */
export async function until(what, check, timeoutMs = 60_000, everyMs = 250) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    last = await check();
    if (last) return last;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${JSON.stringify(last)?.slice(0, 500)})`);
}
