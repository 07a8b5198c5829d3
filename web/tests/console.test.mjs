// The console in headless Chromium (Debian's package, driven by
// playwright-core: nothing downloads a browser) against a real stack as
// `make dev` starts it. Figures (times, heap, bundle size) are printed, not
// asserted; screenshots of every page, light and dark, go to target/console/.
import assert from "node:assert/strict";
import { createHash, createHmac, randomBytes } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync } from "node:fs";
import { after, before, test } from "node:test";
import { gzipSync } from "node:zlib";
import axe from "axe-core";
import { chromium } from "playwright-core";
import { apiOf, ROOT, startStack, until } from "./stack.mjs";

const SHOTS = `${ROOT}target/console`;
const CHROMIUM = process.env.BATON_CHROMIUM ?? "/usr/bin/chromium";
// As root, without the sandbox; without the background-networking flags
// Chromium reaches for Google's hosts at every start (a closed network here).
const ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  // Pages of the tests are never in front: their timers must not be throttled.
  "--disable-background-timer-throttling",
  "--disable-renderer-backgrounding",
  "--disable-backgrounding-occluded-windows",
];
const started = Date.now();

let stack, api, browser, ws;

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  stack = await startStack();
  api = apiOf(stack);
  ws = stack.workspace;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
  console.log(`# stack up in ${Date.now() - started} ms at ${stack.url}`);
});

after(async () => {
  await browser?.close();
  await stack?.stop();
  console.log(`# browser tests took ${((Date.now() - started) / 1000).toFixed(1)} s in all`);
});

/** A page already signed in (the sign-in itself is tested once, by typing). */
async function signedIn(path = "/runs", colorScheme = "light") {
  const context = await browser.newContext({ colorScheme, acceptDownloads: true, viewport: { width: 1280, height: 900 } });
  await context.addInitScript(
    ({ token, workspace }) => window.sessionStorage.setItem("baton.credentials", JSON.stringify({ token, workspace })),
    { token: stack.token, workspace: ws },
  );
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.errors = errors;
  // Every API request the page makes, for what watching costs.
  page.requests = [];
  page.on("request", (r) => {
    const path = new URL(r.url()).pathname;
    if (path.startsWith("/v1/")) page.requests.push({ path, at: Date.now() });
  });
  await page.goto(`${stack.url}${path}`);
  return page;
}

async function submit(definition, inputs) {
  const { status, body } = await api("POST", `/v1/workspaces/${ws}/runs`, { definition, inputs });
  assert.equal(status, 201, JSON.stringify(body));
  return body;
}

const run = async (id) => (await api("GET", `/v1/workspaces/${ws}/runs/${id}`)).body;
const job = (view, key) => view.attempts.at(-1).jobs.find((j) => j.key === key);

async function noSeriousA11yViolations(page, name) {
  await page.addScriptTag({ content: axe.source });
  const result = await page.evaluate(async () => {
    const { violations } = await axe.run(document, { resultTypes: ["violations"] });
    return violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length, help: v.help }));
  });
  const serious = result.filter((v) => v.impact === "serious" || v.impact === "critical");
  assert.deepEqual(serious, [], `${name}: axe-core found serious or critical violations`);
}

/** The page, light and dark, under target/console/. */
async function shots(page, name) {
  for (const scheme of ["light", "dark"]) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.screenshot({ path: `${SHOTS}/${name}-${scheme}.png`, fullPage: true });
  }
  await page.emulateMedia({ colorScheme: "light" });
}

async function heapMb(page) {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Performance.enable");
  const { metrics } = await cdp.send("Performance.getMetrics");
  const used = metrics.find((m) => m.name === "JSHeapUsedSize")?.value ?? 0;
  return (used / 1024 / 1024).toFixed(1);
}

test("the first page's JavaScript, gzipped", () => {
  const assets = `${ROOT}web/dist/assets`;
  const js = readdirSync(assets).filter((f) => f.endsWith(".js"));
  assert.ok(js.length > 0, "web/dist holds the built console");
  const bytes = js.reduce((sum, f) => sum + gzipSync(readFileSync(`${assets}/${f}`)).length, 0);
  console.log(`# bundle: ${js.length} JS file(s), ${(bytes / 1024).toFixed(1)} kB gzipped (aim: under 200 kB)`);
});

