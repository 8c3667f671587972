// End-to-end test of the web console in headless Chromium, driven by playwright-core.
// gateway/console_test.go runs it against an in-process node whose scripted model plans a
// human_input step; run by hand the same way:
//
//   CONSOLE_URL=http://127.0.0.1:8080/console/ WRITE_TOKEN=... READ_TOKEN=... \
//   PLAYWRIGHT_DIR=$(scripts/install-console-test.sh | head -1) CHROMIUM=/usr/bin/chromium \
//   [SCREENSHOTS=docs] node scripts/console-e2e.mjs
//
// It starts a session from the console, answers its human-input request in place,
// watches it complete, moves the time-travel slider, checks the sessions list, the
// cluster page (members and the restarts feed, RESTART_SESSION names a session whose
// forced restart must appear) and that a read token gets a read-only console. It exits
// 0 on success and prints what failed otherwise. Screenshots go to SCREENSHOTS when set.
import { createRequire } from "node:module";
import path from "node:path";

const env = (name, fallback) => {
  const v = process.env[name] ?? fallback;
  if (v === undefined) {
    console.error(`console-e2e: ${name} is not set`);
    process.exit(2);
  }
  return v;
};
const url = env("CONSOLE_URL");
const writeToken = env("WRITE_TOKEN");
const readToken = env("READ_TOKEN");
const shots = env("SCREENSHOTS", "");
const sessionID = env("SESSION_ID", "console-1");
const answer = env("ANSWER", '{"n": 2}');
const restartSession = env("RESTART_SESSION", "");
const loadRuns = Number(env("LOAD_RUNS", "0"));
const require = createRequire(path.join(env("PLAYWRIGHT_DIR"), "/"));
const { chromium } = require("playwright-core");

const timeout = 60_000;
const step = (msg) => console.log(`console-e2e: ${msg}`);
const shot = async (page, name) => {
  // The page's first 1,600 px: the session page with its transcript and timeline runs
  // to many screens.
  if (!shots) return;
  const height = Math.min(1600, await page.evaluate(() => document.documentElement.scrollHeight));
  await page.screenshot({ path: path.join(shots, name), fullPage: true, clip: { x: 0, y: 0, width: 1360, height } });
};

