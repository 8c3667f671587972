// End-to-end test of the web console's session controls in headless Chromium, driven by
// playwright-core: pause and resume, a breakpoint before a step type, fork at a point of
// the time-travel slider (the fork inherits the breakpoint; clear it and resume), and
// cancel. gateway/console_test.go (TestConsoleControls) runs
// it against an in-process node after starting three sessions (PAUSE_SESSION,
// BREAK_SESSION, CANCEL_SESSION) that wait for a human's answer to step "ask"; it checks
// the journal afterwards. Environment: CONSOLE_URL, WRITE_TOKEN, PLAYWRIGHT_DIR, CHROMIUM,
// ANSWER (the JSON answer), FORK_ID (the fork's session id). Exits 0 on success.
import { createRequire } from "node:module";
import path from "node:path";

const env = (name, fallback) => {
  const v = process.env[name] ?? fallback;
  if (v === undefined) {
    console.error(`console-controls-e2e: ${name} is not set`);
    process.exit(2);
  }
  return v;
};
const url = env("CONSOLE_URL");
const token = env("WRITE_TOKEN");
const answer = env("ANSWER", '{"n": 2}');
const require = createRequire(path.join(env("PLAYWRIGHT_DIR"), "/"));
const { chromium } = require("playwright-core");
const step = (msg) => console.log(`console-controls-e2e: ${msg}`);

const browser = await chromium.launch({ executablePath: env("CHROMIUM"), args: ["--no-sandbox"] });
let failed = false;
try {
  const ctx = await browser.newContext({ viewport: { width: 1360, height: 900 } });
  await ctx.addInitScript((t) => sessionStorage.setItem("fathom.token", t), token);
  const page = await ctx.newPage();
  page.setDefaultTimeout(60_000);
  page.on("pageerror", (e) => { console.error(`page error: ${e.message}`); failed = true; });
  const status = (s) => page.getByTestId("session-status").filter({ hasText: new RegExp(`^${s}$`) }).waitFor();
  const open = async (id) => {
    await page.goto(url + "#/session/" + encodeURIComponent(id));
    await page.getByTestId("session-id").filter({ hasText: id }).waitFor();
    await page.getByTestId("ws-state").filter({ hasText: "live" }).waitFor();
  };
  const click = async (id, op) => {
    await page.getByTestId(id).click();
    await page.getByTestId("toast").filter({ hasText: `${op}: ok` }).waitFor();
  };
  const answerAsk = async () => {
    await page.getByTestId("question").waitFor();
    await page.getByTestId("answer").fill(answer);
    await page.getByTestId("answer-submit").click();
  };

  // Pause while the session waits for a human: it stops before its next step; resume
  // runs it to the end.
  await open(env("PAUSE_SESSION"));
  await status("awaiting_human");
  await click("pause", "pause");
  await answerAsk();
  await status("interrupted");
  step("paused: the session stopped before its next step");
  await click("resume", "resume");
  await status("completed");
  step("resumed: completed");

  // A breakpoint before the custom step: the same stop, by step type.
  await open(env("BREAK_SESSION"));
  await status("awaiting_human");
  await page.getByTestId("bp-type").fill("custom");
  await click("breakpoint", "set_breakpoint");
  await answerAsk();
  await status("interrupted");
  step("the breakpoint before the custom step stopped the session");
  await click("resume", "resume");
  await status("completed");

  // Fork it after its first step with the slider; the console opens the fork.
  const forkID = env("FORK_ID");
  await page.waitForFunction(() => Number(document.querySelector('[data-testid="slider"]').max) >= 2);
  await page.getByTestId("slider").fill("1");
  await page.getByTestId("slider-label").filter({ hasText: "after step 1 of 2" }).waitFor();
  await page.getByTestId("fork-id").fill(forkID);
  await click("fork", "fork");
  await page.waitForURL(new RegExp(`#/session/${forkID}$`));
  await page.getByTestId("session-id").filter({ hasText: forkID }).waitFor();
  // The fork's past holds the source's breakpoint: it stops before the custom step too.
  await status("interrupted");
  await click("clear-breakpoints", "clear_breakpoints");
  await click("resume", "resume");
  await status("completed");
  step(`forked after step 1 as ${forkID}; it stopped at the inherited breakpoint, then completed`);

  // Cancel a waiting session.
  await open(env("CANCEL_SESSION"));
  await status("awaiting_human");
  await click("cancel", "cancel");
  await status("cancelled");
  await page.locator('[data-testid="events"] li[data-type="session_cancelled"]').waitFor();
  step("cancelled");
} catch (e) {
  console.error(`console-controls-e2e: FAILED: ${e.message}`);
  for (const p of browser.contexts().flatMap((c) => c.pages())) {
    const seen = await p.evaluate(() => ({
      url: location.hash,
      status: document.querySelector('[data-testid="session-status"]')?.textContent,
      events: [...document.querySelectorAll('[data-testid="events"] li')].slice(-4).map((li) => li.dataset.type),
    })).catch(() => null);
    console.error(`console-controls-e2e: the page showed ${JSON.stringify(seen)}`);
  }
  failed = true;
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
