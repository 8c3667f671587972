// End-to-end test of the console's cluster page in headless Chromium, driven by
// playwright-core. gateway/console_cluster_test.go runs it against an in-process node
// hosting one session and with the forced restarts of the sessions RESTART_SESSIONS
// (comma-separated) in its feed; run by hand the same way:
//
//   CONSOLE_URL=http://127.0.0.1:8080/console/ WRITE_TOKEN=... VERSION=v0.3.0 HOSTED=1 \
//   RESTART_SESSIONS=a,b PLAYWRIGHT_DIR=$(scripts/install-console-test.sh | head -1) \
//   CHROMIUM=/usr/bin/chromium [SCREENSHOTS=docs] node scripts/console-cluster-e2e.mjs
//
// It checks that the member is listed with its version VERSION and HOSTED sessions
// hosted, and that the restarts filters narrow the feed: by session to that session's
// restarts only, by kind and member to the rows of that kind and member. It exits 0 on
// success and prints what failed otherwise.
import { createRequire } from "node:module";
import path from "node:path";

const env = (name, fallback) => {
  const v = process.env[name] ?? fallback;
  if (v === undefined) {
    console.error(`console-cluster-e2e: ${name} is not set`);
    process.exit(2);
  }
  return v;
};
const url = env("CONSOLE_URL");
const writeToken = env("WRITE_TOKEN");
const version = env("VERSION");
const hosted = env("HOSTED");
const restartSessions = env("RESTART_SESSIONS").split(",").filter(Boolean);
const shots = env("SCREENSHOTS", "");
const require = createRequire(path.join(env("PLAYWRIGHT_DIR"), "/"));
const { chromium } = require("playwright-core");

const step = (msg) => console.log(`console-cluster-e2e: ${msg}`);
const browser = await chromium.launch({ executablePath: env("CHROMIUM"), args: ["--no-sandbox"] });
let failed = false;
const check = (ok, msg) => {
  if (!ok) throw new Error(msg);
  step(msg);
};
try {
  const ctx = await browser.newContext({ viewport: { width: 1360, height: 900 } });
  const page = await ctx.newPage();
  page.setDefaultTimeout(30_000);
  page.on("pageerror", (e) => { console.error(`page error: ${e.message}`); failed = true; });
  await page.goto(url);
  await page.getByTestId("token").fill(writeToken);
  await page.getByTestId("token-save").click();
  await page.getByTestId("ws-state").filter({ hasText: "live" }).waitFor();
  await page.getByTestId("nav-cluster").click();
  const node = (await page.getByTestId("cluster-node").textContent()) || "";
  await page.waitForFunction(() => !!document.querySelector("[data-testid=cluster-node]")?.textContent);
  const nodeAddr = await page.getByTestId("cluster-node").textContent();
  check(!!nodeAddr, `cluster page: node ${nodeAddr || node}`);

  // The member, with its version and the sessions it hosts.
  const row = page.locator(`[data-testid="members"] tbody tr[data-member="${nodeAddr}"]`);
  await row.waitFor();
  const cell = async (col) => (await row.locator(`td[data-col="${col}"]`).textContent()).trim();
  await page.waitForFunction(([addr, v]) => document.querySelector(`tr[data-member="${addr}"] td[data-col="version"]`)?.textContent === v, [nodeAddr, version]);
  check((await cell("version")) === version, `the member shows version ${version}`);
  check((await cell("sessions")) === hosted, `the member shows ${hosted} session(s) hosted`);

  // The restarts feed, then its filters.
  const rows = page.locator('[data-testid="restarts"] tbody tr');
  const visible = page.locator('[data-testid="restarts"] tbody tr:visible');
  for (const s of restartSessions) await rows.filter({ hasText: s }).first().waitFor();
  const total = await rows.count();
  check(total >= restartSessions.length, `the feed holds ${total} restarts, of ${restartSessions.join(", ")}`);
  const [one, other] = restartSessions;
  await page.getByTestId("restart-filter-session").fill(one);
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid="restarts"] tbody tr:not([hidden])').length < n, total);
  const shown = await visible.allTextContents();
  check(shown.length > 0 && shown.every((t) => t.includes(one)) && !shown.some((t) => t.includes(other)),
    `filtered by session ${one}: ${shown.length} of ${total} rows, none of ${other}`);
  if (shots) await page.screenshot({ path: path.join(shots, "console-cluster.png"), fullPage: true });

  // By kind: the session's restarts are all of one kind; choosing it keeps them.
  const kind = (await visible.first().locator("td").nth(3).textContent()).trim();
  await page.getByTestId("restart-filter-kind").selectOption(kind);
  check((await visible.count()) === shown.length, `filtered by kind ${kind} too: still ${shown.length} rows`);
  // By member: this node keeps them; no other member exists, so the options hold only it.
  await page.getByTestId("restart-filter-node").selectOption(nodeAddr);
  check((await visible.count()) === shown.length, `filtered by member ${nodeAddr} too: still ${shown.length} rows`);
  // Clearing the session filter brings the other session's restarts back.
  await page.getByTestId("restart-filter-session").fill("");
  await visible.filter({ hasText: other }).first().waitFor();
  check((await visible.count()) > shown.length, `session filter cleared: ${await visible.count()} rows again`);
} catch (e) {
  console.error(`console-cluster-e2e: FAILED: ${e.message}`);
  failed = true;
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