test("an operator signs in with a token kept only in the tab's session, and signs out", async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(stack.url);
  await shots(page, "sign-in");
  await noSeriousA11yViolations(page, "sign-in");
  await page.getByLabel("Operator token").fill("bat_wrong");
  await page.getByLabel("Workspace").fill(ws);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("alert").waitFor();
  assert.match(await page.getByRole("alert").innerText(), /unauthorized|token/i);

  await page.getByLabel("Operator token").fill(stack.token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Runs" }).waitFor();
  const stored = await page.evaluate(() => ({ session: sessionStorage.length, local: localStorage.length, url: location.href }));
  assert.equal(stored.session, 1);
  assert.equal(stored.local, 0, "nothing in localStorage");
  assert.ok(!stored.url.includes(stack.token), "the token is never in the URL");

  await page.getByRole("button", { name: "Sign out" }).click();
  await page.getByRole("heading", { name: "Sign in to Baton" }).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.length), 0, "signing out clears the token");
  await context.close();
});

test("a run submitted through the API appears in the list within 3 s, and its graph shows every job", async () => {
  const page = await signedIn("/runs");
  await page.getByRole("heading", { name: "Runs" }).waitFor();
  const created = await submit(
    `name: graph
run-name: graph of \${{ inputs.sha }}
jobs:
  build: {runs-on: [linux], steps: [{run: echo built}]}
  lint: {runs-on: [linux], steps: [{run: echo linted}]}
  test: {needs: [build], runs-on: [linux], steps: [{run: echo tested}]}
  report: {needs: [test, lint], runs-on: [linux], steps: [{run: echo reported}]}
`,
    { sha: "abc1234" },
  );
  const submittedAt = Date.now();
  await page.locator(`tr[data-run="${created.id}"]`).waitFor({ timeout: 3000 });
  console.log(`# a new run in the list after ${Date.now() - submittedAt} ms`);
  // Listed under its run-name's title, its workflow beside it.
  const link = page.locator(`tr[data-run="${created.id}"] a`);
  assert.equal(await link.innerText(), "graph of abc1234");
  await link.click();
  await page.getByRole("heading", { name: /^graph of abc1234 #\d+/ }).waitFor();
  await page.getByTestId("graph").waitFor();
  const groups = await page.locator("[data-group]").evaluateAll((nodes) => nodes.map((n) => n.getAttribute("data-group")).sort());
  assert.deepEqual(groups, ["build", "lint", "report", "test"]);
  await until("the run to succeed", async () => (await run(created.id)).status === "succeeded");
  await page.locator('[data-group="report"] [data-status="succeeded"]').waitFor({ timeout: 5000 });
  // One search across every job's log, then to the match in its job.
  await page.getByLabel("Search every job's log").fill("TESTED");
  await page.getByRole("button", { name: "Search", exact: true }).click();
  await page.getByTestId("run-search-count").filter({ hasText: "1 match in 1 job" }).waitFor();
  await shots(page, "run");
  await noSeriousA11yViolations(page, "run");
  await page.getByRole("link", { name: "test: 1 match" }).click();
  await page.locator(".row.hit", { hasText: "tested" }).waitFor();
  assert.equal(await page.getByTestId("match-count").innerText(), "1 of 1");
  await page.goto(`${stack.url}/runs`);
  await page.locator(`tr[data-run="${created.id}"] [data-status="succeeded"]`).waitFor();
  // The workflow filter is the API's: the run stays under "gra", goes
  // under a name no workflow holds, and the address keeps the filter.
  await page.getByRole("searchbox", { name: "Workflow" }).fill("gra");
  await page.locator(`tr[data-run="${created.id}"]`).waitFor();
  await page.getByRole("searchbox", { name: "Workflow" }).fill("no-such-workflow");
  await page.locator(`tr[data-run="${created.id}"]`).waitFor({ state: "detached" });
  assert.match(page.url(), /[?&]workflow=no-such-workflow/);
  await page.getByRole("searchbox", { name: "Workflow" }).fill("");
  await page.locator(`tr[data-run="${created.id}"] [data-status="succeeded"]`).waitFor();
  await shots(page, "runs");
  await noSeriousA11yViolations(page, "runs");
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test("a running job's new log lines appear live", async () => {
  const created = await submit(`name: live
jobs:
  ticker:
    runs-on: [linux]
    steps:
      - name: tick
        run: for i in $(seq 1 24); do echo "tick $i"; sleep 0.5; done
`);
  const view = await until("the ticker to run", async () => {
    const v = await run(created.id);
    return job(v, "ticker")?.status === "running" && v;
  });
  const page = await signedIn(`/runs/${created.id}/jobs/${job(view, "ticker").id}`);
  await page.getByText("tick 2", { exact: true }).waitFor({ timeout: 15_000 });
  // Lines shipped after the page opened: each seen while the job still runs.
  const latencies = [];
  for (const n of [8, 12, 16]) {
    await page.getByText(`tick ${n}`, { exact: true }).waitFor({ timeout: 15_000 });
    const seen = Date.now();
    const lines = (await api("GET", `/v1/workspaces/${ws}/runs/${created.id}/jobs/${job(view, "ticker").id}/logs`)).body.lines;
    const line = lines.find((l) => l.text === `tick ${n}`);
    if (line) latencies.push(seen - Date.parse(line.at));
  }
  assert.equal(job(await run(created.id), "ticker").status, "running", "the lines were seen while the job ran");
  const window = (Date.now() - page.requests[0].at) / 1000;
  const count = (pattern) => page.requests.filter((r) => pattern.test(r.path)).length;
  const [views, logs] = [count(/\/runs\/[^/]+$/), count(/\/logs$/)];
  console.log(
    `# watching a running job: ${views} run-view and ${logs} log reads in ${window.toFixed(1)} s ` +
      `(≈ ${Math.round((views * 3600) / window)} and ${Math.round((logs * 3600) / window)} an hour; docs/console.md prices them)`,
  );
  console.log(`# live log: a line printed by the job is on the page after ${latencies.map((l) => `${l} ms`).join(", ")} (runner batching included)`);
  await page.getByLabel("Timestamps").check();
  assert.ok((await page.locator(".row time").count()) > 0, "per-line timestamps are shown on request");
  await until("the ticker to end", async () => (await run(created.id)).status === "succeeded");
  await page.getByText("tick 24", { exact: true }).waitFor();
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test("an approval is approved by clicking, and a self-approval is refused on the page with the API's reason", async () => {
  const definition = `name: release
on: {push: {branches: [main]}}
jobs:
  sign-off:
    approval: {required: 1}
  deploy:
    needs: sign-off
    runs-on: [linux]
    steps: [{run: echo deployed}]
`;
  // The admin created this run: the page refuses the admin's approval.
  const own = await submit(definition);
  const ownView = await until("the approval to wait", async () => {
    const v = await run(own.id);
    return job(v, "sign-off")?.status === "waiting" && v;
  });
  let page = await signedIn(`/runs/${own.id}/jobs/${job(ownView, "sign-off").id}`);
  await page.getByRole("button", { name: "Approve" }).click();
  const refusal = await page.locator(".approval [role=alert]").innerText();
  assert.match(refusal, /self-approval/);
  console.log(`# self-approval refused on the page: ${refusal}`);
  assert.equal(job(await run(own.id), "sign-off").status, "waiting");
  await api("POST", `/v1/workspaces/${ws}/runs/${own.id}/cancel`);
  await page.context().close();

  // A push started this one (a signed hook delivery): the admin may approve it.
  assert.equal((await api("PUT", `/v1/workspaces/${ws}/pipelines/release`, { definition })).status < 300, true);
  const hook = (await api("POST", `/v1/workspaces/${ws}/hooks`, { provider: "generic", pipelines: ["release"] })).body;
  const body = JSON.stringify({ event: "push", ref: "refs/heads/main", sha: "a".repeat(40), actor: "ci-bot", repository: "acme/app" });
  const t = Math.floor(Date.now() / 1000);
  const signature = createHmac("sha256", hook.secret).update(`${t}.${body}`).digest("hex");
  const delivered = await fetch(`${stack.url}/v1/hooks/${hook.id}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-baton-signature": `t=${t},v1=${signature}`, "x-baton-delivery": randomBytes(8).toString("hex") },
    body,
  });
  assert.equal(delivered.status, 202);
  const { runs } = await delivered.json();
  const pushed = runs[0].run_id;
  const view = await until("the pushed run's approval to wait", async () => {
    const v = await run(pushed);
    return v?.attempts && job(v, "sign-off")?.status === "waiting" && v;
  });
  page = await signedIn(`/runs/${pushed}/jobs/${job(view, "sign-off").id}`);
  await page.getByLabel("Comment").fill("ship it");
  await shots(page, "approval");
  await page.getByRole("button", { name: "Approve" }).click();
  await until("deploy to run and the run to succeed", async () => (await run(pushed)).status === "succeeded");
  const decided = job(await run(pushed), "sign-off").approval.decisions;
  assert.deepEqual(decided.map((d) => [d.decision, d.comment]), [["approve", "ship it"]]);
  await page.getByText("approved at").waitFor();
  await page.context().close();
});

test("cancel and rerun failed, by clicking, change the run as the API reports it", async () => {
  const failing = await submit(`name: flaky
jobs:
  ok: {runs-on: [linux], steps: [{run: echo fine}]}
  broken: {runs-on: [linux], steps: [{run: exit 3}]}
`);
  await until("the run to fail", async () => (await run(failing.id)).status === "failed");
  let page = await signedIn(`/runs/${failing.id}`);
  await page.getByRole("button", { name: "Rerun failed jobs" }).click();
  const rerun = await until("attempt 2", async () => {
    const v = await run(failing.id);
    return v.current_attempt === 2 && v;
  });
  assert.equal(rerun.attempts.at(-1).rerun_mode, "failed");
  assert.equal(job(rerun, "ok").carried_over, true, "the job that passed is carried over, not run again");
  // Every attempt stays readable: the first one, chosen on the page, is the
  // page's (its address says so and survives a reload).
  const attempt = page.getByLabel("Attempt");
  await until("the page to offer attempt 2", async () => (await attempt.locator("option").count()) === 2);
  await attempt.selectOption("1");
  await page.waitForURL(/[?&]attempt=1/);
  await page.reload();
  assert.match(await page.getByLabel("Attempt").locator("option:checked").innerText(), /^1 \(failed\)/);
  await page.locator('tr[data-job="broken"] [data-status="failed"]').waitFor();
  await page.context().close();

  const slow = await submit(`name: slow
jobs:
  wait: {runs-on: [linux], steps: [{run: sleep 120}]}
`);
  await until("the slow job to run", async () => job(await run(slow.id), "wait")?.status === "running");
  page = await signedIn(`/runs/${slow.id}`);
  await page.getByRole("button", { name: "Cancel run" }).click();
  await until("the run to be cancelled", async () => (await run(slow.id)).status === "cancelled");
  await page.locator("h1 [data-status=cancelled]").waitFor({ timeout: 5000 });
  await page.context().close();
});

test("events sent from the page run a listening job, and resolve ends it", async () => {
  const created = await submit(`name: listener
jobs:
  on-review:
    runs-on: [linux]
    listen: {events: [review], timeout-minutes: 10}
    steps:
      - run: echo "review \${{ event.ref }} \${{ event.payload.state }}"
`);
  const view = await until("the job to listen", async () => {
    const v = await run(created.id);
    return job(v, "on-review")?.status === "waiting" && v;
  });
  const page = await signedIn(`/runs/${created.id}/jobs/${job(view, "on-review").id}`);
  const form = page.getByRole("form", { name: "Send an event" });
  await form.getByLabel(/^Ref/).fill("review-1");
  await form.getByLabel("Payload (JSON)").fill('{"state": "approved"}');
  await form.getByRole("button", { name: "Send event" }).click();
  await form.getByRole("status").filter({ hasText: "Sent." }).waitFor();
  const ran = (v) => job(v, "on-review").executions.find((e) => e.event?.ref === "review-1");
  await until("review-1's execution to succeed", async () => ran(await run(created.id))?.status === "succeeded");
  // The job listens on in a new, empty try: the page stays on the one that ran.
  await page.getByText("review review-1 approved", { exact: true }).waitFor({ timeout: 15_000 });
  await page.reload();
  await page.getByText("review review-1 approved", { exact: true }).waitFor({ timeout: 15_000 });
  // A payload that is not JSON is said so, and sends nothing.
  await form.getByLabel("Payload (JSON)").fill("{state");
  await form.getByRole("button", { name: "Send event" }).click();
  await form.getByRole("status").filter({ hasText: "must be JSON" }).waitFor();
  await form.getByLabel(/^Ref/).fill("done");
  await form.getByLabel("Payload (JSON)").fill("");
  await form.getByLabel("Disposition").selectOption("resolve");
  await form.getByRole("button", { name: "Send event" }).click();
  const ended = await until("the run to succeed", async () => {
    const v = await run(created.id);
    return v.status === "succeeded" && v;
  });
  assert.equal(job(ended, "on-review").executions.length, 1, "resolve ended it without running it again");
  await noSeriousA11yViolations(page, "listening job");
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test("a called workflow's jobs are shown as the caller's, named as GitHub names them", async () => {
  const callee = `on: {workflow_call: {inputs: {target: {type: string, required: true}}}}
jobs:
  compile: {runs-on: [linux], steps: [{run: 'echo compiling \${{ inputs.target }}'}]}
`;
  const stored = await api("PUT", `/v1/workspaces/${ws}/pipelines/shared-build`, { definition: callee });
  assert.ok([200, 201].includes(stored.status), JSON.stringify(stored.body));
  const created = await submit(`name: caller
jobs:
  build:
    name: Build
    uses: ./.github/workflows/shared-build.yml
    with: {target: web}
`);
  const done = await until("the run to succeed", async () => {
    const v = await run(created.id);
    return v.status === "succeeded" && v;
  });
  const page = await signedIn(`/runs/${created.id}`);
  await page.locator('tr[data-job="build--compile"]', { hasText: "Build / compile" }).waitFor();
  await page.goto(`${stack.url}/runs/${created.id}/jobs/${job(done, "build--compile").id}`);
  await page.getByText("compiling web", { exact: true }).waitFor();
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test("a matrix from an earlier job's output shows its legs, and one that comes out wrong says why", async () => {
  const planned = (targets) => `name: planned
jobs:
  plan:
    runs-on: [linux]
    outputs: {targets: "\${{ steps.p.outputs.targets }}"}
    steps:
      - id: p
        run: |
          echo 'targets=${targets}' >> "$GITHUB_OUTPUT"
  build:
    needs: plan
    runs-on: [linux]
    strategy: {matrix: {target: "\${{ fromJSON(needs.plan.outputs.targets) }}"}}
    steps: [{run: 'echo building \${{ matrix.target }}'}]
`;
  const good = await submit(planned('["web","cli"]'));
  await until("the run to succeed", async () => (await run(good.id)).status === "succeeded");
  let page = await signedIn(`/runs/${good.id}`);
  for (const leg of ["build (web)", "build (cli)"]) {
    await page.locator(`tr[data-job="${leg}"] [data-status="succeeded"]`).waitFor();
  }
  await page.context().close();

  const empty = await submit(planned("[]"));
  await until("the run to fail", async () => (await run(empty.id)).status === "failed");
  page = await signedIn(`/runs/${empty.id}`);
  const row = page.locator('tr[data-job="build"]');
  await row.getByText("invalid matrix").waitFor();
  await row.getByText("strategy.matrix.target: 1 to 256 values").waitFor();
  await shots(page, "matrix-invalid");
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test("an artifact downloads byte-identical", async () => {
  const created = await submit(`name: artifact
jobs:
  make:
    runs-on: [linux]
    steps:
      - run: head -c 300000 /dev/urandom > payload.bin
      - upload: {name: payload, path: payload.bin}
`);
  const view = await until("the artifact to be stored", async () => {
    const v = await run(created.id);
    return v.status === "succeeded" && v.artifacts?.[0]?.status === "stored" && v;
  });
  const page = await signedIn(`/runs/${created.id}`);
  const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Download payload" }).click()]);
  const bytes = readFileSync(await download.path());
  assert.equal(createHash("sha256").update(bytes).digest("hex"), view.artifacts[0].sha256);
  assert.equal(bytes.length, view.artifacts[0].bytes);
  await page.context().close();
});

test("a secret and a variable set on the settings page reach a job, and the secret is never displayed", async () => {
  const value = `s3cr3t-${randomBytes(12).toString("hex")}`;
  const page = await signedIn("/settings");
  const secrets = page.locator('section[aria-labelledby="secrets"]');
  await secrets.getByLabel("Name").fill("DEPLOY_KEY");
  await secrets.getByLabel("Value").fill(value);
  await page.getByRole("button", { name: "Save secret" }).click();
  await page.locator('tr[data-secret="DEPLOY_KEY"]').waitFor();
  // A variable is not secret: its value is listed, under its upper-cased name.
  const variables = page.locator('section[aria-labelledby="variables"]');
  await variables.getByLabel("Name").fill("deploy_region");
  await variables.getByLabel("Value").fill("eu-west-1");
  await page.getByRole("button", { name: "Save variable" }).click();
  await page.locator('tr[data-variable="DEPLOY_REGION"]', { hasText: "eu-west-1" }).waitFor();
  const tokens = page.locator('section[aria-labelledby="tokens"]');
  await tokens.getByLabel("Name").fill("ci-fleet");
  await page.getByRole("button", { name: "Create a token" }).click();
  const token = await page.getByTestId("new-token").innerText();
  const register = (labels) => api("POST", "/v1/runners/register", { labels }, token);
  assert.equal((await register(["linux"])).status, 201, "the token shown registers a runner");
  await page.getByRole("button", { name: "Revoke ci-fleet" }).click();
  await tokens.locator("tr", { hasText: "ci-fleet" }).filter({ hasText: "revoked" }).waitFor();
  assert.equal((await register(["linux"])).status, 401, "a revoked token registers nothing");
  await shots(page, "settings");
  await noSeriousA11yViolations(page, "settings");
  assert.ok(!(await page.content()).includes(value), "the settings page never shows the value");

  const digest = createHash("sha256").update(value).digest("hex");
  const created = await submit(`name: uses-secret
jobs:
  check:
    runs-on: [linux]
    env: {DEPLOY_KEY: "\${{ secrets.DEPLOY_KEY }}"}
    steps: [{run: 'printf %s "$DEPLOY_KEY" | sha256sum; echo "region \${{ vars.DEPLOY_REGION }}"'}]
`);
  const view = await until("the job to succeed", async () => {
    const v = await run(created.id);
    return v.status === "succeeded" && v;
  });
  await page.goto(`${stack.url}/runs/${created.id}/jobs/${job(view, "check").id}`);
  await page.getByText(digest).waitFor();
  await page.getByText("region eu-west-1").waitFor();
  assert.ok(!(await page.content()).includes(value), "the run page never shows the value");
  await page.context().close();
});

test("the fleet page shows the elastic fleet going up and back to zero", async () => {
  const page = await signedIn("/fleet");
  const instances = page.locator('[data-provisioner="dev-fleet"] [data-testid="instances-now"]');
  await instances.waitFor();
  const created = await submit(`name: fleet
jobs:
  a: {runs-on: [linux], steps: [{run: sleep 4}]}
  b: {runs-on: [linux], steps: [{run: sleep 4}]}
  c: {runs-on: [linux], steps: [{run: sleep 4}]}
`);
  const peak = await until("instances to come up", async () => {
    const n = Number(await instances.innerText());
    return n > 0 && n;
  }, 30_000);
  // The instances themselves, each with its state.
  await page.locator('[data-provisioner="dev-fleet"] tr[data-instance]').first().waitFor({ timeout: 30_000 });
  await shots(page, "fleet");
  await noSeriousA11yViolations(page, "fleet");
  await until("the run to succeed", async () => (await run(created.id)).status === "succeeded", 90_000);
  await until("the fleet back to zero", async () => (await instances.innerText()) === "0", 90_000);
  console.log(`# fleet: up to ${peak} instance(s) on the page, then back to 0`);
  await page.context().close();
});

test("a 256-job fan-out's graph renders with its legs grouped", async () => {
  const created = await submit(`name: fanout
jobs:
  prepare: {runs-on: [linux], steps: [{run: echo ready}]}
  shard:
    needs: prepare
    runs-on: [nobody-offers-this]
    strategy: {matrix: {n: [${Array.from({ length: 254 }, (_, i) => i).join(", ")}]}}
    steps: [{run: echo shard}]
  merge: {needs: shard, runs-on: [linux], steps: [{run: echo merged}]}
`);
  const page = await signedIn("/runs");
  const t0 = Date.now();
  await page.goto(`${stack.url}/runs/${created.id}`);
  await page.locator('[data-group="shard"]').waitFor();
  const shown = Date.now() - t0;
  // 256 jobs (the most a run may have): 254 matrix legs in one node.
  assert.equal(await page.locator("[data-group]").count(), 3, "the legs are one node");
  assert.equal(await page.locator('[data-group="shard"]').getAttribute("data-legs"), "254");
  assert.equal(await page.locator("table.jobs tbody tr").count(), 256, "every job is listed");
  await page.locator('[data-group="shard"] button').click();
  assert.equal(await page.locator(".legs li").count(), 254, "opened, the node lists every leg");
  console.log(`# 256-job run page: graph shown after ${shown} ms; JS heap ${await heapMb(page)} MB`);
  await shots(page, "fanout");
  await api("POST", `/v1/workspaces/${ws}/runs/${created.id}/cancel`);
  await page.context().close();
});

test("a 100,000-line log opens, searches to its end and is never cut", async () => {
  const created = await submit(`name: big-log
jobs:
  noisy:
    runs-on: [linux]
    steps:
      - name: print
        run: seq 1 100000 | sed 's/^/line /'
`);
  const view = await until("the noisy job to end", async () => {
    const v = await run(created.id);
    return v.status !== "running" && v.status !== "pending" && v;
  }, 180_000);
  assert.equal(view.status, "succeeded");
  const page = await signedIn("/runs");
  const t0 = Date.now();
  await page.goto(`${stack.url}/runs/${created.id}/jobs/${job(view, "noisy").id}`);
  await page.getByText("line 1", { exact: true }).waitFor({ timeout: 30_000 });
  const first = Date.now() - t0;
  await page.getByLabel("Search this job").fill("line 99990");
  await until("the search to find the line near the end", async () => {
    const [count, state] = [await page.getByTestId("match-count").innerText(), await page.getByTestId("log-state").innerText()];
    return count === "1 of 1" || (state.endsWith("· live") ? false : { count, state });
  }, 120_000, 500);
  assert.equal(await page.getByTestId("match-count").innerText(), "1 of 1");
  await page.getByLabel("Search this job").press("Enter");
  const hitRow = page.locator(".row.hit", { hasText: "line 99990" });
  await hitRow.waitFor({ timeout: 10_000 });
  const hit = Date.now() - t0;
  const hitLine = await hitRow.getAttribute("data-line");
  await page.getByTestId("log-state").filter({ hasText: /^10000\d lines$/ }).waitFor({ timeout: 60_000 });
  const rendered = await page.locator(".row").count();
  assert.ok(rendered < 500, `virtualized: ${rendered} rows in the DOM`);
  console.log(`# 100,000-line log: first lines after ${first} ms, a search hit near the end after ${hit} ms, ${rendered} rows in the DOM, JS heap ${await heapMb(page)} MB`);
  // A line link survives a reload.
  await page.goto(`${stack.url}/runs/${created.id}/jobs/${job(view, "noisy").id}#L${hitLine}`);
  await page.locator(`.row.target[data-line="${hitLine}"]`, { hasText: "line 99990" }).waitFor({ timeout: 120_000 });
  await page.context().close();
});