const browser = await chromium.launch({ executablePath: env("CHROMIUM"), args: ["--no-sandbox"] });
let failed = false;
try {
  const ctx = await browser.newContext({ viewport: { width: 1360, height: 900 } });
  const page = await ctx.newPage();
  page.setDefaultTimeout(timeout);
  page.on("pageerror", (e) => { console.error(`page error: ${e.message}`); failed = true; });
  const loadStart = Date.now();
  await page.goto(url);
  await page.getByTestId("token").fill(writeToken);
  await page.getByTestId("token-save").click();
  await page.getByTestId("scope").filter({ hasText: "read + write" }).waitFor();
  await page.getByTestId("ws-state").filter({ hasText: "live" }).waitFor();
  step(`console ready with a write token in ${Date.now() - loadStart} ms`);

  // Start a session from the console.
  await page.getByTestId("start-goal").fill("Print some copies of a haiku");
  await page.getByTestId("start-id").fill(sessionID);
  await page.getByTestId("start-user").fill("console-user");
  await page.getByTestId("start-submit").click();
  await page.waitForURL(new RegExp(`#/session/${sessionID}$`));
  step("started a session; on its page");

  // Answer the human-input request in place.
  await page.getByTestId("question").waitFor();
  await page.getByTestId("session-status").filter({ hasText: "awaiting_human" }).waitFor();
  await shot(page, "console-awaiting.png");
  await page.getByTestId("answer").fill(answer);
  await page.getByTestId("answer-submit").click();
  step("answered the human-input request");

  // Watch it complete: the status, the live events, the plan.
  await page.getByTestId("session-status").filter({ hasText: "completed" }).waitFor();
  await page.locator('[data-testid="events"] li[data-type="session_completed"]').waitFor();
  await page.locator('[data-testid="events"] li[data-type="hitl_received"]').waitFor();
  const planSteps = await page.locator('[data-testid="plan"] > li').count();
  if (planSteps < 2) throw new Error(`the plan shows ${planSteps} steps, want 2`);
  step(`completed; the plan shows ${planSteps} steps`);

  // Move the time-travel slider to after step 1.
  const slider = page.getByTestId("slider");
  await page.waitForFunction(() => Number(document.querySelector('[data-testid="slider"]').max) >= 2);
  await slider.fill("1");
  await page.getByTestId("slider-label").filter({ hasText: "after step 1 of 2" }).waitFor();
  const past = await page.locator('[data-testid="past-plan"] .badge').allTextContents();
  if (past[0] !== "completed" || past[1] === "completed") throw new Error(`the state after step 1 shows steps ${past}`);
  step(`slider at step 1: steps ${past.join(", ")}`);

  // A delegated session: the plan tree shows its sub-agents and their hand-offs.
  await page.getByTestId("nav-sessions").click();
  await page.getByTestId("start-goal").fill("Explain virtual actors");
  await page.getByTestId("start-id").fill(sessionID + "-delegated");
  await page.getByTestId("start-submit").click();
  await page.getByTestId("session-status").filter({ hasText: "completed" }).waitFor();
  await page.locator('[data-testid="plan"] [data-subagent]').first().waitFor();
  await page.locator('[data-testid="plan"] [data-handoff]').first().waitFor();
  await page.locator('[data-testid="artifacts"] [data-artifact]').first().waitFor();
  const subs = await page.locator('[data-testid="plan"] [data-subagent]').count();
  step(`delegated session: ${subs} sub-agents with hand-offs in the plan tree`);
  await shot(page, "console-session.png");

  // The sessions list shows it, completed, with its goal and user.
  await page.getByTestId("nav-sessions").click();
  const row = page.locator(`tr[data-session="${sessionID}"]`);
  await row.locator(".badge", { hasText: "completed" }).waitFor();
  const cells = await row.locator("td").allTextContents();
  if (!cells[2].includes("haiku") || cells[3] !== "console-user" || !cells[5].startsWith("$")) throw new Error(`list row ${cells}`);
  await shot(page, "console-sessions.png");
  await page.getByTestId("filter-status").selectOption("failed");
  await page.getByTestId("filter-apply").click();
  await row.waitFor({ state: "detached" });
  await page.getByTestId("filter-status").selectOption("");
  await page.getByTestId("filter-goal").fill("HAIKU");
  await page.getByTestId("filter-apply").click();
  await row.waitFor();
  step("listed and filtered");

  // The cluster page: this node and the live restarts feed.
  await page.getByTestId("nav-cluster").click();
  await page.locator('[data-testid="members"] tbody tr').first().waitFor();
  const node = await page.getByTestId("cluster-node").textContent();
  if (!node) throw new Error("no node address on the cluster page");
  if (restartSession) {
    await page.locator('[data-testid="restarts"] tbody tr', { hasText: restartSession }).first().waitFor();
    step(`the forced restart of ${restartSession} is in the restarts feed`);
  }
  step(`cluster page: node ${node}`);
  await shot(page, "console-cluster.png");

  // A read token: a read-only console.
  const ro = await (await browser.newContext()).newPage();
  ro.setDefaultTimeout(timeout);
  await ro.goto(url + "#/session/" + sessionID);
  await ro.getByTestId("token").fill(readToken);
  await ro.getByTestId("token-save").click();
  await ro.getByTestId("scope").filter({ hasText: "read-only" }).waitFor();
  await ro.getByTestId("session-status").filter({ hasText: "completed" }).waitFor();
  for (const id of ["pause", "cancel", "fork"]) {
    if (await ro.getByTestId(id).isVisible()) throw new Error(`the read-only console shows ${id}`);
  }
  await ro.getByTestId("nav-sessions").click();
  await ro.locator(`tr[data-session="${sessionID}"]`).waitFor();
  if (await ro.getByTestId("start-form").isVisible()) throw new Error("the read-only console offers to start a session");
  step("read token: read-only console");

  // The sessions page's load time, from navigation to the first page of rows (50 of
  // however many the index holds), in a fresh page each run.
  if (loadRuns > 0) {
    const times = [];
    for (let i = 0; i < loadRuns; i++) {
      const p = await ctx.newPage();
      await p.addInitScript((t) => sessionStorage.setItem("fathom.token", t), writeToken);
      const t0 = Date.now();
      await p.goto(url);
      await p.locator('[data-testid="sessions"] tbody tr').nth(49).waitFor();
      times.push(Date.now() - t0);
      await p.close();
    }
    times.sort((a, b) => a - b);
    step(`sessions page load: p50 ${times[Math.floor(times.length / 2)]} ms over ${loadRuns} runs (${times.join(", ")} ms)`);
  }
} catch (e) {
  console.error(`console-e2e: FAILED: ${e.message}`);
  failed = true;
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
