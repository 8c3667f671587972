// End-to-end test of the console's memories page in headless Chromium, driven by
// playwright-core. gateway/console_memories_test.go runs it against an in-process node
// with long-term memory where a session of user MEMORY_USER saved MEMORY_TEXT; run by
// hand the same way:
//
//   CONSOLE_URL=http://127.0.0.1:8080/console/ WRITE_TOKEN=... MEMORY_USER=u1 \
//   MEMORY_TEXT="..." MEMORY_QUERY=LOCK-4417 PLAYWRIGHT_DIR=$(scripts/install-console-test.sh | head -1) \
//   CHROMIUM=/usr/bin/chromium [SCREENSHOTS=docs] node scripts/console-memories-e2e.mjs
//
// It checks that the user's memories are listed, that a search finds the memory and a
// search for nothing shows none, and that deleting it from the page removes it. It
// exits 0 on success and prints what failed otherwise.
import { createRequire } from "node:module";
import path from "node:path";

const env = (name, fallback) => {
  const v = process.env[name] ?? fallback;
  if (v === undefined) {
    console.error(`console-memories-e2e: ${name} is not set`);
    process.exit(2);
  }
  return v;
};
const url = env("CONSOLE_URL");
const writeToken = env("WRITE_TOKEN");
const user = env("MEMORY_USER");
const text = env("MEMORY_TEXT");
const query = env("MEMORY_QUERY");
const shots = env("SCREENSHOTS", "");
const require = createRequire(path.join(env("PLAYWRIGHT_DIR"), "/"));
const { chromium } = require("playwright-core");

const step = (msg) => console.log(`console-memories-e2e: ${msg}`);
const browser = await chromium.launch({ executablePath: env("CHROMIUM"), args: ["--no-sandbox"] });
let failed = false;
let page;
try {
  const ctx = await browser.newContext({ viewport: { width: 1360, height: 900 } });
  page = await ctx.newPage();
  // Generous: under a loaded CI machine (test packages in parallel on 2 cores) one wait
  // once overran 30 s. A failure prints what the page showed.
  page.setDefaultTimeout(60_000);
  page.on("pageerror", (e) => { console.error(`page error: ${e.message}`); failed = true; });
  page.on("dialog", (d) => d.accept());
  await page.goto(url);
  await page.getByTestId("token").fill(writeToken);
  await page.getByTestId("token-save").click();
  await page.getByTestId("ws-state").filter({ hasText: "live" }).waitFor();
  await page.getByTestId("nav-memories").click();
  const rows = page.locator('[data-testid="memories"] tbody tr');

  await page.getByTestId("memory-user").fill(user);
  await page.getByTestId("memory-show").click();
  await rows.filter({ hasText: text }).first().waitFor();
  step(`${user}'s memories list "${text}"`);
  if (shots) await page.screenshot({ path: path.join(shots, "console-memories.png"), fullPage: true });

  await page.getByTestId("memory-q").fill("zebra-nothing-matches");
  await page.getByTestId("memory-show").click();
  await page.getByTestId("memory-none").waitFor({ state: "visible" });
  step("a search without a match shows none");

  await page.getByTestId("memory-q").fill(query);
  await page.getByTestId("memory-show").click();
  const row = rows.filter({ hasText: text }).first();
  await row.waitFor();
  step(`the search ${query} finds it`);

  await row.getByTestId("memory-delete").click();
  await page.getByTestId("memory-none").waitFor({ state: "visible" });
  step("deleted from the page: the search finds nothing");
} catch (e) {
  console.error(`console-memories-e2e: FAILED: ${e.message}`);
  failed = true;
  if (page) {
    const shown = await page.locator("body").innerText({ timeout: 5_000 }).catch((err) => `(unreadable: ${err.message})`);
    console.error(`console-memories-e2e: the page (${page.url()}) showed:\n${shown.slice(0, 3000)}`);
  }
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
